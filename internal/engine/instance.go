package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/internal/wasi"
)

// What each engine provides, so that running, the snapshot protocol
// (snapshot.go) and the classification of how a run ended are written
// once: wazero in wazero.go, wasmtime in wasmtime.go (build-tagged).

// code is a module compiled for one engine.
type code interface {
	// start makes a fresh instance for run r, its linear memory capped at
	// limit bytes. With img, the memory holds img's once grown to its
	// size (wazero maps it as it reserves the memory; wasmtime grows and
	// maps it at once). On error nothing is left to release.
	start(ctx context.Context, r *run, spec RunSpec, limit uint64, img *Image) (instance, error)
	exportsFunction(name string) bool
	// minMemory is the memory the module declares it needs, in bytes.
	minMemory() uint64
	// trapCause is a trap's error as a TrapError shows it.
	trapCause(err error) error
	close(ctx context.Context) error
}

// instance is one instantiated module, or (in a host call) the instance
// that called. Exports are called with i32 arguments only: asyncify's
// take a buffer address, _start none.
type instance interface {
	// memory is the linear memory as it is now; it stays valid until the
	// memory grows.
	memory() []byte
	// grow adds pages of 64 KiB and returns the size before, in pages.
	grow(pages uint32) (old uint32, ok bool)
	global(name string) (uint64, error)
	setGlobal(name string, v uint64) error
	// call calls an export. On an instance that start returned, the run's
	// context is watched meanwhile: when it ends the guest is stopped.
	call(name string, args ...uint32) error
	// figures are the run's peak memory, limit hit and fuel so far.
	figures() Outcome
	// fuelExhausted tells whether a metered run used all its fuel.
	fuelExhausted() bool
	close()
}

// run is one run's state, made when it starts and handed to its host
// functions as one value (wazero: in the call's context; wasmtime: as
// the store's data).
type run struct {
	ctx   context.Context
	wasi  *wasi.State
	pause *pausePoint // nil in a plain run
	// hostErr is the error a host function trapped with (the guest's
	// exit, an output limit, a failed pause), for engines whose call
	// error does not carry it.
	hostErr error
}

type runKey struct{}

// runFrom is the run whose host call ctx is (wazero), or nil.
func runFrom(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// memoryCap is a run's memory cap in whole pages, or ErrMemoryLimit when
// that is below the module's minimum or img's size.
func (m *Module) memoryCap(limit uint64, img *Image) (uint64, error) {
	limit &^= pageSize - 1
	if limit < m.minMem || img != nil && limit < uint64(img.Len()) {
		return 0, ErrMemoryLimit
	}
	return limit, nil
}

// pageSize is WebAssembly's page.
const pageSize = 65536

// atStdinRead is fd_read's first step in a run that captures or resumes
// an image: a read of fd 0 may be the snapshot point (pausePoint.at).
// caller is the instance that called; done means the guest now unwinds
// and the read is not served. Adapters call it only when r.pause is set
// and the read is of fd 0, so other calls cost nothing.
func (r *run) atStdinRead(caller instance, stack []uint64) (done bool, err error) {
	switch r.pause.at(uint32(stack[2])) {
	case pauseHere:
		if err := r.pause.unwind(r.wasi, caller); err != nil {
			return false, err
		}
		stack[0] = 0 // ignored: the caller unwinds
		return true, nil
	case stopRewind:
		if err := caller.call("asyncify_stop_rewind"); err != nil {
			return false, fmt.Errorf("engine: asyncify_stop_rewind: %w", err)
		}
	}
	return false, nil
}

// classify tells how a run whose export call returned err ended. A host
// function's error reaches it wrapped in a hostTrap, on either engine.
func (r *run) classify(c code, inst instance, out Outcome, err error) (Outcome, error) {
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
	if !isHost && inst != nil && inst.fuelExhausted() {
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
	return out, &TrapError{Err: c.trapCause(err)}
}

// hostTrap carries a host function's error through the guest's unwinding
// to the export call that returns it.
type hostTrap struct{ err error }

func (t *hostTrap) Error() string { return t.err.Error() }
func (t *hostTrap) Unwrap() error { return t.err }
