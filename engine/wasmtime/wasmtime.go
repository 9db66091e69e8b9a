//go:build airlock_wasmtime && cgo && unix

package wasmtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	wasmtime "github.com/bytecodealliance/wasmtime-go/v39"
	"golang.org/x/sys/unix"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/internal/filehash"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/wasi"
)

// The same WASI table, snapshots and limits as on wazero, plus fuel. Fuel
// metering is on unless Options.Unmetered, so every run reports what it
// consumed; a run without a fuel cap gets more than it could use.

// WasmtimeVersion is the wasmtime-go release compiled in; it keys the
// compile cache, whose files only the same release can load.
const WasmtimeVersion = "v39.0.1"

// unlimitedFuel is the fuel of a run without a cap: centuries of CPU.
const unlimitedFuel = math.MaxUint64 / 2

// wasmtimeConfig names the engine settings the compile cache depends on
// (the wasm stack limit is not one: wasmtime loads code compiled under
// another).
func wasmtimeConfig(metered bool) string {
	fuel := "1"
	if !metered {
		fuel = "0"
	}
	return "fuel=" + fuel + ";epoch=1;memcreator=1;cow=0"
}

func init() { backend.Wasmtime = loadWasmtimeModule }

var (
	_ backend.Code     = (*wtCode)(nil)
	_ backend.Instance = (*wtInstance)(nil)
	_ backend.Instance = wtCaller{}
)

type wtCode struct {
	engine  *wasmtime.Engine
	linker  *wasmtime.Linker
	module  *wasmtime.Module
	minMem  uint64
	metered bool // Options.Unmetered unset
	exports map[string]bool
	// ehValues is how many values the largest invoke_'s call passes or
	// returns (defineEH).
	ehValues int
	// regionSize is the reservation and guard the last instance's memory
	// took (cRun.wanted): the size of pooled region a run resumed from an
	// image is offered.
	regionSize atomic.Uint64
}

func loadWasmtimeModule(ctx context.Context, digest string, read func() ([]byte, error), opts backend.LoadOptions) (backend.Code, error) {
	// DWARF would only decorate guest stack traces; the module's bytes are
	// read only for a compile.
	stripped := func() ([]byte, error) {
		wasm, err := read()
		if err != nil {
			return nil, err
		}
		return wasmbin.StripDebug(wasm)
	}
	cfg := wasmtime.NewConfig()
	cfg.SetConsumeFuel(!opts.Unmetered)
	cfg.SetEpochInterruption(true)
	cfg.SetMaxWasmStack(wasmtimeStack()) // stack.go
	// Copy-on-write data initialisation needs wasmtime's own mmap
	// memories; with ours, wasmtime copies the data segments in.
	cfg.SetMemoryInitCOWSet(false)
	setMemoryCreator(cfg)
	eng := wasmtime.NewEngineWithConfig(cfg)
	mod, err := compileCached(eng, digest, stripped, opts)
	if err != nil {
		eng.Close()
		return nil, err
	}
	linker, err := wasmtimeLinker(eng)
	var ehValues int
	if err == nil {
		if ehValues, err = defineEH(linker, mod); err != nil {
			linker.Close()
		}
	}
	if err != nil {
		mod.Close()
		eng.Close()
		return nil, err
	}
	m := &wtCode{engine: eng, linker: linker, module: mod, metered: !opts.Unmetered, exports: map[string]bool{}, ehValues: ehValues}
	for _, e := range mod.Exports() {
		ty := e.Type()
		if mt := ty.MemoryType(); mt != nil {
			m.minMem = mt.Minimum() * engine.PageSize
		}
		if ty.FuncType() != nil {
			m.exports[e.Name()] = true
		}
	}
	return m, nil
}

