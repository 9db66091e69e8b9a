package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/internal/runout"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Module is a compiled WASI preview1 program (any language's, not only
// Python) that runs under the same isolation as a Python sandbox's runs:
// a fresh instance per run, a memory-only filesystem, no sockets, the
// run's limits and nothing the host did not give it. Load it once
// ([LoadModule]), run it many times ([Module.Run]); runs may go at once.
type Module struct {
	name string
	opts ModuleOptions
	code *Compiled
	// mu is held shared by each run, so Close waits for them.
	mu     sync.RWMutex
	closed bool
}

// ModuleOptions configure [LoadModule]. The zero value runs on wazero,
// with [DefaultLimits] and no compile cache on disk.
type ModuleOptions struct {
	// Engine is EngineWazero (the default, "") or EngineWasmtime (in
	// binaries that import package engine/wasmtime): see [Engines].
	Engine string
	// Unmetered turns wasmtime's fuel metering off: runs are faster and
	// cannot take a fuel limit. wazero never meters.
	Unmetered bool
	// CacheDir keeps the compiled code on disk across processes (the
	// process keeps its own copy either way); "" compiles in memory only.
	CacheDir string
	// Limits are the module's defaults for its runs' zero limits; zero
	// fields take DefaultLimits'.
	Limits Limits
	// Notice, if set, receives a one-line message before a slow first
	// compile.
	Notice io.Writer
}

// ModuleRequest is one run of a Module.
type ModuleRequest struct {
	// Args follow argv[0], which is the module's name (LoadModule's).
	Args []string
	// Env is the program's whole environment: nothing is inherited.
	Env map[string]string
	// Files are placed before the run, by guest path (a relative one is
	// under "/").
	Files map[string][]byte
	// Dirs are host directories copied into the filesystem before the
	// run: never mounted, so nothing the guest does reaches the host.
	// With no Dirs and no Files the module gets no directory at all (fd 3
	// is not open), as under wasmtime without --dir.
	Dirs []Dir
	// Stdin is what fd 0 reads.
	Stdin []byte
	// Limits bound the run; zero fields take the module's defaults
	// (ModuleOptions.Limits, over DefaultLimits()).
	Limits Limits
	// Deterministic gives the run a fake clock (starting 2000-01-01,
	// advancing 1 µs per reading) and a random source seeded by Seed.
	Deterministic bool
	Seed          uint64
	// OnOutput, if set, is called with what the program writes, as it
	// writes it (what is kept within Limits.Output).
	OnOutput func(stream string, p []byte)
}

// Dir is a host directory copied into a module run's filesystem.
type Dir struct {
	// Host is the directory on the host. Its regular files and
	// directories are copied; host symbolic links and special files are
	// left out, so a link cannot copy in what lies outside Host.
	Host string
	// Guest is where the copy goes, an absolute guest path ("/" is the
	// root the program sees).
	Guest string
}

// ErrModuleImports: a module imports something the sandbox does not serve.
var ErrModuleImports = errors.New("the module imports what the sandbox does not provide")

// ErrClosed answers a run of a Module after its Close.
var ErrClosed = errors.New("engine: the module is closed")

// LoadModule compiles a WASI preview1 module, or reuses the process's
// compiled copy (and opts.CacheDir's). name is the program's argv[0]
// ("main.wasm" if empty).
//
// # Errors
// [ErrEngineUnavailable]; a negative limit; a module that does not decode
// or validate, does not export _start and a memory, or imports anything
// but the WASI preview1 functions the sandbox serves ([ErrModuleImports],
// the message naming the import).
func LoadModule(ctx context.Context, name string, wasm []byte, opts ModuleOptions) (*Module, error) {
	if opts.Engine == "" && testenv.Defaults != nil {
		opts.Engine = testenv.Defaults().Engine
	}
	if opts.Engine == "" {
		opts.Engine = EngineWazero
	}
	if !slices.Contains(Engines(), opts.Engine) {
		return nil, fmt.Errorf("%w: %q (this binary has %s)", ErrEngineUnavailable, opts.Engine, strings.Join(Engines(), ", "))
	}
	if opts.Limits.negative() {
		return nil, errors.New("engine: ModuleOptions.Limits: limits must not be negative")
	}
	opts.Limits = opts.Limits.withDefaults(DefaultLimits())
	if err := checkModule(wasm); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	code, err := Load(ctx, wasm, Options{Notice: opts.Notice, Engine: opts.Engine, Unmetered: opts.Unmetered, CacheDir: opts.CacheDir})
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = "main.wasm"
	}
	return &Module{name: name, opts: opts, code: code}, nil
}

// RunModule loads wasm, runs req once and releases the module: for one
// run. A program running a module often keeps a LoadModule's Module.
func RunModule(ctx context.Context, name string, wasm []byte, req ModuleRequest, opts ModuleOptions) (*Result, error) {
	m, err := LoadModule(ctx, name, wasm, opts)
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	return m.Run(ctx, req)
}

