package backend

import "errors"

// ThreadsModule is the import module of python.wasm's pthreads
// (scripts/threads/thread_pthread_stubs.h), which each engine serves:
// wazero runs the threads (engine/threads.go); an engine that does not
// answers spawn with ENOTSUP, so the guest cannot start one.
const ThreadsModule = "airlock_threads"

// ThreadImport tells whether module.name is one of the threads' imports.
func ThreadImport(module, name string) bool {
	if module != ThreadsModule {
		return false
	}
	switch name {
	case "spawn", "wait", "wake", "exit":
		return true
	}
	return false
}

// ErrDeadlock ends a run whose threads all wait with nothing left that
// could wake any of them; on one thread, an untimed wait.
var ErrDeadlock = errors.New("engine: deadlock: every thread of the run waits on a lock or condition no other thread can release")

// ENOTSUP is WASI's errno for an engine that starts no threads.
const ENOTSUP = 58
