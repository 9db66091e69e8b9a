package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
)

// Threads (RATIONALE, "Threads"): python.wasm's pthreads
// (scripts/threads/thread_pthread_stubs.h) are green threads. Every thread
// of a run executes in the run's one instance, each on a goroutine of its
// own, and one at a time: a thread holds the baton while it runs guest
// code, and hands it on only inside a call of the "airlock_threads"
// module (wait, exit) or a sleep, the points where a thread would block.
// The guest therefore needs no atomics, no shared memory and no library
// built for threads, and single-threaded code runs as before. CPython's
// own switching (the GIL's drop request every 5 ms) does the rest: when a
// thread waits to run, the one running is asked to drop the GIL at its
// next loop-budget call (interrupt.go), and blocks in doing so.
//
// The memory cap, the deadline and the output caps are the run's, so
// they hold across its threads; a thread that never blocks keeps the
// others waiting until the deadline, as on one core.

// threadsModule is the import module python.wasm's pthreads call.
const threadsModule = backend.ThreadsModule

// DefaultMaxThreads is how many threads besides the main one a run may
// have at once when RunSpec.MaxThreads is 0.
const DefaultMaxThreads = 64

// switchInterval is how long a thread runs while another waits before it
// is asked to drop the GIL: CPython's own default (sys.getswitchinterval).
const switchInterval = 5 * time.Millisecond

// threadGone is what the host writes in a thread's gone word when it has
// left the thread's stack for good (THREAD_GONE in the C side).
const threadGone = 2

// ErrDeadlock ends a run whose threads all wait with nothing left that
// could wake any of them.
var ErrDeadlock = backend.ErrDeadlock

// DeadlockMessage is a KindDeadlock error's, for the program's author.
const DeadlockMessage = "every thread of the program waits on a lock, condition, queue or join that no other thread will release (a deadlock)"

// errRunEnded stops the threads still alive when the run's main thread
// returns.
var errRunEnded = errors.New("engine: the run's main thread ended")

// errThreadExit unwinds a thread that called pthread_exit.
var errThreadExit = errors.New("engine: thread exited")

// threadGuest is what the scheduler needs of the engine's instance.
type threadGuest interface {
	memory() []byte
	stackPointer() uint32
	setStackPointer(uint32)
	// start runs the thread's entry on the calling goroutine, which holds
	// the baton, and returns when the entry returns or traps.
	start(ctx context.Context, t *gthread) error
	// preempt asks the running thread to drop the GIL (a guest export).
	preempt(ctx context.Context)
}

// gthread is one thread of a run.
type gthread struct {
	id     int
	desc   uint32 // the guest's descriptor, the entry's argument
	goneAt uint32 // where the host writes threadGone
	// resume gives the thread the baton (nil) or ends it (an error).
	resume chan error
	// sp and words: the thread's shadow stack pointer and thread-local
	// words while it does not run.
	sp    uint32
	words []uint32
	// While it waits on an address: which, and its timer.
	waitAddr uint32
	waiting  bool
	timedOut bool
	timer    *time.Timer
}

// threads is a run's scheduler, made at its first spawn.
type threads struct {
	guest threadGuest
	max   int
	ctx   context.Context // the other threads' calls; cancelled at the end
	stop  context.CancelFunc

	mu      sync.Mutex
	cur     *gthread // holds the baton; nil while every thread waits
	since   time.Time
	runq    []*gthread
	waiters map[uint32][]*gthread
	live    map[int]*gthread
	timers  int // threads waiting with a timeout
	outside int // threads sleeping or in a host call without the baton
	nextID  int
	words   []uint32 // addresses of the thread-local words
	err     error    // set once: every thread ends with it
	wg      sync.WaitGroup
}

func newThreads(ctx context.Context, g threadGuest, max int) *threads {
	if max == 0 {
		max = DefaultMaxThreads
	}
	main := &gthread{resume: make(chan error, 1)}
	tctx, stop := context.WithCancel(ctx)
	s := &threads{guest: g, max: max, ctx: tctx, stop: stop, cur: main, since: time.Now(),
		waiters: map[uint32][]*gthread{}, live: map[int]*gthread{0: main}, nextID: 1}
	return s
}

func (s *threads) le32(addr uint32) (uint32, bool) {
	mem := s.guest.memory()
	if uint64(addr)+4 > uint64(len(mem)) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(mem[addr:]), true
}