// compileCached compiles the module read returns, or loads the code an
// earlier process compiled from opts.CacheDir, keyed by digest, the
// module's sha256 (and then never reads it). Only files this function
// wrote are loaded, and only intact: deserialising trusts the file as
// machine code, and wasmtime checks its structure and version, not its
// code bytes, so a record beside the file holds its sha256, checked first
// (a flipped byte would otherwise run as changed instructions). The check
// takes the sum a stamp remembers while the file is unchanged
// (internal/filehash), and wasmtime maps the file rather than reading it:
// a process then touches only the pages of code it runs.
func compileCached(eng *wasmtime.Engine, digest string, read func() ([]byte, error), opts backend.LoadOptions) (*wasmtime.Module, error) {
	path := ""
	if opts.CacheDir != "" {
		key := sha256.Sum256([]byte(digest + "\x00" + WasmtimeVersion + "\x00" + wasmtimeConfig(!opts.Unmetered)))
		dir := filepath.Join(opts.CacheDir, "wasmtime")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: create cache dir: %w", err)
		}
		path = filepath.Join(dir, hex.EncodeToString(key[:])+".cwasm")
		if rec, err := os.ReadFile(path + codeRecord); err == nil {
			if sum, err := filehash.Sum(path); err == nil && sum == strings.TrimSpace(string(rec)) {
				if mod, err := wasmtime.NewModuleDeserializeFile(eng, path); err == nil {
					return mod, nil
				}
			}
			if opts.Notice != nil {
				fmt.Fprintf(opts.Notice, "airlock: %s is damaged; compiling again\n", path)
			}
		}
	}
	wasm, err := read()
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if opts.Notice != nil && len(wasm) >= engine.NoticeSize {
		fmt.Fprintf(opts.Notice, "airlock: compiling the %d MB module for wasmtime once (takes seconds; cached after)...\n", len(wasm)>>20)
	}
	mod, err := wasmtime.NewModule(eng, wasm)
	if err != nil {
		return nil, fmt.Errorf("engine: compile: %w", err)
	}
	if path != "" {
		if code, err := mod.Serialize(); err == nil {
			// The code first: a record never names code not yet written.
			// Failing costs a later compile.
			sum := sha256.Sum256(code)
			if atomicfile.WriteBytes(path, 0o600, code) == nil {
				_ = atomicfile.WriteBytes(path+codeRecord, 0o600, []byte(hex.EncodeToString(sum[:])+"\n"))
			}
		}
	}
	return mod, nil
}

// codeRecord ends the name of the file holding a cache file's sha256.
const codeRecord = ".sha256"

