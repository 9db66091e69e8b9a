package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-sandbox/airlock"
)

// spiller moves idle sessions out of memory when what the table's
// sessions hold passes the budget: the least recently used are saved
// (Session.Save, as a SessionStore keeps them) to files in a private
// directory and closed; a call loads its session back.
type spiller struct {
	budget int64
	sb     *airlock.Sandbox
	load   airlock.LoadOptions
	parent string // where the private directory is made
	log    *slog.Logger

	dirOnce sync.Once
	dir     string
	dirErr  error

	spilled, loaded prometheus.Counter
}

// directory is the private directory spilled sessions go to, made on
// first use (0700: a saved session is its guest's memory and files).
func (p *spiller) directory() (string, error) {
	p.dirOnce.Do(func() {
		p.dir, p.dirErr = os.MkdirTemp(p.parent, "airlock-spill-")
		if p.dirErr == nil {
			p.dirErr = os.Chmod(p.dir, 0o700)
		}
	})
	return p.dir, p.dirErr
}

// removeAll removes the directory and every spilled session (shutdown).
func (p *spiller) removeAll() {
	p.dirOnce.Do(func() {}) // none is made after this
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

func (p *spiller) expired(e *sessionEntry) bool {
	ttl := p.sb.SessionTTL()
	return ttl >= 0 && time.Since(e.lastActive()) > ttl
}

// heldLocked is what the sessions in memory hold, with what is reserved
// for sessions on their way in and runs in flight, and what the process
// holds besides (Config.CountProcessMemory).
func (t *sessions) heldLocked() int64 {
	sum := t.reserved + t.fixed.Load() + t.idleLoad() + t.heapRoom
	for _, e := range t.byID {
		if e.sess != nil {
			sum += e.held
		}
	}
	return sum
}

// held is heldLocked, for metrics and tests.
func (t *sessions) held() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.heldLocked()
}

// spilledNow tells whether session id is on disk (tests).
func (t *sessions) spilledNow(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	return e != nil && e.sess == nil
}

// victimLocked is the least recently used session in memory that may be
// spilled (idle, not moving, not except), marked moving; nil if none.
func (t *sessions) victimLocked(except *sessionEntry) *sessionEntry {
	var v *sessionEntry
	for _, e := range t.byID {
		if e == except || e.sess == nil || e.running || e.moving || e.sess.Err() != nil {
			continue
		}
		if v == nil || e.lastActive().Before(v.lastActive()) {
			v = e
		}
	}
	if v != nil {
		v.moving = true
	}
	return v
}

// reserve makes room for need more bytes, dropping the engine's idle
// regions (when they are counted) and then spilling idle sessions (never
// except) least recently used first, and reserves it: the caller gives
// it back with unreserve once the session is in the table. A
// *budgetError if it cannot.
func (t *sessions) reserve(need int64, except *sessionEntry) error {
	dropped := false
	for {
		t.mu.Lock()
		if need > t.roomLocked() {
			t.mu.Unlock()
			return &budgetError{need: need, budget: t.roomLocked(), never: true}
		}
		if t.heldLocked()+need <= t.spill.budget {
			t.reserved += need
			t.mu.Unlock()
			return nil
		}
		// The engine's idle regions go first: one is made again in
		// milliseconds, a session moved out and back costs far more.
		if !dropped && t.dropIdle != nil && t.idleLoad() > 0 {
			t.mu.Unlock()
			t.dropIdle()
			dropped = true
			continue
		}
		v := t.victimLocked(except)
		t.mu.Unlock()
		if v == nil {
			return &budgetError{need: need, budget: t.spill.budget}
		}
		t.spillEntry(v)
	}
}

// room is the budget less what the process holds at start
// (Config.CountProcessMemory): the most sessions and runs can ever have.
func (t *sessions) room() int64 { return t.spill.budget - t.fixed.Load() - t.heapRoom }

// idleLoad is the engine's idle memory as counted: as sampled, and the
// regions of the runs ended since, at their memory limits.
func (t *sessions) idleLoad() int64 { return t.idleRegions.Load() + t.idleEnded.Load() }

func (t *sessions) roomLocked() int64 { return t.room() }

func (t *sessions) unreserve(n int64) {
	t.mu.Lock()
	t.reserved -= n
	t.signalFreedLocked()
	t.mu.Unlock()
}

// signalFreedLocked wakes the runs waiting for room (admitRun): memory
// was given back or became movable (under mu).
func (t *sessions) signalFreedLocked() {
	if t.freed != nil {
		close(t.freed)
		t.freed = nil
	}
}

