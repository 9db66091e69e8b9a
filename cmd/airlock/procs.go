package main

import (
	"os"
	"runtime"

	"github.com/airlock-sandbox/airlock"
)

// defaultProcs is GOMAXPROCS as the process started: the cores it may use.
var defaultProcs = runtime.GOMAXPROCS(0)

// procsFor sets GOMAXPROCS for a Sandbox on engine, unless $GOMAXPROCS
// says otherwise: one P more than the cores on wasmtime, the cores on
// wazero.
//
// A wasmtime run is one long cgo call whose host functions call back into
// Go. While the goroutines of all Ps are in such calls, Go's sysmon takes
// each P back after 20 µs and hands it to a thread that spins looking for
// work: it leaves a P in a call alone only while another P is idle
// (runtime.retake). With two workers on a 2-core VM that churn kept more
// threads runnable than cores, and a run waited out another thread's time
// slice: a p99 of 3.5-4.0 ms (medians of six pairs), against 2.05-2.4 ms
// with one P more, which stays idle, and 8-15% more runs/s (RATIONALE,
// "What a slow run waited for"). A wazero run is Go code: a P more only
// shares the cores among more threads (p99 2.1 -> 2.7 ms).
func procsFor(engine string) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	n := defaultProcs
	if engine == airlock.EngineWasmtime {
		n++
	}
	runtime.GOMAXPROCS(n)
}