// wasmtimeLinker defines package wasi's table once per engine; each call
// finds its run in the store's data.
func wasmtimeLinker(eng *wasmtime.Engine) (*wasmtime.Linker, error) {
	l := wasmtime.NewLinker(eng)
	for _, f := range wasi.Functions() {
		ty := wasmtime.NewFuncType(wtValTypes(f.Params), wtValTypes(f.Results))
		call, results := f.Call, f.Results
		pauses := f.Name == "fd_read" // the snapshot point (snapshot.go)
		fn := func(c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
			inst, _ := c.Data().(*wtInstance)
			if inst == nil {
				return nil, wasmtime.NewTrap("engine: WASI call outside a run")
			}
			stack := make([]uint64, max(len(args), len(results)))
			for i, a := range args {
				if a.Kind() == wasmtime.KindI64 {
					stack[i] = uint64(a.I64())
				} else {
					stack[i] = uint64(uint32(a.I32()))
				}
			}
			done := false
			if pauses && inst.run.Pausing(stack) {
				var err error
				if done, err = inst.run.AtStdinRead(wtCaller{c: c, inst: inst}, stack); err != nil {
					return nil, trap(inst.run, err)
				}
			}
			if !done {
				if err := callSafely(call, inst, stack); err != nil {
					return nil, trap(inst.run, err)
				}
			}
			out := make([]wasmtime.Val, len(results))
			for i, t := range results {
				if t == wasi.I64 {
					out[i] = wasmtime.ValI64(int64(stack[i]))
				} else {
					out[i] = wasmtime.ValI32(int32(uint32(stack[i])))
				}
			}
			return out, nil
		}
		if err := l.FuncNew(wasi.ModuleName, f.Name, ty, fn); err != nil {
			l.Close()
			return nil, fmt.Errorf("engine: register WASI: %w", err)
		}
	}
	if err := defineNoThreads(l); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// defineNoThreads serves python.wasm's threads imports without threads:
// a wasmtime Store runs one call at a time on one OS thread's stack, and
// its stack limit is the store's, so the green threads wazero runs
// (engine/threads.go) would run here with another thread's limit. spawn
// answers ENOTSUP; a timed wait is a sleep (nothing else could wake it),
// an untimed one a deadlock.
func defineNoThreads(l *wasmtime.Linker) error {
	i32, i64 := wasmtime.NewValType(wasmtime.KindI32), wasmtime.NewValType(wasmtime.KindI64)
	types := map[string]*wasmtime.FuncType{
		"spawn": wasmtime.NewFuncType([]*wasmtime.ValType{i32, i32, i32, i32, i32}, []*wasmtime.ValType{i32}),
		"wait":  wasmtime.NewFuncType([]*wasmtime.ValType{i32, i32, i64}, []*wasmtime.ValType{i32}),
		"wake":  wasmtime.NewFuncType([]*wasmtime.ValType{i32, i32}, []*wasmtime.ValType{i32}),
		"exit":  wasmtime.NewFuncType(nil, nil),
	}
	for name, ty := range types {
		fn := func(c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
			inst, _ := c.Data().(*wtInstance)
			if inst == nil {
				return nil, wasmtime.NewTrap("engine: threads call outside a run")
			}
			switch name {
			case "spawn":
				return []wasmtime.Val{wasmtime.ValI32(backend.ENOTSUP)}, nil
			case "wait":
				d := time.Duration(args[2].I64())
				if d < 0 {
					return nil, trap(inst.run, backend.ErrDeadlock)
				}
				if err := inst.run.WASI().Sleep(inst.run.Context(), d); err != nil {
					return nil, trap(inst.run, err)
				}
				return []wasmtime.Val{wasmtime.ValI32(1)}, nil
			case "wake":
				return []wasmtime.Val{wasmtime.ValI32(0)}, nil
			}
			return nil, trap(inst.run, errors.New("engine: the threads' exit without threads"))
		}
		if err := l.FuncNew(backend.ThreadsModule, name, ty, fn); err != nil {
			return fmt.Errorf("engine: register %s.%s: %w", backend.ThreadsModule, name, err)
		}
	}
	return nil
}

// callSafely runs a WASI function, turning a panic into the run's error:
// wazero does so for its host functions, and wasmtime-go would instead
// re-raise it in the host once the guest call returns.
func callSafely(call func(context.Context, *wasi.State, []byte, []uint64) error, inst *wtInstance, stack []uint64) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("engine: host function panicked: %v", v)
		}
	}()
	return call(inst.run.Context(), inst.run.WASI(), inst.mem.memory(), stack)
}

// trap ends the guest's call with a host function's error; the export
// call that returns gives it back (wtInstance.Call).
func trap(r backend.Run, err error) *wasmtime.Trap {
	r.Trapped(err)
	return wasmtime.NewTrap(err.Error())
}

func wtValTypes(ts []wasi.ValueType) []*wasmtime.ValType {
	out := make([]*wasmtime.ValType, len(ts))
	for i, t := range ts {
		out[i] = wasmtime.NewValType(wtKind(t))
	}
	return out
}

// start makes a store and instance for one run.
func (m *wtCode) Start(ctx context.Context, r backend.Run, spec backend.Spec, img backend.Image) (backend.Instance, error) {
	inst := &wtInstance{run: r, mem: newCRun(spec.Limit), ehValues: m.ehValues}
	if img != nil {
		inst.offerRegion(m.regionSize.Load(), img)
	}
	inst.store = wasmtime.NewStoreWithData(m.engine, inst)
	if err := inst.setFuel(m.metered, spec.Fuel); err != nil {
		inst.Close()
		return nil, err
	}
	inst.store.SetEpochDeadline(1)
	inst.mem.watchEpoch(inst.store)
	var err error
	inst.mem.instantiate(func() { inst.inst, err = m.linker.Instantiate(inst.store, m.module) })
	if err != nil {
		inst.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", engine.ErrInterrupted, ctx.Err())
		}
		return nil, fmt.Errorf("engine: instantiate: %w", err)
	}
	if w := inst.mem.wanted(); w != 0 {
		m.regionSize.Store(w)
	}
	if img != nil {
		if err := inst.load(img); err != nil {
			inst.Close()
			return nil, err
		}
	}
	return inst, nil
}

