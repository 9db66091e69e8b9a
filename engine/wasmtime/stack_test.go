//go:build airlock_wasmtime && cgo && unix

package wasmtime

import "testing"

// The wasm stack stays inside the thread's, whatever size the C library
// gives threads, and is at most maxWasmtimeStack.
func TestWasmtimeStackFitsTheThread(t *testing.T) {
	for _, c := range []struct{ thread, want int }{
		{8 << 20, 7 << 20},    // glibc, the usual 8 MiB rlimit
		{64 << 20, 7 << 20},   // a large rlimit: capped
		{2 << 20, 1 << 20},    // glibc with an unlimited rlimit
		{128 << 10, 64 << 10}, // musl
		{0, 1 << 20},          // unknown: glibc's smallest default assumed
	} {
		if got := wasmtimeStackFor(c.thread); got != c.want {
			t.Errorf("thread stack %d: wasm stack %d, want %d", c.thread, got, c.want)
		}
	}
	if got := wasmtimeStack(); got <= 0 || got > maxWasmtimeStack {
		t.Fatalf("wasmtimeStack() = %d", got)
	}
}