// checkModule refuses, with its reason, a module that could only fail at
// instantiation with an engine's less readable message.
func checkModule(wasm []byte) error {
	imports, err := wasmbin.FuncImports(wasm)
	if err != nil {
		return fmt.Errorf("decode the module: %w", err)
	}
	served := map[string]bool{}
	for _, f := range wasi.Functions() {
		served[f.Name] = true
	}
	invokes := false
	for _, im := range imports {
		if backend.EHImport(im.Module, im.Name) {
			invokes = true
			continue
		}
		if backend.ThreadImport(im.Module, im.Name) {
			continue
		}
		if im.Module != wasi.ModuleName || !served[im.Name] {
			return fmt.Errorf("%w: %s.%s (only %s functions are served, and C++ exceptions' invoke_ and airlock_eh.unwind: a WASI preview1 command module)", ErrModuleImports, im.Module, im.Name, wasi.ModuleName)
		}
	}
	exports, err := wasmbin.Exports(wasm)
	if err != nil {
		return fmt.Errorf("decode the module: %w", err)
	}
	exported := func(name string, kind byte) bool {
		return slices.ContainsFunc(exports, func(e wasmbin.Export) bool { return e.Name == name && e.Kind == kind })
	}
	if invokes && !(exported(backend.StackPointerExport, wasmbin.KindGlobal) && exported(backend.SetThrewExport, wasmbin.KindFunc) && exported(backend.TableExport, wasmbin.KindTable)) {
		return fmt.Errorf("%w: %w", ErrModuleImports, ErrEHExports)
	}
	if !exported("_start", wasmbin.KindFunc) {
		return errors.New("the module exports no _start function: only WASI command modules run (a reactor or library has none)")
	}
	if !exported("memory", wasmbin.KindMemory) {
		return errors.New("the module exports no memory named \"memory\", which WASI needs")
	}
	return nil
}

// Close releases the compiled code (a shared copy stays until its last
// user closes it), after waiting for the runs going. Runs after Close
// fail with ErrClosed.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.code.Close(ctx)
}

// Run executes req in a fresh instance of the module. It always returns a
// Result; err is Result.Error (nil when the program ran to its own exit,
// whatever its exit code).
func (m *Module) Run(ctx context.Context, req ModuleRequest) (*Result, error) {
	start := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return failed(start, newError(KindInvalidRequest, ErrClosed, "the module is closed"))
	}
	limits := req.Limits.withDefaults(m.opts.Limits)
	switch {
	case req.Limits.negative():
		return failed(start, newError(KindInvalidRequest, nil, "limits must not be negative"))
	case limits.Fuel > 0 && (m.opts.Engine != EngineWasmtime || m.opts.Unmetered):
		return failed(start, newError(KindInvalidRequest, nil, "a fuel limit needs the wasmtime engine with fuel metering; this module runs on %s", m.opts.Engine))
	}
	fs := memfs.New(memfs.Options{Quota: memfs.Quota{MaxBytes: limits.FSBytes, MaxInodes: limits.FSFiles}})
	inputs, e := placeModuleFiles(fs, req, limits.FSBytes)
	if e != nil {
		return failed(start, e)
	}
	stdout, stderr := &runout.CapWriter{Limit: limits.Output}, &runout.CapWriter{Limit: limits.Output}
	if req.OnOutput != nil {
		stdout.OnWrite = func(p []byte) { req.OnOutput("stdout", p) }
		stderr.OnWrite = func(p []byte) { req.OnOutput("stderr", p) }
	}
	cfg := wasi.Config{
		Args:   append([]string{m.name}, req.Args...),
		Env:    envList(req.Env),
		Stdin:  bytes.NewReader(req.Stdin),
		Stdout: stdout, Stderr: stderr, FS: fs,
		NoPreopen: len(req.Dirs) == 0 && len(req.Files) == 0,
	}
	if req.Deterministic {
		cfg.Clock = wasi.NewFakeClock()
		cfg.Random = rand.NewChaCha8(runout.SeedBytes(req.Seed))
	}
	state := wasi.NewState(cfg)
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	out, runErr := m.code.Run(ctx, RunSpec{WASI: state, MemoryLimit: uint64(limits.Memory), Fuel: uint64(limits.Fuel)})
	state.Close()
	res := &Result{
		Stdout: stdout.Buf.Bytes(), Stderr: stderr.Buf.Bytes(),
		StdoutTruncated: stdout.Truncated, StderrTruncated: stderr.Truncated,
		ExitCode: int(out.ExitCode), PeakMemory: int64(out.PeakMemory), Fuel: int64(out.Fuel),
	}
	res.FilesOmitted = runout.ChangedFiles(fs, "/", func(p string) ([]byte, bool) { data, ok := inputs[p]; return data, ok }, func(p string, data []byte) {
		res.Files = append(res.Files, File{Path: p, Size: int64(len(data)), Data: data})
	})
	res.Error = classify(runErr, out, fs, limits)
	res.Duration = time.Since(start)
	if res.Error != nil {
		return res, res.Error
	}
	return res, nil
}

