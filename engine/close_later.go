package engine

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
)

// A lone run's instance is closed after Resume returns, not before.
// Closing it resets its memory region for the next run (backing.restore:
// the pages the run wrote copied back from the image, the rest released),
// ~100 µs of a ~0.4 ms run of `pass` on a 2-core VM, and nothing the
// run's result needs: the outcome, output and figures are taken first. A
// region is reset before any run gets it again, whoever closes it, so
// nothing of the isolation changes. What could: an image or a module
// closed while an instance made from it is still closing. Both wait for
// their closes (Snapshot.Close, Compiled.Close), and so does idleRegions,
// which measures the regions those closes give back.

// backgroundCloses counts instances closing in the background, process
// wide; runsUnderWay counts the runs callers said are under way
// (RunUnderWay), the time they spend outside Resume included.
var backgroundCloses, runsUnderWay atomic.Int32

// RunUnderWay counts a run in until the returned function is called:
// while others are under way, its instance closes before Resume returns.
func RunUnderWay() (done func()) {
	runsUnderWay.Add(1)
	return func() { runsUnderWay.Add(-1) }
}

// closeInBackground tells whether a run's close may leave its path: only
// when no other run is under way, so that the close has a core to itself.
// Where other runs hold the cores, a close on its own goroutine competes
// with them: two workers on two cores made fewer runs/s with every close
// in the background (RATIONALE, "A lone run's instance closes after it
// returns").
func closeInBackground() bool {
	return runsUnderWay.Load() <= 1 && backgroundCloses.Load() < int32(runtime.GOMAXPROCS(0))
}

// closeLater closes inst, resumed by m from img, in the background where
// it can, else now.
func (m *Compiled) closeLater(img *Snapshot, inst backend.Instance) {
	// Only wazero's instances. A wasmtime instance once unmapped a memory
	// of its own, which takes the process's memory-map lock and stalled
	// the page faults of the run after it (one worker's p50 rose from
	// ~1.0-1.4 to ~1.6-2.1 ms with its closes in the background). Its
	// memory is a pooled region now, but with no instance made ahead the
	// next run only waits for that region instead: close 100 -> 26 µs,
	// start 35 -> 169 µs (2026-12-03, one worker, `pass`).
	if _, pooled := inst.(*wzInstance); !pooled || !closeInBackground() {
		inst.Close()
		return
	}
	// The region goes back to the pool of the full image (a delta image's
	// base), so that is the image whose Close must wait, and whose next
	// run may wait for the region (reserveImage).
	owner := img
	if img.base != nil {
		owner = img.base
	}
	if !owner.closes.add() {
		inst.Close()
		return
	}
	if !m.closes.add() { // closed under a running Resume: a caller's bug, but no crash
		owner.closes.done()
		inst.Close()
		return
	}
	backgroundCloses.Add(1)
	go func() {
		inst.Close()
		m.closes.done()
		owner.closes.done()
		backgroundCloses.Add(-1)
	}()
}

// pendingCloses counts the instances of one image or module closing in
// the background. A counter under a mutex, not a WaitGroup: wait may run
// while closes are still being added (idleRegions during runs).
type pendingCloses struct {
	mu       sync.Mutex
	cond     *sync.Cond
	n        int
	finished uint64 // closes done so far
	stopped  bool
}

// add counts one more close in, unless stop was called.
func (p *pendingCloses) add() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.n++
	return true
}

func (p *pendingCloses) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n--
	p.finished++
	if p.cond != nil {
		p.cond.Broadcast()
	}
}

// condLocked is the condition closes signal, made on first use; p.mu is
// held.
func (p *pendingCloses) condLocked() *sync.Cond {
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
	}
	return p.cond
}

// wait returns once no close is pending.
func (p *pendingCloses) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.n > 0 {
		p.condLocked().Wait()
	}
}

// awaitOne waits for the next close to finish, if any is pending, and
// tells whether one was.
func (p *pendingCloses) awaitOne() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		return false
	}
	for gen := p.finished; p.finished == gen; {
		p.condLocked().Wait()
	}
	return true
}

// stop refuses closes from now on and waits for those pending.
func (p *pendingCloses) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.wait()
}
