// Package airlock runs untrusted Python inside the host process, safely:
// CPython compiled to WASI, executed by wazero with a memory-only
// filesystem, no sockets, a fresh instance per run, and per-run limits on
// time, memory, output and files.
//
//	sb, err := airlock.New(ctx)
//	res, err := sb.Run(ctx, airlock.Request{Code: `print("hi")`})
//
// A Sandbox is safe for concurrent use; each Run gets its own instance and
// nothing carries over from one run to the next.
//
// # Zero and negative
//
// One rule for every number that configures Airlock (Limits, options,
// server.Config): zero means the default; negative means none where the
// knob can be off (WithSessionTTL: never expire; WithMaxSessions: no
// sessions; server.Config's Queue and ReleaseIdle) and is refused
// elsewhere (a negative limit is an invalid request).
package airlock

import (
	"io"
	"net/http"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/hostfuncs"
	"github.com/airlock-sandbox/airlock/internal/testenv"
)

// Limits bound one run. Zero fields take the Sandbox's defaults.
type Limits struct {
	// Timeout is the wall-clock budget of the run.
	Timeout time.Duration
	// Memory caps the guest's linear memory, in bytes.
	Memory int64
	// Output caps stdout and stderr, each, in bytes.
	Output int64
	// FSBytes caps the total size of files in the guest's filesystem.
	FSBytes int64
	// FSFiles caps the number of files and directories in it.
	FSFiles int
	// HostCalls caps the host tool calls the run may make.
	HostCalls int
	// HostPayload caps one host call's request and result JSON, in bytes.
	HostPayload int64
	// Fuel caps the WebAssembly instructions the run may execute (about
	// one unit each): a CPU budget that gives the same verdict on any
	// machine. Running out ends the run with KindFuelExhausted. Only the
	// wasmtime engine meters fuel (see WithEngine); 0 is no cap.
	Fuel int64
	// Threads caps the threads a run may have at once besides its main
	// one (engine/threads.go); a start past it raises RuntimeError in the
	// guest, saying so. The wasmtime engine runs no threads.
	Threads int
}

// DefaultLimits are used where neither the Request nor the Sandbox says
// otherwise. It is a function so that no caller can change them for the
// whole process.
func DefaultLimits() Limits {
	d := engine.DefaultLimits()
	return Limits{
		Timeout:     d.Timeout,
		Memory:      d.Memory,
		Output:      d.Output,
		FSBytes:     d.FSBytes,
		FSFiles:     d.FSFiles,
		Fuel:        d.Fuel,
		HostCalls:   1000,
		HostPayload: 1 << 20,
		Threads:     engine.DefaultMaxThreads,
	}
}

func (l Limits) withDefaults(d Limits) Limits {
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.Output == 0 {
		l.Output = d.Output
	}
	if l.FSBytes == 0 {
		l.FSBytes = d.FSBytes
	}
	if l.FSFiles == 0 {
		l.FSFiles = d.FSFiles
	}
	if l.HostCalls == 0 {
		l.HostCalls = d.HostCalls
	}
	if l.HostPayload == 0 {
		l.HostPayload = d.HostPayload
	}
	if l.Fuel == 0 {
		l.Fuel = d.Fuel
	}
	if l.Threads == 0 {
		l.Threads = d.Threads
	}
	return l
}

