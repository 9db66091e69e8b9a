// Package engine runs WASI modules: it compiles a module once per process
// (with an on-disk cache across processes), and gives every run a fresh
// instance with its own memory cap, closed when the run ends.
//
// The package is the only place that knows the WebAssembly runtimes
// (wazero; wasmtime in builds with -tags airlock_wasmtime, see backend.go);
// callers see Module and RunSpec, and host functions come from package wasi.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/airlock-sandbox/airlock/internal/wasi"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
)

// Errors a run can end with besides the guest's own exit.
var (
	// ErrMemoryLimit: the module needs more memory than the run's cap allows
	// at instantiation.
	ErrMemoryLimit = errors.New("engine: memory limit below the module's minimum")
	// ErrInterrupted: the run's context ended (deadline or cancel) and the
	// guest was stopped. It wraps the context's error too.
	ErrInterrupted = errors.New("engine: run interrupted")
)

// TrapError is a guest crash: a WebAssembly trap such as unreachable or an
// out-of-bounds access, or a stack overflow.
type TrapError struct{ Err error }

func (e *TrapError) Error() string { return "engine: guest trapped: " + e.Err.Error() }
func (e *TrapError) Unwrap() error { return e.Err }

// Options configure Load.
type Options struct {
	// CacheDir keeps compiled code across processes; "" disables it.
	CacheDir string
	// Notice receives a one-line message before a slow, uncached compile.
	Notice io.Writer
	// Engine is the WebAssembly runtime: "" or EngineWazero (pure Go), or
	// EngineWasmtime (cgo; only in builds with -tags airlock_wasmtime).
	Engine string
	// Unmetered compiles wasmtime code without fuel metering, which costs
	// ~20% on interpreter-bound code (README, Compute): runs then report no
	// fuel and cannot be given a fuel cap. wazero never meters.
	Unmetered bool
}

// Module is a compiled WASI program, shared by every Sandbox in the process
// that loads the same bytes with the same cache directory.
type Module struct {
	key      string
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	minMem   uint64
	refs     int
	snap     *resumable // set by LoadResumable (snapshot.go)
	alt      backend    // non-nil when another engine than wazero runs it (backend.go)
	// interrupt: the code checks the interruptExport global in every loop
	// (interrupt.go); otherwise wazero closes the instance on ctx done.
	interrupt bool
}

var (
	loadedMu sync.Mutex
	loaded   = map[string]*Module{}
)

// compileWorkers bounds the goroutines wazero compiles a module with: each
// holds its own compiler state.
const compileWorkers = 4

// Load compiles wasm, or returns the process's already compiled copy.
//
// # Errors
// A module that does not decode or validate, or a cache directory that
// cannot be created.
func Load(ctx context.Context, wasm []byte, opts Options) (*Module, error) {
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
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
	if name != EngineWazero {
		return loadAlt(ctx, key, wasm, opts)
	}
	// DWARF would only decorate guest stack traces, and it costs seconds per
	// process when wazero reads the source map back from its cache.
	wasm, err = wasmbin.StripDebug(wasm)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	// Stopping a guest at its deadline: our own loop budget when the module
	// can take it (see interrupt.go), else wazero's check, which calls into
	// the runtime at every loop back-edge and costs 2-5x on loop-heavy code
	// (wazero issue 2466).
	instrumented, err := wasmbin.AddInterruptCheck(wasm, interruptExport, wasi.ModuleName, "sched_yield", interruptPeriod)
	if err == nil {
		wasm = instrumented
		sum = sha256.Sum256(wasm)
		digest = hex.EncodeToString(sum[:])
	}
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(err != nil).WithDebugInfoEnabled(false)
	instrumentErr := err
	marker := ""
	if opts.CacheDir != "" {
		if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: create cache dir: %w", err)
		}
		cache, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("engine: open compile cache: %w", err)
		}
		cfg = cfg.WithCompilationCache(cache)
		marker = filepath.Join(opts.CacheDir, digest+".compiled")
	}
	var cached map[string]bool
	if marker != "" {
		checkCacheRecord(opts.CacheDir, marker) // see wazero_cache.go
		cached = cacheFiles(opts.CacheDir)
	}
	if opts.Notice != nil && (marker == "" || !exists(marker)) {
		fmt.Fprintf(opts.Notice, "airlock: compiling the %d MB module once (takes seconds; cached after)...\n", len(wasm)>>20)
	}
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := registerWASI(ctx, r); err != nil {
		r.Close(ctx)
		return nil, err
	}
	// Functions compile on every core (up to compileWorkers): the first
	// run on an empty cache, the edge binary's, waits for this. It costs
	// ~5-15% more CPU and ~50-60 MB more peak memory; on the 2-core CI
	// machine kind, that first run took 2.8-4.4 s instead of 4.9-5.5 s
	// at load ~1.5 (README, Edge build).
	workers := min(runtime.GOMAXPROCS(0), compileWorkers)
	compiled, err := r.CompileModule(experimental.WithCompilationWorkers(ctx, workers), wasm)
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("engine: compile: %w", err)
	}
	if marker != "" {
		writeCacheRecord(opts.CacheDir, marker, cached)
	}
	m := &Module{key: key, runtime: r, compiled: compiled, refs: 1, interrupt: instrumentErr == nil}
	for _, mem := range compiled.ExportedMemories() {
		m.minMem = uint64(mem.Min()) * 65536
	}
	loaded[key] = m
	return m, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Close releases this reference; the last one frees the compiled code.
