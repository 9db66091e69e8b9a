package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/wasi"
)

// The wazero engine, the default: pure Go, no cgo.

// compileWorkers bounds the goroutines wazero compiles a module with: each
// holds its own compiler state.
const compileWorkers = 4

var (
	_ backend.Code     = (*wzCode)(nil)
	_ backend.Instance = (*wzInstance)(nil)
	_ backend.Instance = wzCaller{}
)

type wzCode struct {
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	minMem   uint64
	// interrupt: the code checks the interruptExport global in every loop
	// (interrupt.go); otherwise wazero closes the instance on ctx done.
	interrupt bool
	// addedFuncs: where the rewrite's own functions start (budgetMeta).
	addedFuncs uint32
	// refused: why the budget rewrite left out either part, for tests.
	refused string
	// cacheDir and marker: where the compiled code is kept, and the record
	// naming its file (wazero_cache.go); "" without a cache.
	cacheDir, marker string
	// exports names the exported functions, read from the export section:
	// wazero's CompiledModule.ExportedFunctions builds a definition of
	// every function (21,000 objects, 3.2 MB of pointers for the own
	// build), kept and marked by every GC for the code's life: a forced
	// GC took 1.79 ms with them, 1.45 without (RATIONALE, "What a slow
	// run waited for").
	exports map[string]bool

	poolMu sync.Mutex
	pools  map[poolKey]*instancePool // instances made ahead (wazero_pool.go)
	closed bool
}

func loadWazero(ctx context.Context, src source, opts Options) (backend.Code, error) {
	// Stopping a guest at its deadline: our own loop budget when the module
	// can take it (see interrupt.go), else wazero's check, which calls into
	// the runtime at every loop back-edge and costs 2-5x on loop-heavy code
	// (wazero issue 2466).
	out, budget, err := budgetRewrite.run(opts.CacheDir, src)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	wasm, err := out.bytes()
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	digest := out.digest
	uncached := wazero.NewRuntimeConfig().WithCloseOnContextDone(!budget.Interrupt).WithDebugInfoEnabled(false)
	cfg := uncached
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
		marker = recordPath(opts.CacheDir, digest)
	}
	var cached map[string]bool
	if marker != "" {
		checkCacheRecord(opts.CacheDir, marker) // see wazero_cache.go
		cached = cacheFiles(opts.CacheDir)
	}
	if opts.Notice != nil && len(wasm) >= NoticeSize && (marker == "" || !exists(marker)) {
		fmt.Fprintf(opts.Notice, "airlock: compiling the %d MB module once (takes seconds; cached after)...\n", len(wasm)>>20)
	}
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := registerHost(ctx, r); err != nil {
		r.Close(ctx)
		return nil, err
	}
	// Functions compile on every core (up to compileWorkers): the first
	// run on an empty cache, the edge binary's, waits for this. It costs
	// ~5-15% more CPU and ~50-60 MB more peak memory; on the 2-core CI
	// machine kind, that first run took 2.8-4.4 s instead of 4.9-5.5 s
	// at load ~1.5 (docs/build.md, Edge build).
	workers := min(runtime.GOMAXPROCS(0), compileWorkers)
	compiled, err := r.CompileModule(experimental.WithCompilationWorkers(ctx, workers), wasm)
	if err != nil && marker != "" && cacheWriteFailed(err, opts.CacheDir) {
		// Compiled, but not stored (a full disk, say): this process runs
		// the code uncached rather than fail every run.
		r.Close(ctx)
		if opts.Notice != nil {
			fmt.Fprintf(opts.Notice, "airlock: the compiled code was not cached (%v); compiling it again for this process only\n", err)
		}
		marker = ""
		r = wazero.NewRuntimeWithConfig(ctx, uncached)
		if err := registerHost(ctx, r); err != nil {
			r.Close(ctx)
			return nil, err
		}
		compiled, err = r.CompileModule(experimental.WithCompilationWorkers(ctx, workers), wasm)
	}
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("engine: compile: %w", err)
	}
	if marker != "" {
		writeCacheRecord(opts.CacheDir, marker, cached)
	}
	if err := registerEH(ctx, r, compiled); err != nil {
		r.Close(ctx)
		return nil, err
	}
	exports, err := wasmbin.Exports(wasm)
	if err != nil { // wazero took the module: not expected
		r.Close(ctx)
		return nil, fmt.Errorf("engine: read exports: %w", err)
	}
	c := &wzCode{runtime: r, compiled: compiled, interrupt: budget.Interrupt, addedFuncs: budget.AddedFuncs, refused: budget.refusals(), cacheDir: opts.CacheDir, marker: marker,
		exports: map[string]bool{}}
	for _, e := range exports {
		if e.Kind == wasmbin.KindFunc {
			c.exports[e.Name] = true
		}
	}
	for _, mem := range compiled.ExportedMemories() {
		c.minMem = uint64(mem.Min()) * PageSize
	}
	return c, nil
}

