package engine

import (
	"context"

	"github.com/tetratelabs/wazero/api"
)

// The loop budget (wasmbin.AddInterruptCheck): every loop iteration of the
// guest decrements the interruptExport global, and each time it reaches
// zero the guest calls WASI's sched_yield, which yields the goroutine to
// the Go scheduler and, like every WASI call of a run whose context has
// ended, traps (wasi.errnoFunc). So a guest spinning in compiled code
// neither outlives its deadline nor starves the goroutines that would
// notice it (with every P running guest code, Go's timers cannot fire
// otherwise), at a few instructions per iteration instead of the call
// into the runtime at every back-edge that wazero's close-on-context-done
// makes (2-5x on loop-heavy code).
const (
	interruptExport = "airlock.interrupt"
	// interruptPeriod iterations take ~1 ms of guest time.
	interruptPeriod = 1 << 16
)

// watchInterrupt zeroes mod's loop budget when ctx ends, from now until
// the returned function is called, so the guest calls sched_yield (and
// traps there) at its next loop iteration rather than within a period.
// The global is set from another goroutine while the guest runs: an
// aligned word store the compiled code reads on its next iteration.
func (c *wzCode) watchInterrupt(ctx context.Context, mod api.Module) (stop func()) {
	if !c.interrupt {
		return func() {}
	}
	g, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		return func() {}
	}
	if ctx.Err() != nil {
		g.Set(0)
		return func() {}
	}
	done := make(chan struct{})
	cancel := context.AfterFunc(ctx, func() {
		defer close(done)
		g.Set(0)
	})
	return func() {
		if !cancel() {
			<-done
		}
	}
}