func (m *wtCode) ExportsFunction(name string) bool { return m.exports[name] }
func (m *wtCode) MinMemory() uint64                { return m.minMem }

// TrapCause puts the cause of a wasmtime trap ("wasm trap: call stack
// exhausted") first, before the backtrace wasmtime leads with.
func (m *wtCode) TrapCause(err error) error {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "Caused by:\n"); ok {
		cause, _, _ := strings.Cut(strings.TrimSpace(after), "\n")
		return fmt.Errorf("%s\n%w", cause, err)
	}
	return err
}

// TrapFrames: wasmtime's backtrace is not read; PausePath, the one user,
// runs on wazero.
func (m *wtCode) TrapFrames(error) []string { return nil }

func (m *wtCode) Close(context.Context) error {
	m.linker.Close()
	m.module.Close()
	m.engine.Close()
	return nil
}

// wtInstance is one run's store and instance, the store's data.
type wtInstance struct {
	run     backend.Run
	mem     cRun
	metered bool
	fuel    uint64 // given at the start, when metered
	store   *wasmtime.Store
	inst    *wasmtime.Instance
	// region, when not nil, is the pooled region offered for the memory
	// (offerRegion), given back with regionFree on close; imageLen is the
	// image's length, the part of it left readable.
	region     []byte
	regionFree func([]byte)
	imageLen   int
	eh         *wtEH // invoke_'s exports, found at the first (cxxeh_cgo.go)
	ehValues   int   // wtCode.ehValues
}

// offerRegion takes a region of size bytes that reads as img's memory
// (backend.Region: pooled and reset like wazero's, so a run faults on
// few pages and maps nothing) and offers it for the instance's memory. The
// code wasmtime compiled for a static memory checks no bounds: an access
// past the memory's size must fault, so the region past the image is made
// inaccessible here, and growing the memory opens it page by page
// (airlock_grow_memory). A size of 0 (no memory made yet, so not known)
// offers none.
func (i *wtInstance) offerRegion(size uint64, img backend.Image) {
	n := img.Len()
	if size <= uint64(n) {
		return
	}
	buf, free := backend.Region(img, size, true)
	if buf == nil {
		return // the instance maps its own
	}
	if err := unix.Mprotect(buf[n:], unix.PROT_NONE); err != nil {
		free(buf[:n])
		return
	}
	i.region, i.regionFree, i.imageLen = buf, free, n
	i.mem.offer(buf, n)
}

// setFuel fills a metered store's tank: the cap, or more than the run
// could use.
func (i *wtInstance) setFuel(metered bool, limit uint64) error {
	if !metered {
		if limit > 0 {
			return engine.ErrUnmetered
		}
		return nil
	}
	i.metered, i.fuel = true, limit
	if i.fuel == 0 {
		i.fuel = unlimitedFuel
	}
	if err := i.store.SetFuel(i.fuel); err != nil {
		return fmt.Errorf("engine: set fuel: %w", err)
	}
	return nil
}

// load grows the fresh instance's memory to img's size and fills it,
// unless it is the offered region, which holds the image already.
func (i *wtInstance) load(img backend.Image) error {
	pages := uint32(img.Len() / engine.PageSize)
	if cur := uint32(len(i.Memory()) / engine.PageSize); cur < pages {
		if _, ok := i.Grow(pages - cur); !ok {
			return engine.ErrBelowMinMemory
		}
	}
	if !i.mem.pooled() {
		backend.Fill(img, i.mem.memory())
	}
	return nil
}

func (i *wtInstance) Memory() []byte { return i.mem.memory() }