// Request is one program to run.
type Request struct {
	// Code is the Python source to run as __main__.
	Code string
	// Filename names the code in tracebacks; default "<main>".
	Filename string
	// Files are placed in the guest's filesystem before the run. Keys are
	// guest paths, absolute or relative to /home/user (the working directory).
	Files map[string][]byte
	// Stdin is the program's standard input.
	Stdin []byte
	// Env is applied over the default environment (HOME, LANG, ...).
	Env map[string]string
	// Limits override the Sandbox's defaults for this run.
	Limits Limits
	// Deterministic makes clocks fake (starting at 2000-01-01, advancing
	// only as the program reads or sleeps), random_get a stream seeded by
	// Seed, and Python's hash seed fixed: the same program then prints the
	// same output on every run.
	Deterministic bool
	Seed          uint64
	// Interactive compiles Code as input typed at Python's prompt: one
	// statement (simple or compound), and an expression statement's value
	// is printed (sys.displayhook, which also sets builtins._). For REPLs.
	Interactive bool
	// Packages are host paths of pure-Python packages this run may import,
	// besides the Sandbox's (WithPackages): a wheel (.whl) or zip, put on
	// sys.path as is, or a directory, either a package (holding
	// __init__.py, importable by the directory's name) or a sys.path root
	// holding packages. Each is read once per Sandbox and kept while its
	// size and modification time (a directory's: every entry's) stay the
	// same; runs share it read-only under /opt/airlock/packages. Packages
	// go on sys.path after the standard library, so none shadows a
	// standard module. One with native code (.so, .pyd, .dylib, .dll) is
	// refused with ErrCompiledExtension; an unreadable or corrupt one, or
	// one over MaxPackageBytes, with ErrInvalidPackage.
	Packages []string
	// HostFuncs names the host functions (see WithHostFuncs) this run may
	// call; nil allows every registered one, an empty non-nil slice none.
	HostFuncs []string
	// Tools is HostFuncs' old name, used when HostFuncs is nil.
	//
	// Deprecated: use HostFuncs.
	Tools []string
	// Values reach host tools through hostfuncs.CallInfo; they are shared
	// by the run's calls and must not be changed while it runs.
	Values map[string]any
	// RichOutput collects what a notebook would show: the value of the
	// code's last expression statement (Result.Value, its repr) and the
	// objects passed to airlock.display(), each in every form it has
	// (Result.Displays: PNG, SVG, HTML, JSON, ..., its repr), within the
	// run's output limit. Without it, airlock.display() prints the repr
	// and a last expression's value is dropped, as in a script.
	RichOutput bool
	// Network is the run's network allow-list; nil takes WithNetwork's,
	// and without that the run has no network. See NetworkPolicy.
	Network *NetworkPolicy
	// OnOutput, if set, receives each chunk of stdout ("stdout") or stderr
	// ("stderr") as the guest writes it, within the output cap. It is called
	// on the run's goroutine, must not keep p, and should return quickly:
	// the guest waits for it.
	OnOutput func(stream string, p []byte)
}

// Phases is where a resumed run's time went in the engine.
type Phases struct {
	// Start: an instance ready with the image's memory, taken from those
	// made ahead (Pooled) or instantiated and mapped on the run's path.
	Start time.Duration
	// Restore: the interpreter's globals set and its stack rewound into
	// the read the snapshot paused in.
	Restore time.Duration
	// Guest: the code's own work, up to the guest's exit.
	Guest time.Duration
	// Close: the instance closed and its memory region reset for reuse.
	Close  time.Duration
	Pooled bool
}

// Result is what a run produced. A Result is returned for every run, also
// when err is non-nil, so partial output is never lost.
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is the guest's exit status (0 also when Error is set and the
	// guest did not get to exit).
	ExitCode int
	// Error is non-nil when the sandbox ended or refused the run; it is the
	// error Run returns.
	Error *Error
	// Duration is the run's wall-clock time, instance creation included.
	Duration time.Duration
	// Files are those created or changed under /home/user, sorted by path.
	Files []File
	// FilesOmitted counts the files Files leaves out: those under a path
	// longer than 4096 bytes, which only nesting directories through
	// handles or renames can make; no caller could name them, and their
	// paths would cost memory without bound. Zero unless a run made such
	// a tree; every other file is in Files (the filesystem quota counts
	// holes, so each fits).
	FilesOmitted int
	// PeakMemory is the largest linear memory the guest reached, in bytes.
	PeakMemory int64
	// StdoutTruncated and StderrTruncated tell that the output cap cut a stream.
	StdoutTruncated, StderrTruncated bool
	// RolledBack, for a session call, tells that the call did not advance
	// the session: it keeps its state from before the call.
	RolledBack bool
	// Fuel is the fuel the run consumed on the wasmtime engine, which
	// meters every run; the same program with the same input consumes the
	// same fuel every time. Always 0 on wazero, which does not meter.
	Fuel int64
	// Phases is where the engine's part of a run resumed from the
	// snapshot went (zero for a fresh interpreter); Duration also holds
	// the Sandbox's own work around it (files, output, the audit).
	Phases Phases
	// Value is the repr of the value of the code's last expression
	// statement, "" when there is none or it is None (RichOutput only).
	Value string
	// Displays are the run's rich outputs in order (RichOutput only): the
	// airlock.display() calls, and the last expression's value when it has
	// a form beyond text (a DataFrame's HTML, a figure's PNG).
	Displays []Display
	// DisplaysTruncated tells that a display passed the run's cap (its
	// output limit, or 64 displays): that call and later ones raised in
	// the guest and are missing.
	DisplaysTruncated bool
	// Audit is what the run tried that an operator may want to see, in
	// order (see AuditEvent): host-looking paths it looked for, refused
	// capabilities, host tool calls, canaries, the limit that ended it. At
	// most 128 distinct events; AuditDropped counts those past that.
	Audit        []AuditEvent
	AuditDropped int
	// Suspicious gives the reasons the run looks steered rather than
	// honest (a canary touched, credentials looked for, the host probed,
	// the metadata service tried); none for an honest run.
	Suspicious []Suspicion
	// Network records each request the run made, or had refused, when
	// it ran with a network policy.
	Network []NetworkDecision
	// Installs records each package install the run asked for (see
	// WithPackageIndex), allowed or refused.
	Installs []PackageInstall
}