// budgetRewrite strips DWARF (it would only decorate guest stack traces,
// and it costs seconds per process when wazero reads the source map back
// from its cache), adds the loop budget where the module can take it, and
// leaves the function table to fill on first use (wasmbin.LazyTable:
// wazero would fill all of it at every instantiation; wasmtime fills
// tables lazily itself). Its fill is exported as tableFillExport for
// invoke_ (cxxeh_wazero.go), which reaches the table without the guest's
// export, so a module exporting its table for invoke_ gets it too.
var budgetRewrite = rewrite[budgetMeta]{
	name: "budget-6",
	apply: func(wasm []byte) ([]byte, budgetMeta, error) {
		wasm, err := wasmbin.StripDebug(wasm)
		if err != nil {
			return nil, budgetMeta{}, err
		}
		var meta budgetMeta
		// A module either rewrite refuses (atomics, exceptions, a table
		// in use beyond indirect calls) runs without it, as wazero
		// compiles it; the reason is kept with the meta.
		if instrumented, err := wasmbin.AddInterruptCheck(wasm, interruptExport, wasi.ModuleName, "sched_yield", interruptPeriod); err == nil {
			wasm, meta.Interrupt = instrumented, true
		} else {
			meta.InterruptRefused = err.Error()
		}
		if lazy, added, err := wasmbin.LazyTable(wasm, tableFillExport); err == nil {
			wasm, meta.LazyTable, meta.AddedFuncs = lazy, true, added
		} else {
			meta.LazyTableRefused = err.Error()
		}
		return wasm, meta, nil
	},
}

// tableFillExport names LazyTable's fill(slot), which stores in an empty
// slot the function the module's segments put there.
const tableFillExport = "airlock.table_fill"

// budgetMeta tells what budgetRewrite's output has.
type budgetMeta struct {
	Interrupt bool `json:"interrupt"`
	LazyTable bool `json:"lazy_table"`
	// InterruptRefused and LazyTableRefused say why a rewrite was not
	// taken ("" when it was).
	InterruptRefused string `json:"interrupt_refused,omitempty"`
	LazyTableRefused string `json:"lazy_table_refused,omitempty"`
	// AddedFuncs, when not 0, is the index of the first function the
	// rewrite added (LazyTable's fill and trampolines): not the guest's,
	// so left out of a trap's frames.
	AddedFuncs uint32 `json:"added_funcs,omitempty"`
}

