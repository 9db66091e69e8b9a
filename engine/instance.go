package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/wasi"
)

// What each engine provides, so that running, the snapshot protocol
// (snapshot.go) and the classification of how a run ended are written
// once: wazero in wazero.go, wasmtime in package wasmtime (cgo, behind
// the airlock_wasmtime build tag, so that its module is no dependency of
// a program without it). The names are exported for that package only:
// engine is internal.

// Code is a module compiled for one engine.
type Code interface {
	// Start makes a fresh instance for run r, its linear memory capped at
	// limit bytes. With img, the memory holds img's once grown to its
	// size (both take a pooled region that reads as the image,
	// snapshotRegion; wasmtime, before it knows the size its memory
	// reserves, grows the memory and maps the image in). On error nothing
	// is left to release.
	Start(ctx context.Context, r *RunState, spec RunSpec, limit uint64, img *Snapshot) (Instance, error)
	ExportsFunction(name string) bool
	// MinMemory is the memory the module declares it needs, in bytes.
	MinMemory() uint64
	// TrapCause is a trap's error as a TrapError shows it.
	TrapCause(err error) error
	// TrapFrames are the function names on the stack a trap's error
	// reports, innermost first, or nil.
	TrapFrames(err error) []string
	Close(ctx context.Context) error
}

// Instance is one instantiated module, or (in a host call) the instance
// that called. Exports are called with i32 arguments only: asyncify's
// take a buffer address, _start none.
type Instance interface {
	// Memory is the linear memory as it is now; it stays valid until the
	// memory grows.
	Memory() []byte
	// Grow adds pages of 64 KiB and returns the size before, in pages.
	Grow(pages uint32) (old uint32, ok bool)
	Global(name string) (uint64, error)
	SetGlobal(name string, v uint64) error
	// Call calls an export. On an instance that Start returned, the run's
	// context is watched meanwhile: when it ends the guest is stopped.
	Call(name string, args ...uint32) error
	// Figures are the run's peak memory, limit hit and fuel so far.
	Figures() Outcome
	// FuelExhausted tells whether a metered run used all its fuel.
	FuelExhausted() bool
	Close()
}

// RunState is one run's state, made when it starts and handed to its
// host functions as one value (wazero: in the call's context; wasmtime:
// as the store's data).
type RunState struct {
	ctx   context.Context
	wasi  *wasi.State
	pause *pausePoint // nil in a plain run
	// hostErr is the error a host function trapped with (the guest's
	// exit, an output limit, a failed pause), for engines whose call
	// error does not carry it.
	hostErr error
	eh      ehState // C++ exceptions' invoke_ (cxxeh.go)
}

type runKey struct{}

// runFrom is the run whose host call ctx is (wazero), or nil.
func runFrom(ctx context.Context) *RunState {
	r, _ := ctx.Value(runKey{}).(*RunState)
	return r
}

// Context is the run's context, which host functions are called with.
func (r *RunState) Context() context.Context { return r.ctx }

// WASI is the run's WASI state.
func (r *RunState) WASI() *wasi.State { return r.wasi }

// Trapped records the error a host function traps with; CallError then
// gives it back.
func (r *RunState) Trapped(err error) { r.hostErr = err }

// HostTrapped tells whether a host function trapped since the last
// CallError: the engine's own error for the call then goes unread.
func (r *RunState) HostTrapped() bool { return r.hostErr != nil }

// CallError is the error an export call that returned err reports, for
// engines whose call error does not carry the host function's: that
// error, wrapped as wazero returns it.
func (r *RunState) CallError(err error) error {
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

// Fill puts img's memory into mem, a fresh instance's memory grown to the
// image's size: mapped copy-on-write where the image has a memfd, else
// copied; a delta image (a session's) is its base with pages replaced.
func (img *Snapshot) Fill(mem []byte) {
	full := img
	if img.base != nil {
		full = img.base
	}
	if !full.mapInto(mem) {
		full.CopyTo(mem)
	}
	img.applyDelta(mem)
}

// SetWasmtime makes EngineWasmtime available: package wasmtime calls it
// when it is linked in.
func SetWasmtime(load func(ctx context.Context, digest string, wasm func() ([]byte, error), opts Options) (Code, error)) {
	loadWasmtime = load
}

// Pausing tells whether fd_read with these parameters may be the
// snapshot point: a read of fd 0 in a run that captures or resumes an
// image. It costs a comparison, so adapters ask it before AtStdinRead.
func (r *RunState) Pausing(stack []uint64) bool { return r.pause != nil && uint32(stack[0]) == 0 }

// AtStdinRead is fd_read's first step when Pausing: the read may be the
// snapshot point (pausePoint.at). caller is the instance that called;
// done means the guest now unwinds and the read is not served.
func (r *RunState) AtStdinRead(caller Instance, stack []uint64) (done bool, err error) {
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
func (r *RunState) classify(c Code, inst Instance, out Outcome, err error) (Outcome, error) {
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
