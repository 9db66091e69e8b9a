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
// from the read they resume in; a run from the entry point makes two),
// and, since the chart stage linked libc++'s iostreams into python.wasm,
// up to cxxExitInvokes invoke_ calls as the run exits (_start registers
// C++ static destructors with __cxa_atexit; compiled for the exception
// lowering, their calls go through invoke_, each one Func.Call).
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
	const callsPerRun, cxxExitInvokes = 3, 8
	if n := queued() - before; n > (callsPerRun+cxxExitInvokes)*3*runs {
		t.Fatalf("%d runs queued %d finalizers, more than one per export and invoke_ call", 3*runs, n)
	}
}