func (s *threads) put32(addr, v uint32) bool {
	mem := s.guest.memory()
	if uint64(addr)+4 > uint64(len(mem)) {
		return false
	}
	binary.LittleEndian.PutUint32(mem[addr:], v)
	return true
}

// spawn starts a thread (holder's call). 0, or a WASI errno for the guest.
func (s *threads) spawn(desc, goneAt, stackTop, wordsAt uint32, n int32) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.words == nil {
		if n < 0 || n > 16 {
			return 0, fmt.Errorf("engine: thread spawn: %d thread-local words", n)
		}
		s.words = make([]uint32, n)
		for i := range s.words {
			a, ok := s.le32(wordsAt + 4*uint32(i))
			if !ok {
				return 0, fmt.Errorf("engine: thread spawn: word list out of memory")
			}
			s.words[i] = a
		}
		s.cur.words = make([]uint32, n) // the spawning (main) thread's
	}
	if s.err != nil { // ending: a thread started now would never run
		return 0, s.err
	}
	if len(s.live)-1 >= s.max {
		return eagain, nil
	}
	t := &gthread{id: s.nextID, desc: desc, goneAt: goneAt, resume: make(chan error, 1), sp: stackTop,
		words: make([]uint32, len(s.words))}
	s.nextID++
	s.live[t.id] = t
	s.runq = append(s.runq, t)
	s.wg.Add(1)
	go s.run(t)
	return 0, nil
}

// eagain is WASI's EAGAIN: a thread past the cap.
const eagain = 6

// run is a thread's goroutine.
func (s *threads) run(t *gthread) {
	defer s.wg.Done()
	if err := <-t.resume; err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.live, t.id)
		return
	}
	s.restore(t)
	err := s.guest.start(s.ctx, t)
	if errors.Is(err, errThreadExit) {
		err = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, t.id)
	if s.cur != t { // ended from outside (the run ended)
		return
	}
	if err != nil {
		s.failLocked(err)
		return
	}
	// Still holding the baton: the stack is left, the joiners may go.
	s.put32(t.goneAt, threadGone)
	s.wakeLocked(t.goneAt, -1)
	s.passLocked()
}

// save and restore keep a thread's context while another runs.
func (s *threads) save(t *gthread) {
	t.sp = s.guest.stackPointer()
	for i, a := range s.words {
		t.words[i], _ = s.le32(a)
	}
}

func (s *threads) restore(t *gthread) {
	s.guest.setStackPointer(t.sp)
	for i, a := range s.words {
		s.put32(a, t.words[i])
	}
}

// wait blocks the holder while the word at addr is expected, until woken
// or the timeout (< 0: none) passes; true when it timed out.
func (s *threads) wait(ctx context.Context, addr, expected uint32, timeout time.Duration) (bool, error) {
	me, err := s.startWait(addr, expected, timeout)
	if me == nil || err != nil {
		return false, err
	}
	if err := s.block(ctx, me); err != nil {
		return false, err
	}
	return me.timedOut, nil
}

// startWait queues the holder on addr and hands the baton on; nil when
// the word is not expected (no wait).
func (s *threads) startWait(addr, expected uint32, timeout time.Duration) (*gthread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	me := s.cur
	if s.err != nil {
		return nil, s.err
	}
	if me == nil {
		return nil, errors.New("engine: thread wait without the baton")
	}
	if v, ok := s.le32(addr); !ok {
		return nil, fmt.Errorf("engine: thread wait: address %#x out of memory", addr)
	} else if v != expected {
		return nil, nil
	}
	me.waiting, me.timedOut, me.waitAddr = true, false, addr
	s.waiters[addr] = append(s.waiters[addr], me)
	if timeout >= 0 {
		s.timers++
		me.timer = time.AfterFunc(timeout, func() { s.timeout(me) })
	}
	s.save(me)
	s.passLocked()
	return me, nil
}

// block waits for the baton.
func (s *threads) block(ctx context.Context, me *gthread) error {
	select {
	case err := <-me.resume:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		s.fail(ctx.Err())
		return ctx.Err()
	}
	s.restore(me)
	return nil
}

// timeout ends a timed wait (a timer's goroutine).
func (s *threads) timeout(t *gthread) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.waiting || s.err != nil {
		return
	}
	s.unwaitLocked(t)
	t.timedOut = true
	s.readyLocked(t)
}

