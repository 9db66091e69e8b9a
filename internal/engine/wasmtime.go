//go:build airlock_wasmtime && cgo && unix

package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	wasmtime "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/internal/wasi"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
)

// The wasmtime engine: the same WASI table, snapshots and limits as on
// wazero, plus fuel. Fuel metering is on unless Options.Unmetered, so every
// run reports what it consumed; a run without a fuel cap gets more than it
// could use.

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

func init() { loadWasmtime = loadWasmtimeModule }

type wtModule struct {
	engine  *wasmtime.Engine
	linker  *wasmtime.Linker
	module  *wasmtime.Module
	minMem  uint64
	metered bool // Options.Unmetered unset
	exports map[string]bool
}

func loadWasmtimeModule(ctx context.Context, wasm []byte, opts Options) (backend, error) {
	wasm, err := wasmbin.StripDebug(wasm)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	cfg := wasmtime.NewConfig()
	cfg.SetConsumeFuel(!opts.Unmetered)
	cfg.SetEpochInterruption(true)
	cfg.SetMaxWasmStack(wasmtimeStack()) // wasmtime_stack.go
	// Copy-on-write data initialisation needs wasmtime's own mmap
	// memories; with ours, wasmtime copies the data segments in.
	cfg.SetMemoryInitCOWSet(false)
	setMemoryCreator(cfg)
	eng := wasmtime.NewEngineWithConfig(cfg)
	mod, err := compileCached(eng, wasm, opts)
	if err != nil {
		eng.Close()
		return nil, err
	}
	linker, err := wasmtimeLinker(eng)
	if err != nil {
		mod.Close()
		eng.Close()
		return nil, err
	}
	m := &wtModule{engine: eng, linker: linker, module: mod, metered: !opts.Unmetered, exports: map[string]bool{}}
	for _, e := range mod.Exports() {
		ty := e.Type()
		if mt := ty.MemoryType(); mt != nil {
			m.minMem = mt.Minimum() * 65536
		}
		if ty.FuncType() != nil {
			m.exports[e.Name()] = true
		}
	}
	return m, nil
}

// compileCached compiles wasm, or loads the code compiled by an earlier
// process from opts.CacheDir. Only files this function wrote are loaded,
// and only intact: deserialising trusts the file as machine code, and
// wasmtime checks its structure and version, not its code bytes, so the
// file ends with the sha256 of the code before it, checked first (a
// flipped byte would otherwise run as changed instructions).
func compileCached(eng *wasmtime.Engine, wasm []byte, opts Options) (*wasmtime.Module, error) {
	path := ""
	if opts.CacheDir != "" {
		h := sha256.New()
		h.Write(wasm)
		h.Write([]byte("\x00" + WasmtimeVersion + "\x00" + wasmtimeConfig(!opts.Unmetered)))
		dir := filepath.Join(opts.CacheDir, "wasmtime")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: create cache dir: %w", err)
		}
		path = filepath.Join(dir, hex.EncodeToString(h.Sum(nil))+".cwasm")
		if data, err := os.ReadFile(path); err == nil {
			if code, ok := verifiedCode(data); ok {
				if mod, err := wasmtime.NewModuleDeserialize(eng, code); err == nil {
					return mod, nil
				}
			}
			if opts.Notice != nil {
				fmt.Fprintf(opts.Notice, "airlock: %s is damaged; compiling again\n", path)
			}
		}
	}
	if opts.Notice != nil {
		fmt.Fprintf(opts.Notice, "airlock: compiling the %d MB module for wasmtime once (takes seconds; cached after)...\n", len(wasm)>>20)
	}
	mod, err := wasmtime.NewModule(eng, wasm)
	if err != nil {
		return nil, fmt.Errorf("engine: compile: %w", err)
	}
	if path != "" {
		if code, err := mod.Serialize(); err == nil {
			sum := sha256.Sum256(code)
			_ = atomicfile.WriteBytes(path, 0o600, append(code, sum[:]...)) // failing costs a later compile
		}
	}
	return mod, nil
}

// verifiedCode is a cache file's code when its trailing sha256 matches.
func verifiedCode(data []byte) ([]byte, bool) {
	if len(data) < sha256.Size {
		return nil, false
	}
	code, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	want := sha256.Sum256(code)
	return code, bytes.Equal(sum, want[:])
}

