package engine

import (
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
)

// C++ exceptions without the exception-handling proposal (RATIONALE, "C++
// exceptions"). LLVM's Emscripten-style lowering (-fexceptions -mllvm
// -enable-emscripten-cxx-exceptions) makes every call that may throw an
// imported env.invoke_SIG(slot, args...); the guest's runtime
// (scripts/cxx-eh/eh_runtime.cpp) does all the rest in its own memory, and
// calls airlock_eh.unwind to throw. The host side, here and in each
// engine's adapter, is only this:
//
//   - invoke_SIG calls the function in the guest's table slot with the
//     arguments, re-entering the guest from the host function;
//   - unwind, beneath an invoke_, ends the guest frames down to it (a Go
//     panic on wazero, a trap on wasmtime); invoke_ then puts the guest's
//     stack pointer back where it was, calls the guest's setThrew(1, 0)
//     and returns zeros, and the guest's landing pad takes over;
//   - with no invoke_ on the stack, unwind returns 0, and the guest
//     terminates (the exception has no handler).
//
// The guest cannot make the host write into its own memory through this,
// by construction: the host keeps no guest pointer at all. What it holds
// per run is a depth counter and a flag; what it takes from the guest is
// a table slot (looked up by the engine, which checks the bounds and the
// function's type, as call_indirect does) and arguments it passes through
// as plain values; what it writes is the exported __stack_pointer global
// (an integer the guest could set itself) and a call of the guest's own
// setThrew. Every exception object, type match and handler count stays
// in the guest's linear memory, which the engine bounds-checks. wazero's
// experimental exception handling, which hands the guest a raw host
// pointer (wazero issue 2522), stays off.

// MaxInvokeDepth bounds invoke_ calls nested in one another. Each level is
// a host call re-entering the guest, which costs the host memory (on
// wazero a call context with its own stack, and the Go stack under it):
// a guest recursing through invoke_ without end is stopped here, with
// ErrInvokeDepth, rather than growing the host. A test process whose
// guest went 1,000 deep peaked at 267 MB; at 10,000 it took 8.4 GB, and
// 18 GB under the race detector.
const MaxInvokeDepth = 1000

var (
	// ErrInvokeTarget: an invoke_ named a table slot that holds no
	// function of the call's type (out of the table, null, or another
	// type): the guest crashed, as call_indirect would trap.
	ErrInvokeTarget = errors.New("engine: invoke_: the table slot holds no function of the call's type")
	// ErrInvokeDepth: invoke_ calls nested deeper than MaxInvokeDepth.
	ErrInvokeDepth = fmt.Errorf("engine: invoke_: calls nested deeper than %d", MaxInvokeDepth)
	// ErrEHExports: a module importing invoke_ lacks an export it needs.
	ErrEHExports = errors.New("engine: a module using invoke_ must export " + backend.StackPointerExport + ", " + backend.SetThrewExport + " and " + backend.TableExport +
		" (link with -Wl,--export=__stack_pointer -Wl,--export-table and scripts/build-cxx-eh.sh's libc++abi)")
	// errUnwind is the panic value of a wazero unwind: only the invoke_
	// that catches it sees it.
	errUnwind = errors.New("engine: guest unwinding to its invoke_")
)

// ehState is a run's part of the exception protocol: integers only.
type ehState struct {
	depth     int  // invoke_ calls active
	unwinding bool // unwind was called and its invoke_ has not seen it yet
	wz        wzEHCache
}

// InvokeEnter counts an invoke_ in, or refuses one past MaxInvokeDepth.
func (r *runState) InvokeEnter() error {
	if r.eh.depth >= MaxInvokeDepth {
		return ErrInvokeDepth
	}
	r.eh.depth++
	return nil
}

// InvokeLeave counts an invoke_ out, however it ended.
func (r *runState) InvokeLeave() { r.eh.depth-- }

// StartUnwind is unwind's question: true, and the unwind is recorded, when
// an invoke_ is there to catch it; false when none is (the guest then
// terminates on its own).
func (r *runState) StartUnwind() bool {
	if r.eh.depth == 0 {
		return false
	}
	r.eh.unwinding = true
	return true
}

// TakeUnwind tells an invoke_ whose call failed whether the failure is
// the guest's unwind (and clears it), rather than a trap, an exit or an
// interruption, which it passes on.
func (r *runState) TakeUnwind() bool {
	u := r.eh.unwinding
	r.eh.unwinding = false
	return u
}