// refusals joins the reasons either rewrite was not taken.
func (m budgetMeta) refusals() string {
	var why []string
	if m.InterruptRefused != "" {
		why = append(why, "loop check: "+m.InterruptRefused)
	}
	if m.LazyTableRefused != "" {
		why = append(why, "lazy table: "+m.LazyTableRefused)
	}
	return strings.Join(why, "; ")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// registerHost exports the host's modules: WASI and the threads'.
func registerHost(ctx context.Context, r wazero.Runtime) error {
	if err := registerWASI(ctx, r); err != nil {
		return err
	}
	return registerThreads(ctx, r)
}

// registerWASI exports package wasi's table as the host module. Each call
// finds its run in the context the run passed to the guest.
func registerWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasi.ModuleName)
	for _, f := range wasi.Functions() {
		call := f.Call
		pauses := f.Name == "fd_read" // the snapshot point (snapshot.go)
		// The loop budget's call, where a thread waiting to run gets its
		// turn asked for; and sleeps, which let the others run (threads.go).
		budget, polls := f.Name == "sched_yield", f.Name == "poll_oneoff"
		fn := api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			r := runFrom(ctx)
			if r == nil {
				panic(errors.New("engine: WASI call outside a run"))
			}
			if r.threads != nil {
				switch {
				case budget:
					r.threads.checkSwitch(ctx)
				case polls && r.threads.others():
					ctx = wasi.WithSleepAround(ctx, r.threads.sleepAround(ctx, func(err error) { trapThread(ctx, r, err) }))
				}
			}
			// Only the main thread pauses: the image holds one stack, and
			// another thread's read of stdin is a read.
			if pauses && r.Pausing(stack) && ctx.Value(threadKey{}) == nil {
				done, err := r.AtStdinRead(wzCaller{ctx: ctx, mod: mod}, stack)
				if err != nil {
					r.trapWazero(err)
				}
				if done {
					return
				}
			}
			mem := mod.Memory()
			buf, _ := mem.Read(0, mem.Size())
			if err := call(ctx, r.wasi, buf, stack); err != nil {
				trapThread(ctx, r, err)
			}
		})
		b.NewFunctionBuilder().WithGoModuleFunction(fn, valueTypes(f.Params), valueTypes(f.Results)).Export(f.Name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("engine: register WASI: %w", err)
	}
	return nil
}

// trapWazero ends the guest's call with a host function's error: wazero unwinds
// the guest and returns the panic value, wrapped, from the guest call.
func (r *runState) trapWazero(err error) {
	r.hostErr = err
	panic(&hostTrap{err})
}

func valueTypes(ts []wasi.ValueType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

func (c *wzCode) Start(ctx context.Context, r backend.Run, spec backend.Spec, image backend.Image) (backend.Instance, error) {
	img, _ := image.(*Snapshot)
	limit := spec.Limit
	if !spec.Unpooled {
		if p := c.instancePool(img, limit); p != nil {
			if mod, limits := p.take(); mod != nil {
				ctx = context.WithValue(ctx, runKey{}, r)
				return &wzInstance{wzCaller: wzCaller{ctx: ctx, mod: mod}, code: c, limits: limits, pooled: true}, nil
			}
		}
	}
	limits := &runLimits{maxBytes: limit}
	ctx = experimental.WithMemoryAllocator(ctx, allocator{limits: limits, image: img})
	ctx = context.WithValue(ctx, runKey{}, r)
	mod, err := c.instantiate(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
		}
		return nil, &TrapError{Err: err}
	}
	return &wzInstance{wzCaller: wzCaller{ctx: ctx, mod: mod}, code: c, limits: limits}, nil
}

// instantiate makes a fresh, anonymous instance. wazero recovers panics
// inside guest calls but not during instantiation, where a memory allocator
// that cannot provide the module's minimum would panic; callers check the
// minimum first, and this turns anything missed into an error rather than
// a crash of the host.
func (c *wzCode) instantiate(ctx context.Context) (mod api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			mod, err = nil, fmt.Errorf("engine: instantiate: %v", r)
		}
	}()
	return c.runtime.InstantiateModule(ctx, c.compiled, instanceConfig)
}

// instanceConfig is every instance's: no name, no start function run by
// wazero. The random source is never read (random_get is our own WASI's),
// but without one wazero seeds a math/rand source per instance: ~15 µs of
// CPU and 4.9 KB each.
var instanceConfig = wazero.NewModuleConfig().WithName("").WithStartFunctions().WithRandSource(rand.Reader)

func (c *wzCode) ExportsFunction(name string) bool { return c.exports[name] }

func (c *wzCode) MinMemory() uint64         { return c.minMem }
func (c *wzCode) TrapCause(err error) error { return err }