// wasmtimeLinker defines package wasi's table once per engine; each call
// finds its run in the store's data.
func wasmtimeLinker(eng *wasmtime.Engine) (*wasmtime.Linker, error) {
	l := wasmtime.NewLinker(eng)
	for _, f := range wasi.Functions() {
		ty := wasmtime.NewFuncType(wtValTypes(f.Params), wtValTypes(f.Results))
		call, results := f.Call, f.Results
		pauses := f.Name == "fd_read" // the snapshot point (snapshot.go)
		fn := func(c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
			r, _ := c.Data().(*wtRun)
			if r == nil {
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
			if pauses && uint32(stack[0]) == 0 && r.pause != nil {
				// As pauseAtStdin (snapshot.go) does on wazero.
				switch r.pause.at(uint32(stack[2])) {
				case pauseHere:
					return r.pauseHere(c)
				case stopRewind:
					if _, err := callExport(c, "asyncify_stop_rewind"); err != nil {
						return nil, r.trap(err)
					}
				}
			}
			if err := callSafely(call, r, stack); err != nil {
				return nil, r.trap(err)
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
	return l, nil
}

// callSafely runs a WASI function, turning a panic into the run's error:
// wazero does so for its host functions, and wasmtime-go would instead
// re-raise it in the host once the guest call returns.
func callSafely(call func(context.Context, *wasi.State, []byte, []uint64) error, r *wtRun, stack []uint64) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("engine: host function panicked: %v", v)
		}
	}()
	return call(r.ctx, r.wasi, r.mem.memory(), stack)
}

func wtValTypes(ts []wasi.ValueType) []*wasmtime.ValType {
	out := make([]*wasmtime.ValType, len(ts))
	for i, t := range ts {
		kind := wasmtime.KindI32
		if t == wasi.I64 {
			kind = wasmtime.KindI64
		}
		out[i] = wasmtime.NewValType(kind)
	}
	return out
}

// wtRun is one run's state, the store's data.
type wtRun struct {
	ctx     context.Context
	wasi    *wasi.State
	pause   *pausePoint
	mem     cRun
	metered bool
	fuel    uint64 // given at the start, when metered
	hostErr error  // the error a host function trapped with
	store   *wasmtime.Store
	inst    *wasmtime.Instance
}

// pauseHere starts the unwind that pauses the guest in this read.
func (r *wtRun) pauseHere(c *wasmtime.Caller) ([]wasmtime.Val, *wasmtime.Trap) {
	if err := r.unwind(c); err != nil {
		return nil, r.trap(err)
	}
	return []wasmtime.Val{wasmtime.ValI32(0)}, nil // ignored: the caller unwinds
}

func (r *wtRun) trap(err error) *wasmtime.Trap {
	r.hostErr = err
	return wasmtime.NewTrap(err.Error())
}

// callExport calls one of the instance's exports from inside a host call.
func callExport(c *wasmtime.Caller, name string, args ...any) (any, error) {
	ext := c.GetExport(name)
	if ext == nil || ext.Func() == nil {
		return nil, fmt.Errorf("engine: no export %s", name)
	}
	res, err := ext.Func().Call(c, args...)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", name, err)
	}
	return res, nil
}

// unwind is pausePoint.unwind on wasmtime: room for asyncify's buffer,
// then the unwind starts and the guest returns from _start.
func (r *wtRun) unwind(c *wasmtime.Caller) error {
	if fds := r.wasi.OpenFDs(); !slices.Equal(fds, []uint32{0, 1, 2, 3}) {
		return fmt.Errorf("%w: %v", ErrPausedWithOpenFiles, fds)
	}
	if r.pause.buffer == 0 {
		// Pages the guest's allocator never saw, reused by later pauses.
		mem := c.GetExport("memory").Memory()
		old, err := mem.Grow(c, unwindPages)
		if err != nil {
			return fmt.Errorf("engine: snapshot: no room for the unwind buffer: %w", ErrMemoryLimit)
		}
		r.pause.buffer = uint32(old * 65536)
	}
	buf := r.pause.buffer
	m := r.mem.memory()
	if uint64(buf)+unwindPages*65536 > uint64(len(m)) {
		return fmt.Errorf("engine: snapshot: unwind buffer at %#x outside memory", buf)
	}
	putUint32(m[buf:], buf+8)
	putUint32(m[buf+4:], buf+unwindPages*65536)
	if _, err := callExport(c, "asyncify_start_unwind", int32(buf)); err != nil {
		return err
	}
	r.pause.unwinding = true
	return nil
}

