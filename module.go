package airlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Module is a compiled WASI preview1 program (any language's, not only
// Python) that runs under the same isolation as a Sandbox's runs: a fresh
// instance per run, a memory-only filesystem, no sockets, the run's limits
// and nothing the host did not give it. Load it once, run it many times;
// runs may go at once.
type Module struct {
	name string
	cfg  config
	mod  *engine.Module
	// mu is held shared by each run, so Close waits for them.
	mu     sync.RWMutex
	closed bool
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
	// (WithLimits, over DefaultLimits()). HostCalls and HostPayload do
	// not apply: a module gets no tools.
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

// LoadModule compiles a WASI preview1 module (or reuses the process's
// compiled copy, and the on-disk cache: WithCacheDir, WithoutCompileCache).
// name is the program's argv[0] ("main.wasm" if empty). Of the options,
// WithEngine, WithFuelMetering, WithCacheDir, WithoutCompileCache,
// WithLimits and WithNotice apply; the Python ones do not.
//
// # Errors
// ErrEngineUnavailable; a module that does not decode or validate, does
// not export _start and a memory, or imports anything but the WASI
// preview1 functions the sandbox serves (the message names the import).
func LoadModule(ctx context.Context, name string, wasm []byte, opts ...Option) (*Module, error) {
	cfg := config{limits: DefaultLimits()}
	for _, o := range opts {
		o(&cfg)
	}
	if testenv.Defaults != nil {
		cfg.fillFrom(testenv.Defaults())
	}
	if cfg.engine == "" {
		cfg.engine = EngineWazero
	}
	if !slices.Contains(engine.Engines(), cfg.engine) {
		return nil, fmt.Errorf("%w: %q (this binary has %s)", ErrEngineUnavailable, cfg.engine, strings.Join(engine.Engines(), ", "))
	}
	if err := checkModule(wasm); err != nil {
		return nil, fmt.Errorf("airlock: %w", err)
	}
	engOpts := engine.Options{Notice: cfg.notice, Engine: cfg.engine, Unmetered: cfg.unmetered}
	if !cfg.noCache {
		if cfg.cacheDir == "" {
			dir, err := python.CacheDir()
			if err != nil {
				return nil, err
			}
			cfg.cacheDir = dir
		}
		engOpts.CacheDir = python.CompiledDir(cfg.cacheDir)
	}
	mod, err := engine.Load(ctx, wasm, engOpts)
	if err != nil {
		return nil, fmt.Errorf("airlock: %w", err)
	}
	if name == "" {
		name = "main.wasm"
	}
	return &Module{name: name, cfg: cfg, mod: mod}, nil
}

// RunModule loads wasm, runs req once and releases the module: for one
// run. A program running a module often keeps a LoadModule's Module.
func RunModule(ctx context.Context, name string, wasm []byte, req ModuleRequest, opts ...Option) (*Result, error) {
	m, err := LoadModule(ctx, name, wasm, opts...)
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	return m.Run(ctx, req)
}

// ErrModuleImports: a module imports something the sandbox does not serve.
var ErrModuleImports = errors.New("the module imports what the sandbox does not provide")

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
		if engine.EHImport(im.Module, im.Name) {
			invokes = true
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
	if invokes && !(exported(engine.StackPointerExport, wasmbin.KindGlobal) && exported(engine.SetThrewExport, wasmbin.KindFunc) && exported(engine.TableExport, wasmbin.KindTable)) {
		return fmt.Errorf("%w: %w", ErrModuleImports, engine.ErrEHExports)
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
	return m.mod.Close(ctx)
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
	limits := req.Limits.withDefaults(m.cfg.limits)
	switch {
	case req.Limits.Timeout < 0, req.Limits.Memory < 0, req.Limits.Output < 0, req.Limits.FSBytes < 0, req.Limits.FSFiles < 0, req.Limits.Fuel < 0:
		return failed(start, newError(KindInvalidRequest, nil, "limits must not be negative"))
	case limits.Fuel > 0 && (m.cfg.engine != EngineWasmtime || m.cfg.unmetered):
		return failed(start, newError(KindInvalidRequest, nil, "a fuel limit needs the wasmtime engine with fuel metering; this module runs on %s", m.cfg.engine))
	}
	fs := memfs.New(memfs.Options{Quota: memfs.Quota{MaxBytes: limits.FSBytes, MaxInodes: limits.FSFiles}})
	inputs, e := placeModuleFiles(fs, req, limits.FSBytes)
	if e != nil {
		return failed(start, e)
	}
	stdout, stderr := &capWriter{limit: limits.Output}, &capWriter{limit: limits.Output}
	if req.OnOutput != nil {
		stdout.onWrite = func(p []byte) { req.OnOutput("stdout", p) }
		stderr.onWrite = func(p []byte) { req.OnOutput("stderr", p) }
	}
	cfg := wasi.Config{
		Args:   append([]string{m.name}, req.Args...),
		Env:    python.MergeEnv(nil, req.Env),
		Stdin:  bytes.NewReader(req.Stdin),
		Stdout: stdout, Stderr: stderr, FS: fs,
		NoPreopen: len(req.Dirs) == 0 && len(req.Files) == 0,
	}
	if req.Deterministic {
		cfg.Clock = wasi.NewFakeClock()
		cfg.Random = rand.NewChaCha8(seedBytes(req.Seed))
	}
	state := wasi.NewState(cfg)
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	out, runErr := m.mod.Run(ctx, engine.RunSpec{WASI: state, MemoryLimit: uint64(limits.Memory), Fuel: uint64(limits.Fuel)})
	state.Close()
	res := &Result{
		Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(),
		StdoutTruncated: stdout.truncated, StderrTruncated: stderr.truncated,
		ExitCode: int(out.ExitCode), PeakMemory: int64(out.PeakMemory), Fuel: int64(out.Fuel),
	}
	res.Files, res.FilesOmitted = changedFiles(fs, "/", func(p string) ([]byte, bool) { data, ok := inputs[p]; return data, ok })
	res.Error = classify(runErr, out, fs, limits)
	if res.Error != nil {
		switch {
		case res.Error.Kind == KindCrash:
			res.Error.Message = "the module trapped: " + firstLine(runErr.Error())
		case errors.Is(runErr, engine.ErrMemoryLimit):
			res.Error.Message = fmt.Sprintf("the %d-byte memory limit is below the module's minimum memory", limits.Memory)
		}
	}
	res.Duration = time.Since(start)
	if res.Error != nil {
		return res, res.Error
	}
	return res, nil
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
