//go:build airlock_wasmtime && cgo && unix

package wasmtime

/*
#include <pthread.h>
#include <stddef.h>

// The stack size a new thread gets by default, 0 if unknown. Go starts
// its threads with this default (runtime/cgo; on darwin with the size of
// the creating thread's stack, larger), and wasmtime runs wasm on them.
static size_t airlock_default_thread_stack(void) {
	pthread_attr_t attr;
	size_t size = 0;
	if (pthread_attr_init(&attr) != 0)
		return 0;
	if (pthread_attr_getstacksize(&attr, &size) != 0)
		size = 0;
	pthread_attr_destroy(&attr);
	return size;
}
*/
import "C"

const (
	// maxWasmtimeStack is the most native stack wasm gets: with it, every
	// deep recursion CPython guards (Py_C_RECURSION_LIMIT, 5000 for WASI)
	// ends as a RecursionError on the own build, the deepest found needing
	// ~4.5 MiB (itertools.starmap re-entering the interpreter 2 500 times;
	// docs/engines.md).
	maxWasmtimeStack = 7 << 20
	// wasmtimeStackReserve is left on the thread's stack for the frames
	// under the first wasm one (Go's, wasmtime's): measured under 128 KiB,
	// 8 MiB threads overflowing at an 8 064 KiB limit but not below.
	wasmtimeStackReserve = 1 << 20
)

// wasmtimeStack is the native stack wasm may use. wasmtime runs wasm on the
// calling thread and checks its own limit, not the thread's real stack: a
// limit past the thread's stack lets deep guest recursion overflow it, a
// SIGSEGV that kills the host process (glibc gives threads the stack
// rlimit, 8 MiB usually, but 2 MiB when it is unlimited; musl 128 KiB).
// So the limit is the thread's size less a reserve, at most
// maxWasmtimeStack; a guest past it traps ("call stack exhausted", a
// crash of that run only).
func wasmtimeStack() int { return wasmtimeStackFor(int(C.airlock_default_thread_stack())) }

func wasmtimeStackFor(thread int) int {
	if thread <= 0 {
		thread = 2 << 20 // glibc's default for an unlimited rlimit, the smallest it gives
	}
	stack := thread - wasmtimeStackReserve
	if stack < thread/2 {
		stack = thread / 2
	}
	return min(stack, maxWasmtimeStack)
}

// WasmStack is the native stack the engine gives wasm on this host, for
// tests that configure a wasmtime of their own and must not overflow the
// thread (internal/conformance/cpython runs wasmtime's own WASI with it).
func WasmStack() int { return wasmtimeStack() }