func putUint32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// start makes a store and instance for one run. On error the run is
// already released.
func (m *wtModule) start(ctx context.Context, spec RunSpec, pause *pausePoint) (*wtRun, error) {
	limit := spec.MemoryLimit &^ 0xffff
	if limit < m.minMem {
		return nil, ErrMemoryLimit
	}
	r := &wtRun{ctx: wasi.WithState(ctx, spec.WASI), wasi: spec.WASI, pause: pause, mem: newCRun(limit)}
	r.store = wasmtime.NewStoreWithData(m.engine, r)
	if err := r.setFuel(m.metered, spec.Fuel); err != nil {
		r.release()
		return nil, err
	}
	r.store.SetEpochDeadline(1)
	r.mem.watchEpoch(r.store)
	var err error
	r.mem.instantiate(func() { r.inst, err = m.linker.Instantiate(r.store, m.module) })
	if err != nil {
		r.release()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
		}
		return nil, fmt.Errorf("engine: instantiate: %w", err)
	}
	return r, nil
}

// setFuel fills a metered store's tank: the cap, or more than the run
// could use.
func (r *wtRun) setFuel(metered bool, limit uint64) error {
	if !metered {
		if limit > 0 {
			return ErrUnmetered
		}
		return nil
	}
	r.metered, r.fuel = true, limit
	if r.fuel == 0 {
		r.fuel = unlimitedFuel
	}
	if err := r.store.SetFuel(r.fuel); err != nil {
		return fmt.Errorf("engine: set fuel: %w", err)
	}
	return nil
}

// call runs an export of the instance with the run's context watched: when
// it ends, the epoch advances and this run's callback stops the guest.
func (r *wtRun) call(name string, args ...any) error {
	f := r.inst.GetFunc(r.store, name)
	if f == nil {
		return fmt.Errorf("engine: no export %s", name)
	}
	done := make(chan struct{})
	stop := context.AfterFunc(r.ctx, func() {
		defer close(done)
		r.mem.stop()
		r.store.Engine.IncrementEpoch()
	})
	// A callback already started must finish before the run's C memory
	// can be freed: a late stop() would write into memory that the next
	// run's calloc may get, stopping that run at once.
	defer func() {
		if !stop() {
			<-done
		}
	}()
	_, err := f.Call(r.store, args...)
	return err
}

func (r *wtRun) release() {
	r.store.Close()
	r.mem.free()
}

// outcome reads the run's figures; call it before release.
func (r *wtRun) outcome() Outcome {
	out := Outcome{PeakMemory: r.mem.peak(), MemoryLimitHit: r.mem.hit()}
	if !r.metered {
		return out
	}
	if left, err := r.store.GetFuel(); err == nil {
		out.Fuel = r.fuel - left
	}
	return out
}

// classify is engine.classify for wasmtime's errors.
func (r *wtRun) classify(out Outcome, err error) (Outcome, error) {
	if err == nil {
		return out, nil
	}
	var exit *wasi.ExitError
	if errors.As(r.hostErr, &exit) {
		out.ExitCode = exit.Code
		return out, nil
	}
	// wasmtime wraps the trap in its backtrace, which hides the trap code
	// from wasmtime_trap_code; an empty tank tells the same.
	if r.metered && r.hostErr == nil && out.Fuel == r.fuel {
		return out, ErrFuelExhausted
	}
	if ctxErr := r.ctx.Err(); ctxErr != nil {
		return out, fmt.Errorf("%w: %w", ErrInterrupted, ctxErr)
	}
	if r.hostErr != nil {
		return out, r.hostErr
	}
	return out, &TrapError{Err: trapCause(err)}
}

// trapCause puts the cause of a wasmtime trap ("wasm trap: call stack
// exhausted") first, before the backtrace wasmtime leads with.
func trapCause(err error) error {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "Caused by:\n"); ok {
		cause, _, _ := strings.Cut(strings.TrimSpace(after), "\n")
		return fmt.Errorf("%s\n%w", cause, err)
	}
	return err
}

func (m *wtModule) run(ctx context.Context, spec RunSpec) (Outcome, error) {
	r, err := m.start(ctx, spec, nil)
	if err != nil {
		return Outcome{MemoryLimitHit: errors.Is(err, ErrMemoryLimit)}, err
	}
	defer r.release()
	err = r.call("_start")
	return r.classify(r.outcome(), err)
}

