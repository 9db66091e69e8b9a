package airlock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/hostfuncs"
	"github.com/airlock-sandbox/airlock/internal/runout"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Sandbox runs requests against one compiled python.wasm.
type Sandbox struct {
	cfg      config
	artifact *python.Artifact
	engOpts  engine.Options
	// canaryFiles are WithCanaries' files by guest path.
	canaryFiles map[string][]byte
	snap        *snapshotter     // nil when runs start a fresh interpreter (snapshot.go)
	defaults    *defaultPackages // defaultpackages.go
	// layers are mounted read-only into every run's filesystem: the
	// interpreter's own files (python.Artifact.Layer), WithPackages'.
	layers []*memfs.Layer
	// pkgs are WithPackages' packages; pkgCache holds them and requests'
	// (packages.go).
	pkgs     *packageSet
	pkgCache pkgCache
	// indexLayers are the wheels installed from the package index
	// (packageindex.go).
	indexLayers indexLayers

	// fresh is the module that starts an interpreter from scratch. With
	// snapshots on, most processes never need it, so it is loaded on the
	// first run that does (~0.3 s and ~150 MB saved per process).
	freshOnce sync.Once
	fresh     *engine.Compiled
	freshErr  error

	sessMu         sync.Mutex
	sessions       map[*Session]struct{} // live ones (session.go)
	sessionsClosed bool

	// Close waits for the runs going (runs), having stopped them (life);
	// freeing the compiled code under a running guest crashes the process.
	lifeMu    sync.Mutex
	closed    bool
	runs      sync.WaitGroup
	life      context.Context // cancelled by Close
	endLife   context.CancelFunc
	closeOnce sync.Once
	closeErr  error
}

// New loads python.wasm (see WithPython) and compiles it, or reuses the
// process's compiled copy and the on-disk cache.
//
// # Errors
// ErrNoOwnBuild or ErrNotFetched when no python.wasm is available, ErrChecksum
// for a default artifact that is not the pinned one, a compile error.
func New(ctx context.Context, opts ...Option) (*Sandbox, error) {
	cfg := config{limits: DefaultLimits()}
	for _, o := range opts {
		o(&cfg)
	}
	if testenv.Defaults != nil {
		cfg.fillFrom(testenv.Defaults())
	}
	if cfg.cacheDir == "" {
		dir, err := python.CacheDir()
		if err != nil {
			return nil, err
		}
		cfg.cacheDir = dir
	}
	if cfg.engine == "" {
		cfg.engine = EngineWazero
	}
	if msg := cfg.checkLimits(cfg.limits); msg != "" {
		return nil, fmt.Errorf("%w: WithLimits: %s", ErrInvalidOption, msg)
	}
	if cfg.sessionKey != nil && len(cfg.sessionKey) < minSessionKey {
		return nil, fmt.Errorf("%w: WithSessionKey: the key is %d bytes; it must be at least %d", ErrInvalidOption, len(cfg.sessionKey), minSessionKey)
	}
	canaryFiles, err := checkCanaries(cfg.canaries)
	if err != nil {
		return nil, err
	}
	if err := setupIndex(&cfg); err != nil {
		return nil, err
	}
	if err := setupNetwork(&cfg); err != nil {
		return nil, fmt.Errorf("airlock: WithNetwork: %w", err)
	}
	reg, err := hostfuncs.NewRegistry(cfg.hostFuncs...)
	if err != nil {
		return nil, fmt.Errorf("airlock: %w", err)
	}
	cfg.registry = reg
	if !slices.Contains(engine.Engines(), cfg.engine) {
		return nil, fmt.Errorf("%w: %q (this binary has %s; wasmtime needs a build with -tags airlock_wasmtime that imports github.com/airlock-sandbox/airlock/engine/wasmtime)",
			ErrEngineUnavailable, cfg.engine, strings.Join(engine.Engines(), ", "))
	}
	art, err := python.Load(cfg.pythonPath, cfg.cacheDir)
	if err != nil {
		return nil, fmt.Errorf("airlock: %w", err)
	}
	engOpts := engine.Options{Notice: cfg.notice, Engine: cfg.engine, Unmetered: cfg.unmetered}
	if !cfg.noCache {
		engOpts.CacheDir = python.CompiledDir(cfg.cacheDir)
	}
	defaults, err := loadDefaultPackages(cfg, art)
	if err != nil {
		return nil, err
	}
	cfg.packages = dropDefaultDuplicates(cfg.packages, defaults, cfg.cacheDir)
	layers := append(art.Layers(), defaults.layer)
	sb := &Sandbox{defaults: defaults, cfg: cfg, artifact: art, engOpts: engOpts, layers: layers, canaryFiles: canaryFiles}
	sb.life, sb.endLife = context.WithCancel(context.Background())
	if sb.pkgs, err = loadSandboxPackages(&sb.pkgCache, cfg); err != nil {
		return nil, err
	}
	sb.snap, err = newSnapshotter(ctx, cfg, art, layers, sb.defaultImageSpec(sb.imageExtras()), engOpts)
	if err != nil {
		return nil, sb.preimportError(err)
	}
	sb.layers = append(layers, sb.pkgs.layers()...)
	if sb.snap == nil {
		// Every run needs the fresh module: load it now, so that New
		// reports a module that does not compile.
		if _, err := sb.freshModule(ctx); err != nil {
			return nil, err
		}
		if err := sb.checkPreimport(ctx); err != nil {
			sb.Close(ctx)
			return nil, err
		}
	}
	return sb, nil
}