func (s *threads) unwaitLocked(t *gthread) {
	q := s.waiters[t.waitAddr]
	for i, w := range q {
		if w == t {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(s.waiters, t.waitAddr)
	} else {
		s.waiters[t.waitAddr] = q
	}
	t.waiting = false
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
		s.timers--
	}
}

// readyLocked makes t runnable, and gives it the baton when nobody has it.
// Once the run is ending nobody gets the baton: a thread still running
// guest code (until its next loop-budget call notices the deadline) must
// not have company.
func (s *threads) readyLocked(t *gthread) {
	if s.err != nil {
		select {
		case t.resume <- s.err:
		default:
		}
		return
	}
	if s.cur == nil {
		s.cur, s.since = t, time.Now()
		t.resume <- nil
		return
	}
	s.runq = append(s.runq, t)
}

// wake makes up to n (< 0: all) waiters on addr runnable; how many.
func (s *threads) wake(addr uint32, n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wakeLocked(addr, n)
}

func (s *threads) wakeLocked(addr uint32, n int) int {
	woken := 0
	for len(s.waiters[addr]) > 0 && (n < 0 || woken < n) {
		t := s.waiters[addr][0]
		s.unwaitLocked(t)
		s.readyLocked(t)
		woken++
	}
	return woken
}

// passLocked hands the baton from the holder to the next runnable
// thread, if any; with none and nothing that could make one, the run is
// deadlocked.
func (s *threads) passLocked() {
	s.cur = nil
	if s.err != nil {
		return
	}
	if len(s.runq) > 0 {
		next := s.runq[0]
		s.runq = s.runq[1:]
		s.cur, s.since = next, time.Now()
		next.resume <- nil
		return
	}
	if s.timers == 0 && s.outside == 0 {
		s.failLocked(ErrDeadlock)
	}
}

// release lets the others run while the holder sleeps or waits on the
// host (a poll with a timeout); acquire takes the baton back.
func (s *threads) release() *gthread {
	s.mu.Lock()
	defer s.mu.Unlock()
	me := s.cur
	if me == nil { // the run is ending: sleep, then fail to take it back
		me = &gthread{resume: make(chan error, 1)}
		s.outside++
		return me
	}
	s.save(me)
	s.outside++
	s.passLocked()
	return me
}

func (s *threads) acquire(ctx context.Context, me *gthread) error {
	if err := s.requeue(me); err != nil {
		return err
	}
	return s.block(ctx, me)
}

func (s *threads) requeue(me *gthread) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outside--
	if s.err != nil {
		return s.err
	}
	s.readyLocked(me)
	return nil
}

// sleepAround is the holder's sleep (wasi.WithSleepAround): the others
// run meanwhile, and the run's end (another thread's crash, say) cuts it
// short. Without the baton back the thread unwinds from here: the WASI
// call must not touch the run's state then.
func (s *threads) sleepAround(ctx context.Context, trap func(error)) func(sleep func(context.Context) error) error {
	return func(sleep func(context.Context) error) error {
		me := s.release()
		sctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(s.ctx, cancel) // s.ctx ends when the run does
		err := sleep(sctx)
		stop()
		cancel()
		if aerr := s.acquire(ctx, me); aerr != nil {
			trap(aerr)
		}
		return err
	}
}

// others tells whether the run has threads besides the main one.
func (s *threads) others() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live) > 1
}

// checkSwitch is the holder's loop-budget call: when another thread has
// waited to run a switch interval, the holder is asked to drop the GIL.
func (s *threads) checkSwitch(ctx context.Context) {
	s.mu.Lock()
	due := len(s.runq) > 0 && time.Since(s.since) >= switchInterval
	if due {
		s.since = time.Now()
	}
	s.mu.Unlock()
	if due {
		s.guest.preempt(ctx)
	}
}

func (s *threads) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(err)
}

// failLocked ends every thread with err (the first error wins): the main
// thread's pending call traps with it, the others unwind.
func (s *threads) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	for _, t := range s.live {
		if t.waiting {
			s.unwaitLocked(t)
		}
		select {
		case t.resume <- s.err:
		default:
		}
	}
	s.runq = nil
	s.cur = nil
	s.stop()
}

// end stops the threads still alive when the main thread's call
// returned, and waits until none runs; how many were stopped.
func (s *threads) end() int {
	s.mu.Lock()
	stopped := len(s.live) - 1
	s.failLocked(errRunEnded)
	s.mu.Unlock()
	s.wg.Wait()
	return stopped
}