// TrapFrames reads wazero's wasm stack trace, whose frames are lines
// "\t<module>.<function>(<params>) <results>"; the module's name may have
// dots ("python.wasm"), C names have none, an unnamed function is
// "$<index>". The engine is the one place that knows this format.
// The functions the rewrite added ("$<index>" past AddedFuncs) are left
// out: a guest's first call through a table slot passes a trampoline.
func (c *wzCode) TrapFrames(err error) []string {
	var frames []string
	for _, m := range traceFrame.FindAllStringSubmatch(err.Error(), -1) {
		if n, ok := strings.CutPrefix(m[1], "$"); ok && c.addedFuncs > 0 {
			if i, err := strconv.ParseUint(n, 10, 32); err == nil && uint32(i) >= c.addedFuncs {
				continue
			}
		}
		frames = append(frames, m[1])
	}
	return frames
}

var traceFrame = regexp.MustCompile(`(?m)^\t[^(\n]*\.([^.(\n]+)\(`)

func (c *wzCode) Close(ctx context.Context) error {
	c.closePools()
	return c.runtime.Close(ctx)
}

// wzCaller is an instance as a host function sees it: calls into it are
// nested in the guest's, whose context is already watched.
type wzCaller struct {
	ctx context.Context
	mod api.Module
}

func (i wzCaller) Memory() []byte {
	mem := i.mod.Memory()
	buf, _ := mem.Read(0, mem.Size())
	return buf
}

func (i wzCaller) Grow(pages uint32) (uint32, bool) { return i.mod.Memory().Grow(pages) }

func (i wzCaller) Global(name string) (uint64, error) {
	g := i.mod.ExportedGlobal(name)
	if g == nil {
		return 0, fmt.Errorf("engine: no global %s", name)
	}
	return g.Get(), nil
}

func (i wzCaller) SetGlobal(name string, v uint64) error {
	g, ok := i.mod.ExportedGlobal(name).(api.MutableGlobal)
	if !ok {
		return fmt.Errorf("engine: global %s is not mutable", name)
	}
	g.Set(v)
	return nil
}

func (i wzCaller) Call(name string, args ...uint32) error {
	_, err := i.call(name, args)
	return err
}

// call calls an export and gives back its first result, if any.
func (i wzCaller) call(name string, args []uint32) (uint32, error) {
	f := i.mod.ExportedFunction(name)
	if f == nil {
		return 0, fmt.Errorf("engine: no export %s", name)
	}
	var stack [1]uint64
	params := stack[:0]
	for _, a := range args {
		params = append(params, uint64(a))
	}
	results, err := f.Call(i.ctx, params...)
	if err != nil || len(results) == 0 {
		return 0, err
	}
	return uint32(results[0]), nil
}

func (wzCaller) Figures() backend.Figures { return backend.Figures{} }
func (wzCaller) FuelExhausted() bool      { return false } // wazero does not meter
func (wzCaller) Close()                   {}

// wzInstance is an instance a run started.
type wzInstance struct {
	wzCaller
	code   *wzCode
	limits *runLimits
	pooled bool // made ahead (wazero_pool.go)
}

func (i *wzInstance) Pooled() bool { return i.pooled }

func (i *wzInstance) Call(name string, args ...uint32) error {
	_, err := i.CallResult(name, args...)
	return err
}

func (i *wzInstance) CallResult(name string, args ...uint32) (uint32, error) {
	stop := i.code.watchInterrupt(i.ctx, i.mod)
	ret, err := i.wzCaller.call(name, args)
	if r := runFrom(i.ctx); r != nil {
		r.endThreads()
	}
	stop()
	var sysExit *sys.ExitError
	if errors.As(err, &sysExit) && i.ctx.Err() == nil {
		// Closed from outside with a code; treat like an interruption.
		return 0, fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	return ret, err
}

func (i *wzInstance) Figures() backend.Figures {
	return backend.Figures{PeakMemory: i.limits.peak.Load(), MemoryLimitHit: i.limits.hit.Load()}
}

func (i *wzInstance) Close() { i.mod.Close(context.Background()) }