// ErrClosed answers a run or a session on a Sandbox after Close.
var ErrClosed = errors.New("airlock: sandbox is closed")

// freshModule loads the module that starts an interpreter from scratch,
// once per Sandbox (engine.Load shares the compiled code in the process).
func (sb *Sandbox) freshModule(ctx context.Context) (*engine.Compiled, error) {
	sb.freshOnce.Do(func() {
		// Not the run's deadline: a run cancelled while the module loads
		// must not leave the Sandbox without one for later runs.
		wasm, err := sb.artifact.Module()
		if err != nil {
			sb.freshErr = fmt.Errorf("airlock: %w", err)
			return
		}
		sb.fresh, sb.freshErr = engine.Load(context.WithoutCancel(ctx), wasm, sb.engOpts)
		if sb.freshErr != nil {
			sb.freshErr = fmt.Errorf("airlock: %w", sb.freshErr)
		}
	})
	return sb.fresh, sb.freshErr
}

// Limits are the limits a Request's zero fields take: WithLimits', over
// DefaultLimits().
func (sb *Sandbox) Limits() Limits { return sb.cfg.limits }

// Close stops the runs going (they end as cancelled), ends the sessions,
// waits for both, and releases the compiled modules (shared copies stay
// until their last Sandbox closes). A run after Close gets ErrClosed.
// Closing again returns the first Close's result.
func (sb *Sandbox) Close(ctx context.Context) error {
	sb.closeOnce.Do(func() {
		sb.lifeMu.Lock()
		sb.closed = true
		sb.lifeMu.Unlock()
		sb.endLife()
		// No load may start after Close.
		sb.freshOnce.Do(func() { sb.freshErr = ErrClosed })
		sb.closeSessions()
		sb.runs.Wait()
		var freshErr error
		if sb.fresh != nil {
			freshErr = sb.fresh.Close(ctx)
		}
		sb.cfg.net.gate.Close() // its pooled connections (network.go)
		if t := sb.cfg.indexTransport; t != nil {
			t.CloseIdleConnections()
		}
		sb.closeErr = errors.Join(sb.snap.close(ctx), freshErr)
	})
	return sb.closeErr
}

// enter counts a run in, unless the Sandbox is closed, and returns its
// context: ctx, also cancelled by Close. exit counts it out.
func (sb *Sandbox) enter(ctx context.Context) (context.Context, func(), bool) {
	sb.lifeMu.Lock()
	defer sb.lifeMu.Unlock()
	if sb.closed {
		return nil, nil, false
	}
	sb.runs.Add(1)
	underWay := engine.RunUnderWay() // a lone run's instance closes after it returns
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(sb.life, func() { cancel(ErrClosed) })
	return ctx, func() { stop(); cancel(nil); underWay(); sb.runs.Done() }, true
}

// Engine names the WebAssembly engine the Sandbox runs on.
func (sb *Sandbox) Engine() string { return sb.cfg.engine }

// FuelMetering tells whether runs meter fuel (Limits.Fuel, Result.Fuel):
// on wasmtime unless WithFuelMetering(false), never on wazero.
func (sb *Sandbox) FuelMetering() bool { return sb.cfg.engine == EngineWasmtime && !sb.cfg.unmetered }

// Threads tells whether runs can start threads (Limits.Threads): the own
// build's, on wazero. On wasmtime, or with another build, a start raises
// RuntimeError in the guest, saying so.
func (sb *Sandbox) Threads() bool {
	return sb.cfg.engine == EngineWazero && sb.artifact.Build == python.SelectOwn
}

