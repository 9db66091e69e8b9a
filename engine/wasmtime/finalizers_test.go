//go:build airlock_wasmtime && cgo && unix

package wasmtime_test

import (
	"bytes"
	"context"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
)

// A run leaves wasmtime-go objects to Go's finalizers only where
// wasmtime-go gives no way to close them. Finalizers run on one goroutine
// after a GC, a cgo call each; the 14 a run used to leave made bursts of
// thousands (RATIONALE, "What a slow run waited for"). What is left:
// Func.Call makes a FuncType per call and drops it, and these runs make
// three calls (asyncify_start_rewind, _start, and asyncify_stop_rewind
// from the read they resume in; a run from the entry point makes two).
// invoke_ calls the guest without Func.Call (engine/wasmtime/cxxeh_cgo.go),
// so the C++ static destructors that _start registers with __cxa_atexit,
// called through invoke_ as the run exits, leave none.
func TestRunsLeaveFewFinalizers(t *testing.T) {
	m := resumableOn(t, engine.EngineWasmtime)
	img := captureLoop(t, m)
	ctx := context.Background()
	run := func(code string) {
		var out bytes.Buffer
		if _, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte(code), &out), MemoryLimit: 256 << 20}); err != nil {
			t.Fatalf("%s: %v", code, err)
		}
	}
	run("pass")
	queued := func() uint64 {
		runtime.GC()
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/finalizers/queued:finalizers"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := queued()
	const runs = 20
	for range runs {
		run("print(1)")
		run("raise SystemExit(3)")
		run("x = bytearray(64 << 20)") // grows the memory
	}
	const callsPerRun = 3
	n := queued() - before
	t.Logf("%d runs queued %d finalizers", 3*runs, n)
	if n > callsPerRun*3*runs {
		t.Fatalf("%d runs queued %d finalizers, more than one per export call", 3*runs, n)
	}
}
