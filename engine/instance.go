package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/wasi"
)

// What each engine provides (backend.Code, backend.Instance), so that
// running, the snapshot protocol (snapshot.go) and the classification of
// how a run ended are written once: wazero in wazero.go, wasmtime in
// package engine/wasmtime (cgo, behind the airlock_wasmtime build tag, so
// that its module is no dependency of a program without it).

// runState is one run's state, made when it starts and handed to its
// host functions as one value (wazero: in the call's context; wasmtime:
// as the store's data).
type runState struct {
	ctx   context.Context
	wasi  *wasi.State
	pause *pausePoint // nil in a plain run
	// hostErr is the error a host function trapped with (the guest's
	// exit, an output limit, a failed pause), for engines whose call
	// error does not carry it.
	hostErr error
	eh      ehState // C++ exceptions' invoke_ (cxxeh.go)
	// threads: the run's other threads (threads.go), nil until the
	// first spawn; maxThreads caps them (0: DefaultMaxThreads).
	threads        *threads
	maxThreads     int
	threadsStopped int
}

// endThreads stops the threads still alive after the main thread's
// call returned: a call's threads do not outlive it.
func (r *runState) endThreads() {
	if r.threads == nil {
		return
	}
	r.threadsStopped += r.threads.end()
	r.threads = nil
}

// runState is what an engine's host functions reach of a run.
var _ backend.Run = (*runState)(nil)

type runKey struct{}

// runFrom is the run whose host call ctx is (wazero), or nil.
func runFrom(ctx context.Context) *runState {
	r, _ := ctx.Value(runKey{}).(*runState)
	return r
}

// Context is the run's context, which host functions are called with.
func (r *runState) Context() context.Context { return r.ctx }

// WASI is the run's WASI state.
func (r *runState) WASI() *wasi.State { return r.wasi }

// Trapped records the error a host function traps with; CallError then
// gives it back.
func (r *runState) Trapped(err error) { r.hostErr = err }

// HostTrapped tells whether a host function trapped since the last
// CallError: the engine's own error for the call then goes unread.
func (r *runState) HostTrapped() bool { return r.hostErr != nil }

// CallError is the error an export call that returned err reports, for
// engines whose call error does not carry the host function's: that
// error, wrapped as wazero returns it.
func (r *runState) CallError(err error) error {
	if err != nil && r.hostErr != nil {
		err, r.hostErr = &hostTrap{r.hostErr}, nil
	}
	return err
}

// memoryCap is a run's memory cap in whole pages, or ErrBelowMinMemory when
// that is below the module's minimum or img's size.
func (m *Compiled) memoryCap(limit uint64, img *Snapshot) (uint64, error) {
	limit &^= PageSize - 1
	if limit < m.minMem || img != nil && limit < uint64(img.Len()) {
		return 0, ErrBelowMinMemory
	}
	return limit, nil
}

// PageSize is WebAssembly's page, the unit of every image's memory.
const PageSize = 65536

// fill puts img's memory into mem, a fresh instance's memory grown to the
// image's size: mapped copy-on-write where the image has a memfd, else
// copied; a delta image (a session's) is its base with pages replaced.
func (img *Snapshot) fill(mem []byte) {
	full := img
	if img.base != nil {
		full = img.base
	}
	if !full.mapInto(mem) {
		full.CopyTo(mem)
	}
	img.applyDelta(mem)
}

// start is what the engine's Start needs of spec, with the memory cap
// (memoryCap) in bytes.
func (spec RunSpec) start(limit uint64) backend.Spec {
	return backend.Spec{Limit: limit, Fuel: spec.Fuel, Unpooled: spec.Unpooled}
}

// outcomeOf is an Outcome with the engine's figures of a run.
func outcomeOf(f backend.Figures) Outcome {
	return Outcome{PeakMemory: f.PeakMemory, MemoryLimitHit: f.MemoryLimitHit, Fuel: f.Fuel}
}

// Pausing tells whether fd_read with these parameters may be the
// snapshot point: a read of fd 0 in a run that captures or resumes an
// image. It costs a comparison, so adapters ask it before AtStdinRead.
func (r *runState) Pausing(stack []uint64) bool { return r.pause != nil && uint32(stack[0]) == 0 }

// AtStdinRead is fd_read's first step when Pausing: the read may be the
// snapshot point (pausePoint.at). caller is the instance that called;
// done means the guest now unwinds and the read is not served.
func (r *runState) AtStdinRead(caller backend.Instance, stack []uint64) (done bool, err error) {
	switch r.pause.at(uint32(stack[2])) {
	case pauseHere:
		if err := r.pause.unwind(r.wasi, caller); err != nil {
			return false, err
		}
		stack[0] = 0 // ignored: the caller unwinds
		return true, nil
	case stopRewind:
		if err := caller.Call("asyncify_stop_rewind"); err != nil {
			return false, fmt.Errorf("engine: asyncify_stop_rewind: %w", err)
		}
	}
	return false, nil
}

// classify tells how a run whose export call returned err ended. A host
// function's error reaches it wrapped in a hostTrap, on either engine.
func (r *runState) classify(c backend.Code, inst backend.Instance, out Outcome, err error) (Outcome, error) {
	out.ThreadsStopped = r.threadsStopped
	if err == nil {
		return out, nil
	}
	var exit *wasi.ExitError
	if errors.As(err, &exit) {
		out.ExitCode = exit.Code
		return out, nil
	}
	var ht *hostTrap
	isHost := errors.As(err, &ht)
	// wasmtime wraps the trap in its backtrace, which hides the trap code;
	// an empty tank tells the same.
	if !isHost && inst != nil && inst.FuelExhausted() {
		return out, ErrFuelExhausted
	}
	if ctxErr := r.ctx.Err(); ctxErr != nil {
		return out, fmt.Errorf("%w: %w", ErrInterrupted, ctxErr)
	}
	if errors.Is(err, ErrInterrupted) {
		return out, err // stopped from outside (wazero.go)
	}
	if isHost {
		return out, ht.err
	}
	return out, &TrapError{Err: c.TrapCause(err), Frames: c.TrapFrames(err)}
}

// hostTrap carries a host function's error through the guest's unwinding
// to the export call that returns it.
type hostTrap struct{ err error }

func (t *hostTrap) Error() string { return t.err.Error() }
func (t *hostTrap) Unwrap() error { return t.err }