func failed(start time.Time, e *Error) (*Result, error) {
	return &Result{Error: e, Duration: time.Since(start)}, e
}

// envList is env as the guest's environment, sorted so that it is the
// same run after run.
func envList(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + env[k]
	}
	return out
}

// classify turns how the engine ended a module run into its Error, if any.
// A limit the guest ran into counts only when the run did not end cleanly:
// a program that handled a failed allocation and exited 0 succeeded.
func classify(runErr error, out Outcome, fs *memfs.FS, l Limits) *Error {
	switch {
	case runErr == nil:
		if out.ExitCode == 0 {
			return nil
		}
		if out.MemoryLimitHit {
			return newError(KindMemoryLimit, nil, "the program exceeded the %d-byte memory limit", l.Memory)
		}
		if fs.QuotaHit() {
			return newError(KindFSQuota, nil, "the program exceeded the filesystem quota (%d bytes, %d files)", l.FSBytes, l.FSFiles)
		}
		return nil
	case errors.Is(runErr, ErrFuelExhausted):
		return newError(KindFuelExhausted, runErr, "the run used up its %d units of fuel", l.Fuel)
	case errors.Is(runErr, ErrDeadlock):
		return newError(KindDeadlock, runErr, DeadlockMessage)
	case errors.Is(runErr, runout.ErrOutputLimit):
		return newError(KindOutputLimit, runErr, "output exceeded the %d-byte limit", l.Output)
	case errors.Is(runErr, ErrBelowMinMemory):
		return newError(KindMemoryLimit, runErr, "the %d-byte memory limit is below the module's minimum memory", l.Memory)
	case errors.Is(runErr, ErrInterrupted):
		if errors.Is(runErr, context.DeadlineExceeded) {
			return newError(KindTimeout, runErr, "the run exceeded its %s time limit", l.Timeout)
		}
		return newError(KindTimeout, runErr, "the run was cancelled")
	case out.MemoryLimitHit:
		return newError(KindMemoryLimit, runErr, "the program exceeded the %d-byte memory limit", l.Memory)
	}
	line, _, _ := strings.Cut(runErr.Error(), "\n")
	return newError(KindCrash, runErr, "the module trapped: %s", line)
}

// placeModuleFiles copies req's directories, then its files, into fs, and
// returns every placed file's content by guest path. A host file larger
// than the quota (maxBytes) is refused before it is read.
func placeModuleFiles(fs *memfs.FS, req ModuleRequest, maxBytes int64) (map[string][]byte, *Error) {
	inputs := map[string][]byte{}
	place := func(gp string, data []byte) *Error {
		if dir := path.Dir(gp); dir != "/" {
			if _, err := fs.MkdirAll(dir); err != nil {
				return placeError(fs, err, "create %s: %v", dir, err)
			}
		}
		if err := fs.WriteFile(gp, data); err != nil {
			return placeError(fs, err, "place file %s: %v", gp, err)
		}
		inputs[gp] = data
		return nil
	}
	for _, d := range req.Dirs {
		guest := path.Clean(d.Guest)
		if !path.IsAbs(guest) || strings.ContainsRune(guest, 0) {
			return nil, newError(KindInvalidRequest, nil, "directory %q: the guest path %q must be absolute", d.Host, d.Guest)
		}
		if _, err := fs.MkdirAll(guest); err != nil && guest != "/" {
			return nil, placeError(fs, err, "create %s: %v", guest, err)
		}
		err := filepath.WalkDir(d.Host, func(p string, ent iofs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(d.Host, p)
			if err != nil {
				return err
			}
			gp := path.Join(guest, filepath.ToSlash(rel))
			switch {
			case ent.IsDir():
				if _, err := fs.MkdirAll(gp); err != nil && gp != "/" {
					return placeError(fs, err, "create %s: %v", gp, err)
				}
			case ent.Type().IsRegular():
				if info, err := ent.Info(); err == nil && info.Size() > maxBytes {
					return newError(KindFSQuota, nil, "copy in %s: %d bytes, over the filesystem quota of %d", p, info.Size(), maxBytes)
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if e := place(gp, data); e != nil {
					return e
				}
			}
			return nil
		})
		var e *Error
		switch {
		case errors.As(err, &e):
			return nil, e
		case err != nil:
			return nil, newError(KindInvalidRequest, err, "copy in directory %s: %v", d.Host, err)
		}
	}
	for p, data := range req.Files {
		gp := path.Clean("/" + p)
		if p == "" || strings.ContainsRune(p, 0) || gp == "/" {
			return nil, newError(KindInvalidRequest, nil, "file path %q is not a valid guest path", p)
		}
		if e := place(gp, data); e != nil {
			return nil, e
		}
	}
	return inputs, nil
}

func placeError(fs *memfs.FS, err error, format string, args ...any) *Error {
	kind := KindInvalidRequest
	if fs.QuotaHit() {
		kind = KindFSQuota
	}
	return newError(kind, err, format, args...)
}