func (m *Module) Close(ctx context.Context) error {
	loadedMu.Lock()
	defer loadedMu.Unlock()
	m.refs--
	if m.refs > 0 {
		return nil
	}
	delete(loaded, m.key)
	if m.alt != nil {
		return m.alt.close()
	}
	return m.runtime.Close(ctx)
}

// registerWASI exports package wasi's table as the host module. Each call
// finds its run's state in the context the run passed to the guest.
func registerWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasi.ModuleName)
	for _, f := range wasi.Functions() {
		call := f.Call
		fn := api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			s := wasi.StateFrom(ctx)
			if s == nil {
				panic(errors.New("engine: WASI call outside a run"))
			}
			mem := mod.Memory()
			buf, _ := mem.Read(0, mem.Size())
			if err := call(ctx, s, buf, stack); err != nil {
				// wazero unwinds the guest and returns the panic value,
				// wrapped, from the guest call; hostTrap marks it as ours.
				panic(&hostTrap{err})
			}
		})
		if f.Name == "fd_read" {
			fn = pauseAtStdin(fn) // the snapshot point (snapshot.go)
		}
		b.NewFunctionBuilder().WithGoModuleFunction(fn, valueTypes(f.Params), valueTypes(f.Results)).Export(f.Name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("engine: register WASI: %w", err)
	}
	return nil
}

func valueTypes(ts []wasi.ValueType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
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
	// Image: how a session keeps its interpreter between calls. It is
	// given the number of buffers the read passes, which tells C stdio's
	// reads from others.
	PauseWhen func(buffers uint32) bool
	// Fuel caps the WebAssembly instructions the guest may execute, on
	// engines that meter fuel (wasmtime); 0 is no cap. Running out ends the
	// run with ErrFuelExhausted.
	Fuel uint64
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
	Image *Image
	// Fuel is the fuel the guest consumed, on engines that meter it
	// (wasmtime: about one unit per WebAssembly instruction); 0 on wazero.
	Fuel uint64
}

// Run instantiates a fresh instance, calls _start and closes the instance.
//
// # Errors
// nil when the guest exited (by returning or proc_exit); ErrInterrupted
// (wrapping ctx.Err()) when ctx ended first; ErrMemoryLimit when the cap is
// below the module's minimum memory; the error a host function trapped with
// (an output limit, say); *TrapError for a guest crash.
func (m *Module) Run(ctx context.Context, spec RunSpec) (Outcome, error) {
	if m.alt != nil {
		return m.alt.run(ctx, spec)
	}
	limits := &runLimits{maxBytes: spec.MemoryLimit &^ 0xffff}
	if limits.maxBytes < m.minMem {
		return Outcome{MemoryLimitHit: true}, ErrMemoryLimit
	}
	ctx = experimental.WithMemoryAllocator(ctx, allocator{limits: limits})
	ctx = wasi.WithState(ctx, spec.WASI)
	out := Outcome{}
	mod, err := m.instantiate(ctx)
	if err == nil {
		stop := m.watchInterrupt(ctx, mod)
		_, err = mod.ExportedFunction("_start").Call(ctx)
		stop()
		mod.Close(context.Background())
	}
	out.PeakMemory = limits.peak.Load()
	out.MemoryLimitHit = limits.hit.Load()
	return classify(ctx, out, err)
}

// instantiate makes a fresh, anonymous instance. wazero recovers panics
// inside guest calls but not during instantiation, where a memory allocator
// that cannot provide the module's minimum would panic; callers check the
// minimum first, and this turns anything missed into an error rather than
// a crash of the host.
func (m *Module) instantiate(ctx context.Context) (mod api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			mod, err = nil, fmt.Errorf("engine: instantiate: %v", r)
		}
	}()
	return m.runtime.InstantiateModule(ctx, m.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
}

func classify(ctx context.Context, out Outcome, err error) (Outcome, error) {
	if err == nil {
		return out, nil
	}
	var exit *wasi.ExitError
	if errors.As(err, &exit) {
		out.ExitCode = exit.Code
		return out, nil
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
	}
	var sysExit *sys.ExitError
	if errors.As(err, &sysExit) {
		// Closed from outside with a code; treat like an interruption.
		return out, fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	var ht *hostTrap
	if errors.As(err, &ht) {
		return out, ht.err
	}
	return out, &TrapError{Err: err}
}

// hostTrap carries a host function's error through the guest's unwinding.
type hostTrap struct{ err error }

func (t *hostTrap) Error() string { return t.err.Error() }
func (t *hostTrap) Unwrap() error { return t.err }