// Info describes the python.wasm a Sandbox runs.
type Info struct {
	Path   string // "" when embedded
	SHA256 string
	Pinned bool // the verified default build
	// Build is "own" (the default), "npm" (the fallback) or "custom" (a file
	// given by path); Description says it in a line.
	Build, Description string
	// StdlibSHA256 is the own build's stdlib zip's sha256, "" otherwise.
	StdlibSHA256 string
	// Version is CPython's version ("3.13.5"), "" when unknown.
	Version string
	// Libraries are the third-party packages code can import, with their
	// versions ("numpy 2.5.5"): the own build's.
	Libraries []string
}

// Info reports the artifact in use.
func (sb *Sandbox) Info() Info {
	a := sb.artifact
	return Info{Path: a.Path, SHA256: a.SHA256, Pinned: a.Pinned, Build: a.Build,
		Description: a.Describe(), StdlibSHA256: a.StdlibSHA256, Version: a.Version, Libraries: a.Libraries()}
}

// maxCodeBytes bounds a request's source: far above any real program, far
// below what could hurt the host.
const maxCodeBytes = 16 << 20

// Run executes req in a fresh instance. It always returns a Result; err is
// Result.Error (nil when the program ran to its own exit, whatever its
// exit code).
func (sb *Sandbox) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	limits, err := sb.validate(&req)
	if err != nil {
		return failed(start, err)
	}
	pkgs, err := sb.requestPackages(append(sb.requestNetPackages(&req), req.Packages...))
	if err != nil {
		return failed(start, err)
	}
	fs, inputs, err := sb.newFS(limits, req.Files, pkgs.requestLayers())
	if err != nil {
		return failed(start, err)
	}
	before := func(p string) ([]byte, bool) { data, ok := inputs[p]; return data, ok }
	ctx, exit, ok := sb.enter(ctx)
	if !ok {
		return failed(start, newError(KindInvalidRequest, ErrClosed, "%v", ErrClosed))
	}
	defer exit()
	r, e := sb.prepare(ctx, start, &req, limits, fs, before, pkgs)
	var base *baseImage // nil: a fresh interpreter
	if e == nil {
		if sb.resumes(&req, r.wcfg.Env) {
			base = sb.snap.forCode(ctx, req.Code, limits.Memory)
		}
		e = r.open(base != nil && sb.snap.enters(base.img))
	}
	if e != nil {
		return r.done(&Result{}, e)
	}
	if base == nil {
		// The first such run loads the fresh module, a compile when the
		// cache is cold (seconds; ~20 s of CPU on wasmtime): set-up of the
		// Sandbox, not the run's time. An error comes back from execute.
		_, _ = sb.freshModule(ctx)
	}
	out, runErr := r.execute(ctx, func(ctx context.Context) (engine.Outcome, error) {
		return sb.execute(ctx, base, r.spec)
	})
	return r.done(r.result(out, runErr))
}

func failed(start time.Time, e *Error) (*Result, error) {
	return &Result{Error: e, Duration: time.Since(start)}, e
}

// classify turns how the engine ended into the run's Error, if any. A limit
// the guest ran into counts only when the run did not end cleanly: a
// program that caught MemoryError and exited 0 succeeded.
func classify(runErr error, out engine.Outcome, fs *memfs.FS, l Limits) *Error {
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
	case errors.Is(runErr, engine.ErrFuelExhausted):
		return newError(KindFuelExhausted, runErr, "the run used up its %d units of fuel", l.Fuel)
	case errors.Is(runErr, engine.ErrDeadlock):
		return newError(KindDeadlock, runErr, engine.DeadlockMessage)
	case errors.Is(runErr, runout.ErrOutputLimit):
		return newError(KindOutputLimit, runErr, "output exceeded the %d-byte limit", l.Output)
	case errors.Is(runErr, engine.ErrBelowMinMemory):
		return newError(KindMemoryLimit, runErr, "the %d-byte memory limit is below what Python needs to start", l.Memory)
	case errors.Is(runErr, engine.ErrInterrupted):
		if errors.Is(runErr, context.DeadlineExceeded) {
			return newError(KindTimeout, runErr, "the run exceeded its %s time limit", l.Timeout)
		}
		return newError(KindTimeout, runErr, "the run was cancelled")
	case out.MemoryLimitHit:
		return newError(KindMemoryLimit, runErr, "the program exceeded the %d-byte memory limit", l.Memory)
	}
	return newError(KindCrash, runErr, "the interpreter crashed: %s", firstLine(runErr.Error()))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (sb *Sandbox) validate(req *Request) (Limits, *Error) {
	l := req.Limits
	if msg := sb.cfg.checkLimits(l); msg != "" {
		return l, newError(KindInvalidRequest, nil, "%s", msg)
	}
	switch {
	case len(req.Code) > maxCodeBytes:
		return l, newError(KindInvalidRequest, nil, "code is %d bytes; the maximum is %d", len(req.Code), maxCodeBytes)
	case strings.ContainsRune(req.Filename, 0):
		return l, newError(KindInvalidRequest, nil, "filename contains a NUL byte")
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(req.Env[k], 0) {
			return l, newError(KindInvalidRequest, nil, "env variable %q: names must be non-empty, without '=' or NUL", k)
		}
		if strings.HasPrefix(k, "AIRLOCK_") {
			return l, newError(KindInvalidRequest, nil, "env variable %q: names starting with AIRLOCK_ are the sandbox's own", k)
		}
	}
	if req.Filename == "" {
		req.Filename = "<main>"
	}
	return l.withDefaults(sb.cfg.limits), nil
}

