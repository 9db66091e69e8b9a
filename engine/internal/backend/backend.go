// Package backend is what an engine besides wazero implements, and what
// of a run it may reach: package engine/wasmtime registers itself here
// (Wasmtime), and package engine fills in the hooks into its snapshots
// at init. Package engine keeps all of this out of its public API; only
// packages under engine/ can import this one.
package backend

import (
	"context"
	"io"

	"github.com/airlock-sandbox/airlock/wasi"
)

// LoadOptions are what an engine's loader needs of engine.Options.
type LoadOptions struct {
	CacheDir  string
	Unmetered bool
	// Notice hears of a slow, uncached compile of a module of
	// engine.NoticeSize or more.
	Notice io.Writer
}

// Wasmtime compiles the module whose sha256 is digest for wasmtime, or
// loads its compiled code from the cache, where it needs no bytes (wasm
// reads them); set by package engine/wasmtime when a binary links it in.
var Wasmtime func(ctx context.Context, digest string, wasm func() ([]byte, error), opts LoadOptions) (Code, error)

// Code is a module compiled for one engine.
type Code interface {
	// Start makes a fresh instance for run r. With img, the memory holds
	// img's once grown to its size (both engines take a pooled region
	// that reads as the image, Region; wasmtime, before it knows the size
	// its memory reserves, grows the memory and fills the image in). On
	// error nothing is left to release.
	Start(ctx context.Context, r Run, spec Spec, img Image) (Instance, error)
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

// Spec is what Start needs of a run's engine.RunSpec.
type Spec struct {
	// Limit caps the linear memory, in bytes.
	Limit uint64
	// Fuel caps a metered run's fuel; 0 is unlimited.
	Fuel uint64
	// Unpooled asks for an instance made now, not one made ahead (wazero).
	Unpooled bool
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
	// Figures are the run's figures so far.
	Figures() Figures
	// FuelExhausted tells whether a metered run used all its fuel.
	FuelExhausted() bool
	Close()
}

// Figures are a run's peak memory, whether it hit the memory limit, and
// the fuel it used (0 where the engine meters none).
type Figures struct {
	PeakMemory     uint64
	MemoryLimitHit bool
	Fuel           uint64
}

// Run is one run's state as an engine's host functions reach it (package
// engine's run state): wazero finds it in the call's context, wasmtime
// keeps it as the store's data.
type Run interface {
	// Context is the run's context, which host functions are called with.
	Context() context.Context
	// WASI is the run's WASI state.
	WASI() *wasi.State
	// Trapped records the error a host function traps with; CallError
	// then gives it back.
	Trapped(err error)
	// HostTrapped tells whether a host function trapped since the last
	// CallError: the engine's own error for the call then goes unread.
	HostTrapped() bool
	// CallError is the error an export call that returned err reports,
	// for engines whose call error does not carry the host function's.
	CallError(err error) error
	// Pausing tells whether fd_read with these parameters may be the
	// snapshot point; it costs a comparison, so ask it before AtStdinRead.
	Pausing(stack []uint64) bool
	// AtStdinRead is fd_read's first step when Pausing: caller is the
	// instance that called; done means the guest now unwinds and the
	// read is not served.
	AtStdinRead(caller Instance, stack []uint64) (done bool, err error)
	// InvokeEnter counts an invoke_ in, or refuses one past the depth
	// bound (engine.ErrInvokeDepth); InvokeLeave counts it out.
	InvokeEnter() error
	InvokeLeave()
	// StartUnwind is unwind's question: true, and the unwind recorded,
	// when an invoke_ is there to catch it.
	StartUnwind() bool
	// TakeUnwind tells an invoke_ whose call failed whether the failure
	// is the guest's unwind (and clears it).
	TakeUnwind() bool
}

// Image is a snapshot (an *engine.Snapshot) as an engine sees it: its
// length, and the hooks below to reach its memory.
type Image interface{ Len() int }

// Filled in by package engine at init.
var (
	// Region takes a memory region of size bytes for a run resumed from
	// img, pooled and reset per image, reading as its memory; guarded
	// regions go to an engine that makes the pages past a run's memory
	// inaccessible. free gives it back, sliced to the length the run
	// used. buf is nil when none can be had.
	Region func(img Image, size uint64, guarded bool) (buf []byte, free func([]byte))
	// Fill puts img's memory into mem, a fresh instance's memory grown to
	// the image's size.
	Fill func(img Image, mem []byte)
	// NewImage makes an image of memory alone, for tests.
	NewImage func(memory []byte) Image
)
