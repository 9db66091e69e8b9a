// Package engine runs any WASI preview1 command module with the sandbox's
// isolation and limits: [LoadModule] compiles it once per process (with an
// on-disk cache across processes), and every [Module.Run] gets a fresh
// instance, a memory-only filesystem, no sockets, a deadline and memory,
// output and filesystem caps, and reports a [Result] whose [Error] has a
// [Kind]. Package [github.com/airlock-sandbox/airlock] runs Python on top
// of it and reports with the same kinds and errors.
//
// The package is the only place that knows the WebAssembly runtimes
// (wazero; wasmtime from package [github.com/airlock-sandbox/airlock/engine/wasmtime],
// in builds with -tags airlock_wasmtime). Below LoadModule, the Python
// sandbox uses [Compiled] ([Load], [Compiled.Run]) and [RunSpec], whose
// host functions come from package [github.com/airlock-sandbox/airlock/wasi].
package engine

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/wasi"
)

// Errors a run can end with besides the guest's own exit.
var (
	// ErrBelowMinMemory: the module needs more memory than the run's cap allows
	// at instantiation.
	ErrBelowMinMemory = errors.New("engine: memory limit below the module's minimum")
	// ErrInterrupted: the run's context ended (deadline or cancel) and the
	// guest was stopped. It wraps the context's error too.
	ErrInterrupted = errors.New("engine: run interrupted")
)

// TrapError is a guest crash: a WebAssembly trap such as unreachable or an
// out-of-bounds access, or a stack overflow.
type TrapError struct {
	Err error
	// Frames names the functions on the guest's stack when it trapped,
	// innermost first ("$N" for one the module does not name); nil where
	// the engine gives no names.
	Frames []string
}

func (e *TrapError) Error() string { return "engine: guest trapped: " + e.Err.Error() }
func (e *TrapError) Unwrap() error { return e.Err }

// NoticeSize is the smallest module Options.Notice hears about: a smaller
// one compiles in well under a second.
const NoticeSize = 1 << 20

// Options configure Load.
type Options struct {
	// CacheDir keeps compiled code across processes; "" disables it.
	CacheDir string
	// Notice receives a one-line message before a slow, uncached compile
	// (of a module of NoticeSize or more).
	Notice io.Writer
	// Engine is the WebAssembly runtime: "" or EngineWazero (pure Go), or
	// EngineWasmtime (cgo; only in builds with -tags airlock_wasmtime).
	Engine string
	// Unmetered compiles wasmtime code without fuel metering, which costs
	// ~20% on interpreter-bound code (docs/performance.md, Compute): runs then report no
	// fuel and cannot be given a fuel cap. wazero never meters.
	Unmetered bool
	// Entry names functions, in the module's name section, that a resume
	// from an image with an entry point (Snapshot.Entry) calls in turn on an
	// empty stack, the last one with the entry point as its argument
	// (LoadResumable exports them). A module that does not name them all
	// resumes only by asyncify's rewind.
	Entry []string
}

// Compiled is a compiled WASI program, shared by every Sandbox in the process
// that loads the same bytes with the same cache directory.
type Compiled struct {
	key    string
	code   backend.Code // the engine's (wazero.go, package wasmtime)
	minMem uint64
	refs   int
	snap   *resumable // set by LoadResumable (snapshot.go)
	// closes are the instances of Resume calls still closing in the
	// background (close_later.go); the last Close waits for them.
	closes pendingCloses
}

var (
	loadedMu sync.Mutex
	loaded   = map[string]*Compiled{}
)

// Load compiles wasm, or returns the process's already compiled copy.
//
// # Errors
// A module that does not decode or validate, or a cache directory that
// cannot be created.
func Load(ctx context.Context, wasm []byte, opts Options) (*Compiled, error) {
	return load(ctx, sourceOf(wasm), opts)
}

// load is Load of a module whose bytes are read only if this process has
// not compiled it yet (prepared.go).
func load(ctx context.Context, src source, opts Options) (*Compiled, error) {
	digest := src.digest
	name, err := engineName(opts.Engine)
	if err != nil {
		return nil, err
	}
	key := digest + "\x00" + opts.CacheDir + "\x00" + name
	if opts.Unmetered && name != EngineWazero {
		key += "\x00unmetered"
	}
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if m, ok := loaded[key]; ok {
		m.refs++
		return m, nil
	}
	var c backend.Code
	if name == EngineWazero {
		c, err = loadWazero(ctx, src, opts)
	} else {
		c, err = backend.Wasmtime(ctx, src.digest, src.bytes, backend.LoadOptions{CacheDir: opts.CacheDir, Unmetered: opts.Unmetered, Notice: opts.Notice})
	}
	if err != nil {
		return nil, err
	}
	m := &Compiled{key: key, code: c, minMem: c.MinMemory(), refs: 1}
	loaded[key] = m
	return m, nil
}