func (m *wtModule) capture(ctx context.Context, spec RunSpec, snap *resumable) (*Image, error) {
	p := &pausePoint{capture: true, pauseWhen: spec.PauseWhen}
	r, err := m.start(ctx, spec, p)
	if err != nil {
		return nil, fmt.Errorf("engine: snapshot: %w", err)
	}
	defer r.release()
	mem := r.mem.memory()
	for _, s := range snap.segments {
		if uint64(s.Offset)+uint64(len(s.Data)) > uint64(len(mem)) {
			return nil, fmt.Errorf("engine: snapshot: data segment at %#x outside memory", s.Offset)
		}
		copy(mem[s.Offset:], s.Data)
	}
	err = r.call("_start")
	if err != nil || !p.fired {
		out, err := r.classify(Outcome{}, err)
		if err == nil {
			err = fmt.Errorf("%w (exit status %d)", ErrNoPausePoint, out.ExitCode)
		}
		return nil, fmt.Errorf("engine: snapshot: %w", err)
	}
	return r.paused(snap)
}

// paused finishes an unwind the guest has returned from and takes the
// instance's state as an Image.
func (r *wtRun) paused(snap *resumable) (*Image, error) {
	if err := r.call("asyncify_stop_unwind"); err != nil {
		return nil, fmt.Errorf("engine: snapshot: stop unwind: %w", err)
	}
	globals := make([]uint64, len(snap.globals))
	for i, name := range snap.globals {
		ext := r.inst.GetExport(r.store, name)
		if ext == nil || ext.Global() == nil {
			return nil, fmt.Errorf("engine: snapshot: no global %s", name)
		}
		globals[i] = wtGlobalBits(ext.Global().Get(r.store))
	}
	mem := r.mem.memory()
	if err := r.pause.checkStack(mem); err != nil {
		return nil, err
	}
	if base := r.pause.from; base != nil {
		// A session's pause: keep only what differs from the base image.
		if base.base != nil {
			base = base.base
		}
		if img, ok := captureDelta(base, r.pause.from, mem, globals, r.pause.buffer); ok {
			return img, nil
		}
	}
	return NewImage(slices.Clone(mem), globals, r.pause.buffer), nil
}

func (m *wtModule) resume(ctx context.Context, img *Image, spec RunSpec, snap *resumable) (Outcome, error) {
	if spec.MemoryLimit&^0xffff < uint64(img.Len()) {
		return Outcome{MemoryLimitHit: true}, ErrMemoryLimit
	}
	p := &pausePoint{buffer: img.UnwindBuffer, pauseWhen: spec.PauseWhen, from: img}
	r, err := m.start(ctx, spec, p)
	if err != nil {
		return Outcome{MemoryLimitHit: errors.Is(err, ErrMemoryLimit)}, err
	}
	defer r.release()
	err = r.rewind(img, snap)
	if err == nil {
		err = p.resumeErr(ctx, r.call("_start"))
	}
	var paused *Image
	if err == nil && p.paused {
		paused, err = r.paused(snap)
	}
	out := r.outcome()
	out.Image = paused
	return r.classify(out, err)
}

// rewind puts img's memory and globals into the run's fresh instance and
// starts asyncify's rewind.
func (r *wtRun) rewind(img *Image, snap *resumable) error {
	mem := r.inst.GetExport(r.store, "memory").Memory()
	pages := uint64(img.Len() / 65536)
	if cur := mem.Size(r.store); cur < pages {
		if _, err := mem.Grow(r.store, pages-cur); err != nil {
			return ErrMemoryLimit
		}
	}
	// A delta image (a session's) is its base with pages replaced.
	full := img
	if img.base != nil {
		full = img.base
	}
	if !mapImage(r.mem.memory(), full) {
		full.CopyTo(r.mem.memory())
	}
	img.applyDelta(r.mem.memory())
	for i, name := range snap.globals {
		ext := r.inst.GetExport(r.store, name)
		if ext == nil || ext.Global() == nil {
			return fmt.Errorf("engine: no global %s", name)
		}
		g := ext.Global()
		if err := g.Set(r.store, wtGlobalVal(g.Type(r.store).Content().Kind(), img.Globals[i])); err != nil {
			return fmt.Errorf("engine: global %s: %w", name, err)
		}
	}
	return r.call("asyncify_start_rewind", int32(img.UnwindBuffer))
}

// wtGlobalBits encodes a global's value as wazero does (api.EncodeI32, ...),
// so images are the same on both engines.
func wtGlobalBits(v wasmtime.Val) uint64 {
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

func wtGlobalVal(kind wasmtime.ValKind, bits uint64) wasmtime.Val {
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

func (m *wtModule) exportsFunction(name string) bool { return m.exports[name] }

func (m *wtModule) close() error {
	m.linker.Close()
	m.module.Close()
	m.engine.Close()
	return nil
}