// Every wasmtime-go object made here that holds C state is closed as soon
// as it is used, not left to a finalizer: finalizers run on one goroutine
// after a GC, a cgo call each, and the ~14 a run left made bursts of
// thousands that held a core for milliseconds while two workers ran on two
// (RATIONALE, "What a slow run waited for"). A Memory, Global or Func is a
// plain value, valid once its Extern is closed.

// export is the instance's export name, or nil; close it after use.
func (i *wtInstance) export(name string) *wasmtime.Extern { return i.inst.GetExport(i.store, name) }

// exportAs is ext (the export name, nil when there is none) as a
// function or global (as: Extern.Func or Extern.Global), or an error
// saying there is no such what; it closes ext.
func exportAs[T any](ext *wasmtime.Extern, what, name string, as func(*wasmtime.Extern) *T) (*T, error) {
	if ext != nil {
		defer ext.Close()
		if v := as(ext); v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("engine: no %s %s", what, name)
}

// growMemory grows the memory ext (the export "memory") is by pages, and
// closes ext.
func growMemory(ext *wasmtime.Extern, store wasmtime.Storelike, pages uint32) (uint32, bool) {
	defer ext.Close()
	old, err := ext.Memory().Grow(store, uint64(pages))
	closeError(err)
	return uint32(old), err == nil
}

func (i *wtInstance) Grow(pages uint32) (uint32, bool) {
	return growMemory(i.export("memory"), i.store, pages)
}

func (i *wtInstance) Global(name string) (uint64, error) {
	g, err := exportAs(i.export(name), "global", name, (*wasmtime.Extern).Global)
	if err != nil {
		return 0, err
	}
	return wtBits(g.Get(i.store)), nil
}

func (i *wtInstance) SetGlobal(name string, v uint64) error {
	g, err := exportAs(i.export(name), "global", name, (*wasmtime.Extern).Global)
	if err != nil {
		return err
	}
	ty := g.Type(i.store)
	kind := ty.Content().Kind()
	ty.Close()
	if err := plainError(g.Set(i.store, wtFromBits(kind, v))); err != nil {
		return fmt.Errorf("engine: global %s: %w", name, err)
	}
	return nil
}

// closeError frees a wasmtime-go error's C state.
func closeError(err error) {
	switch e := err.(type) {
	case *wasmtime.Trap:
		e.Close()
	case *wasmtime.Error:
		e.Close()
	}
}

// plainError takes a wasmtime-go error's message and frees its C state:
// a Trap's or Error's message is a cgo call each time it is read, and
// nothing here needs more than the message.
func plainError(err error) error {
	switch e := err.(type) {
	case *wasmtime.Trap:
		msg := e.Message()
		e.Close()
		return wtError(msg)
	case *wasmtime.Error:
		msg := e.Error()
		e.Close()
		return wtError(msg)
	}
	return err
}

// wtError is a wasmtime error's message (plainError).
type wtError string

func (e wtError) Error() string { return string(e) }

// Call runs an export of the instance with the run's context watched: when
// it ends, the epoch advances and this run's callback stops the guest.
func (i *wtInstance) Call(name string, args ...uint32) error {
	_, err := i.CallResult(name, args...)
	return err
}

// CallResult is Call that also gives back the export's i32 result, if it
// has one.
func (i *wtInstance) CallResult(name string, args ...uint32) (uint32, error) {
	f, err := exportAs(i.export(name), "export", name, (*wasmtime.Extern).Func)
	if err != nil {
		return 0, err
	}
	done := make(chan struct{})
	stop := context.AfterFunc(i.run.Context(), func() {
		defer close(done)
		i.mem.stop()
		i.store.Engine.IncrementEpoch()
	})
	// A callback already started must finish before the run's C memory
	// can be freed: a late stop() would write into memory that the next
	// run's calloc may get, stopping that run at once.
	defer func() {
		if !stop() {
			<-done
		}
	}()
	ret, err := f.Call(i.store, i32Args(args)...)
	if err != nil && i.run.HostTrapped() {
		// CallError gives the host function's error instead; wasmtime's
		// message, formatted with a backtrace on reading (~20 µs of a
		// run's exit), goes unread.
		closeError(err)
		return 0, i.run.CallError(errHostTrapped)
	}
	if err != nil {
		return 0, i.run.CallError(plainError(err))
	}
	v, _ := ret.(int32) // nil for an export with no result
	return uint32(v), nil
}

var errHostTrapped = wtError("a host function trapped")

func i32Args(args []uint32) []any {
	out := make([]any, len(args))
	for n, a := range args {
		out[n] = int32(a)
	}
	return out
}

// Figures reads the run's figures; call it before close.
func (i *wtInstance) Figures() backend.Figures {
	out := backend.Figures{PeakMemory: i.mem.peak(), MemoryLimitHit: i.mem.hit()}
	if !i.metered {
		return out
	}
	if left, err := i.store.GetFuel(); err == nil {
		out.Fuel = i.fuel - left
	}
	return out
}

func (i *wtInstance) FuelExhausted() bool {
	if !i.metered {
		return false
	}
	left, err := i.store.GetFuel()
	return err == nil && left == 0
}

func (i *wtInstance) Close() {
	i.store.Close()
	if i.eh != nil {
		i.eh.free()
		i.eh = nil
	}
	if i.region != nil {
		// Readable and writable up to here: the image, and what the
		// memory grew to.
		used := i.imageLen
		if i.mem.pooled() {
			used = max(used, i.mem.open())
		}
		i.regionFree(i.region[:used])
		i.region = nil
	}
	i.mem.free()
}

// wtCaller is the instance as a host function sees it: its exports are
// reached through the caller, inside the guest's call.
type wtCaller struct {
	c    *wasmtime.Caller
	inst *wtInstance
}

func (w wtCaller) Memory() []byte { return w.inst.mem.memory() }

func (w wtCaller) Grow(pages uint32) (uint32, bool) {
	return growMemory(w.c.GetExport("memory"), w.c, pages)
}

func (w wtCaller) Global(name string) (uint64, error) { return w.inst.Global(name) }
func (w wtCaller) SetGlobal(name string, v uint64) error {
	return w.inst.SetGlobal(name, v)
}

func (w wtCaller) Call(name string, args ...uint32) error {
	f, err := exportAs(w.c.GetExport(name), "export", name, (*wasmtime.Extern).Func)
	if err != nil {
		return err
	}
	_, err = f.Call(w.c, i32Args(args)...)
	return plainError(err)
}

func (w wtCaller) Figures() backend.Figures { return w.inst.Figures() }
func (w wtCaller) FuelExhausted() bool      { return w.inst.FuelExhausted() }
func (wtCaller) Close()                     {}

// wtKind is t's kind in wasmtime.
func wtKind(t wasi.ValueType) wasmtime.ValKind {
	switch t {
	case wasi.I64:
		return wasmtime.KindI64
	case wasi.F32:
		return wasmtime.KindF32
	case wasi.F64:
		return wasmtime.KindF64
	}
	return wasmtime.KindI32
}

// wtBits encodes a value as wazero does (api.EncodeI32, ...): an i32 or
// f32 in the low half. Globals so encoded make images the same on both
// engines; invoke_'s C side takes its values so.
func wtBits(v wasmtime.Val) uint64 {
	switch v.Kind() {
	case wasmtime.KindI64:
		return uint64(v.I64())
	case wasmtime.KindF32:
		return uint64(math.Float32bits(v.F32()))
	case wasmtime.KindF64:
		return math.Float64bits(v.F64())
	}
	return uint64(uint32(v.I32()))
}

// wtFromBits is bits (wtBits) as a value of kind.
func wtFromBits(kind wasmtime.ValKind, bits uint64) wasmtime.Val {
	switch kind {
	case wasmtime.KindI64:
		return wasmtime.ValI64(int64(bits))
	case wasmtime.KindF32:
		return wasmtime.ValF32(math.Float32frombits(uint32(bits)))
	case wasmtime.KindF64:
		return wasmtime.ValF64(math.Float64frombits(bits))
	}
	return wasmtime.ValI32(int32(uint32(bits)))
}