// Close releases this reference; the last one frees the compiled code.
func (m *Compiled) Close(ctx context.Context) error {
	loadedMu.Lock()
	defer loadedMu.Unlock()
	m.refs--
	if m.refs > 0 {
		return nil
	}
	delete(loaded, m.key)
	m.closes.stop()
	return m.code.Close(ctx)
}

// RunSpec is one run's instance-level configuration.
type RunSpec struct {
	WASI *wasi.State
	// MemoryLimit caps the instance's linear memory in bytes.
	MemoryLimit uint64
	// PauseWhen, in a Capture, picks the read of fd 0 the guest pauses in
	// (nil: the first). In a Resume it is asked at each read of fd 0
	// after the one the image was paused in; when it answers true the
	// guest pauses there as at Capture, and the Outcome carries the new
	// Snapshot: how a session keeps its interpreter between calls. It is
	// given the number of buffers the read passes, which tells C stdio's
	// reads from others. A Resume at an image's entry point (Snapshot.Entry)
	// never asks it: there a non-nil PauseWhen makes the guest's return
	// from its entry the pause.
	PauseWhen func(buffers uint32) bool
	// Fuel caps the WebAssembly instructions the guest may execute, on
	// engines that meter fuel (wasmtime); 0 is no cap. Running out ends the
	// run with ErrFuelExhausted.
	Fuel uint64
	// Unpooled makes a resumed run instantiate on its own path rather
	// than take an instance made ahead (wazero_pool.go): to measure the
	// pool, or to keep no idle instances.
	Unpooled bool
	// MaxThreads caps the threads a run may have at once besides its main
	// one, on engines that run threads (wazero; threads.go); 0 is
	// DefaultMaxThreads. A start past it fails in the guest as a thread
	// the system cannot start does.
	MaxThreads int
}

// Outcome is what a run reports beside its error.
type Outcome struct {
	// ExitCode is the guest's exit status when it exited (err == nil).
	ExitCode uint32
	// PeakMemory is the largest linear memory size the instance reached.
	PeakMemory uint64
	// MemoryLimitHit is true when the guest asked to grow past the cap.
	MemoryLimitHit bool
	// Image is the guest paused where RunSpec.PauseWhen asked (nil when
	// it ran to its exit instead). The caller owns it.
	Image *Snapshot
	// Fuel is the fuel the guest consumed, on engines that meter it
	// (wasmtime: about one unit per WebAssembly instruction); 0 on wazero.
	Fuel uint64
	// Phases is where a resumed run's time went (Resume only).
	Phases Phases
	// ThreadsStopped counts the guest's threads still alive when its
	// main thread returned, which the engine stopped (threads.go).
	ThreadsStopped int
}

// Run instantiates a fresh instance, calls _start and closes the instance.
//
// # Errors
// nil when the guest exited (by returning or proc_exit); ErrInterrupted
// (wrapping ctx.Err()) when ctx ended first; ErrBelowMinMemory when the cap is
// below the module's minimum memory; the error a host function trapped with
// (an output limit, say); *TrapError for a guest crash.
func (m *Compiled) Run(ctx context.Context, spec RunSpec) (Outcome, error) {
	limit, err := m.memoryCap(spec.MemoryLimit, nil)
	if err != nil {
		return Outcome{MemoryLimitHit: true}, err
	}
	r := &runState{ctx: ctx, wasi: spec.WASI, maxThreads: spec.MaxThreads}
	inst, err := m.code.Start(ctx, r, spec.start(limit), nil)
	if err != nil {
		return Outcome{MemoryLimitHit: errors.Is(err, ErrBelowMinMemory)}, err
	}
	defer inst.Close()
	err = inst.Call("_start")
	return r.classify(m.code, inst, outcomeOf(inst.Figures()), err)
}

// exportsFunction tells whether the module exports a function by name.
func (m *Compiled) exportsFunction(name string) bool { return m.code.ExportsFunction(name) }