// File is a file the run left under /home/user.
type File = engine.File

// Option configures New.
type Option func(*config)

type config struct {
	canaries   []Canary
	pythonPath string
	cacheDir   string
	noCache    bool
	limits     Limits
	notice     io.Writer
	hostFuncs  []hostfuncs.Function
	registry   *hostfuncs.Registry // built by New from hostFuncs
	snapshots  *bool               // nil: on when set-up made them possible (snapshot.go)
	packages   []string            // WithPackages (packages.go)
	preimport  []string            // WithPreimport

	defaultPackages *bool // WithDefaultPackages; nil: on when prepared (defaultpackages.go)

	noFullImage bool // WithFullImage(false) (snapshot.go)

	sessionTTL  time.Duration // session.go
	maxSessions int
	sessionKey  []byte        // WithSessionKey (session_file.go)
	engine      string        // "": wazero
	unmetered   bool          // WithFuelMetering(false)
	unpooled    bool          // WithInstancePool(false)
	net         netConfig     // WithNetwork, WithNetworkEnv (network.go)
	index       *PackageIndex // WithPackageIndex (packageindex.go)
	// indexTransport is the index client's transport when New made it.
	indexTransport *http.Transport
}

// Engines names the WebAssembly engines for WithEngine.
const (
	// EngineWazero is the default: pure Go, no cgo.
	EngineWazero = "wazero"
	// EngineWasmtime is wasmtime through cgo, in binaries built with
	// -tags airlock_wasmtime that import package
	// github.com/airlock-sandbox/airlock/engine/wasmtime. It meters fuel (Limits.Fuel, Result.Fuel)
	// unless WithFuelMetering(false).
	EngineWasmtime = "wasmtime"
)

// EnvEngine names the environment variable the airlock command takes its
// default engine from. The package itself reads no environment: a program
// passes WithEngine.
//
// Deprecated: only the airlock command reads it; a program passes
// WithEngine.
const EnvEngine = "AIRLOCK_ENGINE"

// WithEngine runs the Sandbox on the named engine (EngineWazero or
// EngineWasmtime) instead of wazero. New fails with
// ErrEngineUnavailable for an engine this binary was built without.
func WithEngine(name string) Option { return func(c *config) { c.engine = name } }

// WithFuelMetering(false) runs wasmtime code without fuel metering:
// interpreter-bound code runs ~20% faster there (docs/performance.md, Compute), but runs
// report no fuel (Result.Fuel is 0) and a fuel limit is an invalid request.
// The deadline (Limits.Timeout) still ends any run. Metering is on by
// default; wazero never meters, so this changes nothing there.
func WithFuelMetering(on bool) Option { return func(c *config) { c.unmetered = !on } }

// AvailableEngines lists the engines compiled into this binary.
func AvailableEngines() []string { return engine.Engines() }

// WithPython runs the python.wasm at path instead of the default build.
func WithPython(path string) Option { return func(c *config) { c.pythonPath = path } }

// WithCacheDir keeps compiled code (and looks for the fetched default
// python.wasm) in dir instead of the user cache dir's airlock folder.
func WithCacheDir(dir string) Option { return func(c *config) { c.cacheDir = dir } }

// WithoutCompileCache compiles in memory only.
func WithoutCompileCache() Option { return func(c *config) { c.noCache = true } }

// WithLimits sets the defaults for requests that leave a limit at zero.
func WithLimits(l Limits) Option {
	return func(c *config) { c.limits = l.withDefaults(DefaultLimits()) }
}

// fillFrom takes what cfg's options left unset from the test suites'
// environment (internal/testenv).
func (c *config) fillFrom(env testenv.Config) {
	if c.engine == "" {
		c.engine = env.Engine
	}
	if c.pythonPath == "" {
		c.pythonPath = env.Python
	}
	if c.cacheDir == "" {
		c.cacheDir = env.CacheDir
	}
}

// WithNotice receives a one-line message before a slow first compile.
func WithNotice(w io.Writer) Option { return func(c *config) { c.notice = w } }

// Version is Airlock's own version.
const Version = "0.1.0-dev"
