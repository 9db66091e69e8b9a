package engine

import (
	"context"

	"github.com/tetratelabs/wazero/api"
)

// interruptExport names the global that Load's rewrite makes every loop
// check (wasmbin.AddInterruptCheck). Setting it to 1 makes the guest trap
// at the top of its next loop iteration; host calls already refuse to
// serve a run whose context has ended (wasi.errnoFunc), which covers
// guests that are not looping. It is the job wazero's close-on-context-done
// option does, without the call into the runtime at every back-edge that
// makes that option cost 2-5x on loop-heavy code.
const interruptExport = "airlock.interrupt"

// watchInterrupt stops mod's guest when ctx ends, from now until the
// returned function is called. The global is set from another goroutine
// while the guest runs: an aligned word store the compiled code reads on
// its next check, as wazero's own module-closed flag is.
func (m *Module) watchInterrupt(ctx context.Context, mod api.Module) (stop func()) {
	if !m.interrupt {
		return func() {}
	}
	g, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		return func() {}
	}
	if ctx.Err() != nil {
		g.Set(1)
		return func() {}
	}
	done := make(chan struct{})
	cancel := context.AfterFunc(ctx, func() {
		defer close(done)
		g.Set(1)
	})
	return func() {
		if !cancel() {
			<-done
		}
	}
}