// checkLimits says what is wrong with limits no run of this configuration
// can have, or "": a request's, and WithLimits' once in New (the defaults
// a request's zero fields take, so a run need not check them again).
func (c *config) checkLimits(l Limits) string {
	switch {
	case l.Timeout < 0, l.Memory < 0, l.Output < 0, l.FSBytes < 0, l.FSFiles < 0, l.HostCalls < 0, l.HostPayload < 0, l.Fuel < 0, l.Threads < 0:
		return "limits must not be negative"
	case l.Fuel > 0 && c.engine != EngineWasmtime:
		return fmt.Sprintf("a fuel limit needs the wasmtime engine (WithEngine(EngineWasmtime)); this sandbox runs on %s", c.engine)
	case l.Fuel > 0 && c.unmetered:
		return "a fuel limit needs fuel metering; this sandbox was made WithFuelMetering(false)"
	}
	return ""
}

// guestPath makes p absolute under /home/user and clean.
func guestPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = python.Home + "/" + p
	}
	return path.Clean(p)
}

// newFS builds a run's filesystem: the Sandbox's read-only layers and
// the run's packages, then /home/user, /tmp and the request's files (see
// placeFiles).
func (sb *Sandbox) newFS(limits Limits, files map[string][]byte, packages []*memfs.Layer) (*memfs.FS, map[string][]byte, *Error) {
	fs := memfs.New(memfs.Options{Quota: memfs.Quota{MaxBytes: limits.FSBytes, MaxInodes: limits.FSFiles}})
	for _, l := range append(sb.layers[:len(sb.layers):len(sb.layers)], packages...) {
		if err := fs.Mount(l); err != nil {
			return nil, nil, newError(KindInvalidRequest, err, "mount a read-only layer: %v", err)
		}
	}
	inputs, err := placeFiles(fs, files)
	return fs, inputs, err
}

// placeFiles builds the run's filesystem: /home/user, /tmp and the
// request's files. It returns the inputs by guest path, to tell changed
// files from untouched ones afterwards.
func placeFiles(fs *memfs.FS, files map[string][]byte) (map[string][]byte, *Error) {
	for _, dir := range []string{python.Home, "/tmp"} {
		if _, err := fs.MkdirAll(dir); err != nil {
			return nil, newError(KindInvalidRequest, err, "create %s: %v", dir, err)
		}
	}
	inputs := make(map[string][]byte, len(files))
	for p, data := range files {
		gp := guestPath(p)
		if p == "" || strings.ContainsRune(p, 0) || gp == "/" {
			return nil, newError(KindInvalidRequest, nil, "file path %q is not a valid guest path", p)
		}
		if err := fs.WriteFile(gp, data); err != nil {
			kind := KindInvalidRequest
			if fs.QuotaHit() {
				kind = KindFSQuota
			}
			return nil, newError(kind, err, "place file %s: %v", gp, err)
		}
		inputs[gp] = data
	}
	return inputs, nil
}

// changedFiles lists the files under root that are new or changed since
// before (runout.ChangedFiles), and how many it had to leave out.
func changedFiles(fs *memfs.FS, root string, before func(path string) ([]byte, bool)) (out []File, omitted int) {
	omitted = runout.ChangedFiles(fs, root, before, func(p string, data []byte) {
		out = append(out, File{Path: p, Size: int64(len(data)), Data: data})
	})
	return out, omitted
}

type capWriter = runout.CapWriter