// freedLocked is closed the next time memory is given back (under mu).
func (t *sessions) freedLocked() <-chan struct{} {
	if t.freed == nil {
		t.freed = make(chan struct{})
	}
	return t.freed
}

// neverFits is the *budgetError (never) for a run whose memory limit
// (need) and the session it calls (alongside, 0 for a plain run) pass all
// the budget can ever give: no wait or spill makes room for it.
func (t *sessions) neverFits(need, alongside int64) error {
	room := t.room()
	if need+alongside <= room {
		return nil
	}
	if alongside > 0 {
		return &budgetError{need: need + alongside, budget: room, never: true,
			what: fmt.Sprintf("the session (%s) with its call's memory limit (%s)", mib(alongside), mib(need))}
	}
	return &budgetError{need: need, budget: room, never: true, what: "the run's memory limit"}
}

// admitRun reserves a run's memory cap (need) within the budget, beside
// what the sessions hold: idle sessions are spilled to make room, and
// while runs and calls in flight hold it the run waits up to wait, with
// at most maxWaiting others; past either, a *budgetError. alongside is
// what the called session holds during the run (0 for a plain run): the
// call can never fit (never) when need and alongside pass the budget.
// done gives the room back.
func (t *sessions) admitRun(ctx context.Context, need, alongside int64, wait time.Duration, maxWaiting int) (done func(), err error) {
	const what = "the run's memory limit"
	if err := t.neverFits(need, alongside); err != nil {
		return nil, err
	}
	done = func() {
		// Its region stays, in the engine's pool, until measured: the
		// room moves to the idle count rather than back to the budget.
		if t.dropIdle != nil {
			t.idleEnded.Add(need)
		}
		t.unreserve(need)
	}
	err = t.reserve(need, nil)
	var be *budgetError
	if err == nil || !errors.As(err, &be) {
		return done, err
	}
	t.mu.Lock()
	if t.admitWaiting >= maxWaiting {
		t.mu.Unlock()
		be.what, be.queueFull = what, true
		return nil, be
	}
	t.admitWaiting++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.admitWaiting--
		t.mu.Unlock()
	}()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		freed := t.freedLocked()
		t.mu.Unlock()
		if err = t.reserve(need, nil); err == nil || !errors.As(err, &be) {
			return done, err
		}
		select {
		case <-freed:
		case <-deadline.C:
			be.what = what
			return nil, be
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fit spills idle sessions, least recently used first, until what the
// table holds is within the budget or only running ones are left (they
// are spilled after their calls, if still needed).
func (t *sessions) fit() {
	t.mu.Lock()
	// Spilled sessions past their TTL leave the disk here too, not only
	// when the table is next listed or grown.
	t.dropEnded()
	t.mu.Unlock()
	dropped := false
	for {
		t.mu.Lock()
		if t.heldLocked() <= t.spill.budget {
			t.mu.Unlock()
			return
		}
		if !dropped && t.dropIdle != nil && t.idleLoad() > 0 {
			t.mu.Unlock()
			t.dropIdle() // before any session moves out, as in reserve
			dropped = true
			continue
		}
		v := t.victimLocked(nil)
		t.mu.Unlock()
		if v == nil {
			return
		}
		t.spillEntry(v)
	}
}

// spillEntry saves v (marked moving) to a file and closes it in memory.
// If it cannot be saved, it stays in memory: over the budget for a while
// rather than lost.
func (t *sessions) spillEntry(v *sessionEntry) {
	p := t.spill
	file, err := p.save(v.sess)
	t.mu.Lock()
	v.moving = false
	if err != nil {
		p.log.Warn("session spill", slog.String("id", v.id), slog.String("error", err.Error()))
		if t.byID[v.id] == v && v.sess.Err() == nil {
			// Not chosen again at once: it is the least recently used.
			v.lastCall = time.Now()
		}
		t.mu.Unlock()
		t.moved.Broadcast()
		return
	}
	sess, held := v.sess, v.held
	deleted := t.byID[v.id] != v
	if deleted {
		os.Remove(file)
	} else {
		v.sess, v.file = nil, file
		// Its state stays counted until the heap has let it go: room
		// given to others while it is still there was the budget's
		// overshoot.
		t.reserved += held
	}
	t.mu.Unlock()
	t.moved.Broadcast()
	sess.Close(context.Background())
	if deleted {
		return
	}
	debug.FreeOSMemory()
	t.unreserve(held)
	p.spilled.Inc()
	p.log.Info("session", slog.String("id", v.id), slog.String("event", "spill"), slog.Int64("held", held))
}

func (p *spiller) save(sess *airlock.Session) (string, error) {
	dir, err := p.directory()
	if err != nil {
		return "", fmt.Errorf("spill directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "session-")
	if err != nil {
		return "", err
	}
	err = sess.Save(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// errBusySession is a call to a session running another one.
var errBusySession = errors.New("session is running another call")

// claim marks session id as running a call (waiting while it moves) and
// returns its entry: nil if there is none, errBusySession if it runs
// another call. A session runs one call at a time, and a second one
// waiting for it would hold a run slot doing nothing (one client could
// so take every slot).
func (t *sessions) claim(id string) (*sessionEntry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	for {
		e := t.byID[id]
		if e == nil || t.ended(e) {
			if e != nil {
				t.forget(e)
			}
			return nil, nil
		}
		if e.running {
			return nil, errBusySession
		}
		if !e.moving {
			e.running = true
			return e, nil
		}
		t.moved.Wait()
	}
}

// release ends e's call: held is what its session holds now.
func (t *sessions) release(e *sessionEntry, held int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.running = false
	e.calls++
	e.lastCall = time.Now()
	if held >= 0 {
		e.held = held
	}
	t.signalFreedLocked() // idle now, so movable
}

// unclaim ends a claim that ran no call.
func (t *sessions) unclaim(e *sessionEntry) {
	t.mu.Lock()
	e.running = false
	t.signalFreedLocked()
	t.mu.Unlock()
}

// bringBack loads claimed entry e if it is spilled, making room for it.
func (t *sessions) bringBack(ctx context.Context, e *sessionEntry) error {
	t.mu.Lock()
	if e.sess != nil {
		t.mu.Unlock()
		return nil
	}
	need, file := e.held, e.file
	e.moving = true
	t.mu.Unlock()
	sess, err := t.loadFile(ctx, need, file, e)
	t.mu.Lock()
	defer t.moved.Broadcast()
	defer t.mu.Unlock()
	e.moving = false
	if err != nil {
		return err
	}
	if t.byID[e.id] != e { // deleted meanwhile
		sess.Close(ctx)
		os.Remove(file)
		return airlock.ErrSessionClosed
	}
	os.Remove(file)
	e.sess, e.file = sess, ""
	return nil
}

// loadFile loads a spilled session's file as a new live session, within
// the budget (need is what it held). Loading holds the file's bytes and
// the session's memory at once: twice need is reserved meanwhile, or need
// alone when twice could never fit.
func (t *sessions) loadFile(ctx context.Context, need int64, file string, except *sessionEntry) (*airlock.Session, error) {
	loading := 2 * need
	if loading > t.spill.budget {
		loading = need
	}
	if err := t.reserve(loading, except); err != nil {
		return nil, err
	}
	defer t.unreserve(loading)
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read spilled session: %w", err)
	}
	defer f.Close()
	sess, err := t.spill.sb.LoadSession(ctx, f, t.spill.load)
	// What reading the file left is garbage: collected before its room
	// (the second need) is given back.
	debug.FreeOSMemory()
	if err != nil {
		return nil, fmt.Errorf("load spilled session: %w", err)
	}
	t.spill.loaded.Inc()
	return sess, nil
}

// fork copies session id: in memory with Session.Fork, or, spilled, by
// loading its file as a new session. nil, nil if there is none.
func (t *sessions) fork(ctx context.Context, id string) (*airlock.Session, int64, error) {
	t.mu.Lock()
	t.init()
	var e *sessionEntry
	for {
		e = t.byID[id]
		if e == nil || t.ended(e) {
			t.mu.Unlock()
			return nil, 0, nil
		}
		if !e.moving {
			break
		}
		t.moved.Wait()
	}
	// Moving, so that it is neither spilled nor loaded meanwhile.
	e.moving = true
	sess, need, file := e.sess, e.held, e.file
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		e.moving = false
		if t.byID[e.id] != e && e.file != "" { // deleted meanwhile
			os.Remove(e.file)
			e.file = ""
		}
		t.moved.Broadcast()
		t.mu.Unlock()
	}()
	if sess == nil {
		f, err := t.loadFile(ctx, need, file, e)
		return f, need, err
	}
	// The fork shares the image until either calls again; it is counted
	// as its own, which overstates what the two hold, never understates.
	if err := t.reserve(need, e); err != nil {
		return nil, 0, err
	}
	defer t.unreserve(need)
	f, err := sess.Fork()
	return f, need, err
}
