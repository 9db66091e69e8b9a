package main

// The flag types the commands share, and how their values become options:
// the one place the command line (and its environment defaults) turns into
// library calls.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// sizeFlag parses 256MiB, 1MB, 4096 and the like.
type sizeFlag struct{ n int64 }

// String is the size as help shows it: 256MiB rather than 268435456.
func (s *sizeFlag) String() string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if s.n >= u.mult && s.n%u.mult == 0 {
			return strconv.FormatInt(s.n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(s.n, 10)
}
func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	s.n = n
	return err
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	num := strings.TrimSpace(v)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q (want e.g. 256MiB, 1MB, 4096)", v)
	}
	return n * mult, nil
}

// limitFlags are a run's limits (run, repl).
type limitFlags struct {
	timeout                 *time.Duration
	memory, output, fsBytes sizeFlag
	fsFiles, threads        *int
	fuel                    *int64
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	d := airlock.DefaultLimits()
	l.timeout = fs.Duration("timeout", d.Timeout, "wall-clock limit")
	l.memory, l.output, l.fsBytes = sizeFlag{d.Memory}, sizeFlag{d.Output}, sizeFlag{d.FSBytes}
	fs.Var(&l.memory, "memory", "memory limit (e.g. 256MiB)")
	fs.Var(&l.output, "output-limit", "cap on stdout and on stderr, each")
	fs.Var(&l.fsBytes, "fs-bytes", "cap on the total size of files in the sandbox")
	l.fsFiles = fs.Int("fs-files", d.FSFiles, "max files and directories in the sandbox")
	l.threads = fs.Int("threads", d.Threads, "max threads a run may have at once besides its main one (wazero engine; wasmtime runs none)")
	l.fuel = fs.Int64("fuel", 0, "CPU budget in fuel units, about one per WebAssembly instruction; same verdict on any machine (wasmtime engine only; 0: none)")
}

func (l *limitFlags) limits() airlock.Limits {
	return airlock.Limits{Timeout: *l.timeout, Memory: l.memory.n, Output: l.output.n, FSBytes: l.fsBytes.n, FSFiles: *l.fsFiles, Fuel: *l.fuel, Threads: *l.threads}
}

// readStdinFlag reads what --stdin names: nothing for "", this process's
// stdin for "-", else a file (an unreadable one is a usage error).
func readStdinFlag(value string, stdin io.Reader) ([]byte, error) {
	switch value {
	case "":
		return nil, nil
	case "-":
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("--stdin: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(value)
	if err != nil {
		return nil, argFileError("--stdin", err)
	}
	return data, nil
}

// stdinFlagStatus is the exit status for readStdinFlag's error.
func stdinFlagStatus(err error) int {
	var fe fileArgError
	if errors.As(err, &fe) {
		return exitUsage
	}
	return 1
}

// fileFlags are repeated --file HOST[:GUEST] flags.
type fileFlags struct{ multiFlag }

func (m *fileFlags) register(fs *flag.FlagSet) {
	fs.Var(&m.multiFlag, "file", "HOST[:GUEST] file to copy in (repeatable; default guest path /home/user/<basename>)")
}

// read loads --file HOST[:GUEST] specs into guest files.
func (m *fileFlags) read() (map[string][]byte, error) {
	files := make(map[string][]byte, len(m.multiFlag))
	for _, spec := range m.multiFlag {
		host, guest, ok := strings.Cut(spec, ":")
		if !ok {
			guest = filepath.Base(host)
		}
		data, err := os.ReadFile(host)
		if err != nil {
			return nil, argFileError("--file", err)
		}
		files[guest] = data
	}
	return files, nil
}

// commonFlags are the flags every command that builds a Sandbox takes.
type commonFlags struct {
	python       string
	cacheDir     string
	engine       string
	fuelMetering bool
	// defaultPackages false turns the default packages off (on where
	// airlock setup prepared them).
	defaultPackages bool
}

// register adds the flags, with their defaults from the environment: the
// command is the one place that reads it (the library takes options).
// The help text names the variables rather than printing their values.
func (c *commonFlags) register(fs *flag.FlagSet) {
	fromEnv := func(name, env string, abs bool) {
		fs.Lookup(name).DefValue = ""
		v := os.Getenv(env)
		if abs && v != "" {
			// As it was when the library read it: the process may change
			// directory, the cache must not move with it.
			if a, err := filepath.Abs(v); err == nil {
				v = a
			}
		}
		if v != "" {
			fs.Set(name, v)
		}
	}
	defer fromEnv("python", python.EnvPython, false)
	defer fromEnv("cache-dir", python.EnvCacheDir, true)
	defer fromEnv("engine", envEngine, false)
	fs.StringVar(&c.python, "python", "", "build to run: own (Airlock's CPython 3.13, the default), npm (the -O0 CPython 3.12 fallback) or a python.wasm path (default: $AIRLOCK_PYTHON, else own)")
	fs.StringVar(&c.cacheDir, "cache-dir", "", "artifact and compile cache (default: $AIRLOCK_CACHE_DIR or the user cache dir)")
	fs.StringVar(&c.engine, "engine", "", "WebAssembly engine: wazero, or wasmtime in builds with -tags airlock_wasmtime (default: $AIRLOCK_ENGINE, else wazero); bench takes a comma-separated list")
	fs.BoolVar(&c.fuelMetering, "fuel-metering", true, "on wasmtime, meter fuel so runs report it and accept --fuel; false runs interpreter-bound code ~20% faster")
	fs.BoolVar(&c.defaultPackages, "default-packages", true, "mount the default pure-Python packages (sympy, networkx, openpyxl, jinja2, requests, ...: airlock version --packages) where airlock setup prepared them; false: the standard library and the built-in numpy and pandas only")
}

// sandbox makes a Sandbox from the flags, then extra: a later option wins,
// so what a command asks for itself (bench --peers' wasmtime peer) is not
// overridden by a flag's default.
func (c *commonFlags) sandbox(ctx context.Context, stderr io.Writer, extra ...airlock.Option) (*airlock.Sandbox, error) {
	opts := []airlock.Option{airlock.WithNotice(stderr)}
	if c.python != "" {
		opts = append(opts, airlock.WithPython(c.python))
	}
	if c.cacheDir != "" {
		opts = append(opts, airlock.WithCacheDir(c.cacheDir))
	}
	if c.engine != "" {
		opts = append(opts, airlock.WithEngine(c.engine))
	}
	if !c.fuelMetering {
		opts = append(opts, airlock.WithFuelMetering(false))
	}
	if !c.defaultPackages {
		opts = append(opts, airlock.WithDefaultPackages(false))
	}
	sb, err := airlock.New(ctx, append(opts, extra...)...)
	if errors.Is(err, airlock.ErrInvalidCanary) {
		return nil, usageError{err.Error()} // --canary's or --canaries-file's
	}
	if err != nil {
		return nil, err
	}
	procsFor(sb.Engine())
	return sb, nil
}

// packageFlags give a long-lived Sandbox (serve, mcp, repl) its packages:
// loaded once, shared by every run. There is no request field for them,
// as a remote client must not name the server's host paths.
type packageFlags struct {
	packages  multiFlag
	preimport multiFlag
	index     indexFlags
}

func (p *packageFlags) register(fs *flag.FlagSet) {
	fs.Var(&p.packages, "package", "pure-Python package every run can import: a wheel, a zip or a directory (repeatable)")
	fs.Var(&p.preimport, "preimport", "module to import before every run, once into the snapshot (repeatable, or comma-separated)")
	p.index.register(fs)
}

// options are the packages', pre-imports' and index's options; a bad
// --index-url is a usage error.
func (p *packageFlags) options() ([]airlock.Option, error) {
	indexOpts, err := p.index.options()
	if err != nil {
		return nil, err
	}
	var mods []string
	for _, v := range p.preimport {
		for m := range strings.SplitSeq(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				mods = append(mods, m)
			}
		}
	}
	return append([]airlock.Option{airlock.WithPackages(p.packages...), airlock.WithPreimport(mods...)}, indexOpts...), nil
}

// indexFlags let runs install pure-Python packages from the operator's
// package index (run, serve, mcp, repl); none by default. A server's
// clients cannot name an index: these flags are the only way to one.
type indexFlags struct {
	url     string
	allow   multiFlag
	origins multiFlag
	// internal lets index and file origin names resolve to internal
	// addresses (a mirror in the host's own network).
	internal bool
}

func (ix *indexFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&ix.url, "index-url", "", "let the code install pure-Python wheels (airlock.install, pip install, %pip) from this PEP 503/691 simple index, e.g. https://host/simple/; the host fetches and verifies them (default: none, installs are refused)")
	fs.Var(&ix.allow, "allow-package", "with --index-url, a project the code may install, dependencies included (repeatable; default: any)")
	fs.Var(&ix.origins, "index-file-origin", "with --index-url, another origin (https://host[:port]) the index's files may be fetched from (repeatable; default: the index's own only)")
	fs.BoolVar(&ix.internal, "index-allow-internal", false, "with --index-url, let the index's and file origins' host names resolve to internal addresses (loopback, private, link-local; default: only an address written literally in the URL)")
}

// options are the flags' Sandbox options; a bad URL or name is a usage
// error.
func (ix *indexFlags) options() ([]airlock.Option, error) {
	if ix.url == "" {
		if len(ix.allow) > 0 {
			return nil, usageError{"--allow-package: needs --index-url"}
		}
		if len(ix.origins) > 0 {
			return nil, usageError{"--index-file-origin: needs --index-url"}
		}
		if ix.internal {
			return nil, usageError{"--index-allow-internal: needs --index-url"}
		}
		return nil, nil
	}
	p := airlock.PackageIndex{URL: ix.url, Allow: ix.allow, FileOrigins: ix.origins, AllowInternal: ix.internal}
	if err := p.Validate(); err != nil {
		return nil, usageError{"--index-url: " + err.Error()}
	}
	return []airlock.Option{airlock.WithPackageIndex(p)}, nil
}

// parseFlags parses args with fs's usage silenced: flagResult prints the
// help for -h, and one line for an error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	return fs.Parse(args)
}

// parseInterleaved lets flags follow positional arguments, as in
// `airlock run main.py --json`.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// maxFlags are the server maxima a request's limits are clamped to.
type maxFlags struct {
	timeout                 *time.Duration
	memory, output, fsBytes sizeFlag
	fsFiles, threads        *int
}

func (m *maxFlags) register(fs *flag.FlagSet) {
	d := airlock.DefaultLimits()
	m.timeout = fs.Duration("max-timeout", 30*time.Second, "largest timeout a request may ask for")
	m.memory, m.output, m.fsBytes = sizeFlag{d.Memory}, sizeFlag{d.Output}, sizeFlag{d.FSBytes}
	fs.Var(&m.memory, "max-memory", "largest memory limit a request may ask for")
	fs.Var(&m.output, "max-output", "largest cap on stdout and on stderr")
	fs.Var(&m.fsBytes, "max-fs-bytes", "largest filesystem quota in bytes")
	m.fsFiles = fs.Int("max-fs-files", d.FSFiles, "largest filesystem quota in files")
	m.threads = fs.Int("max-threads", d.Threads, "most threads a request may ask a run to have at once")
}

func (m *maxFlags) limits() airlock.Limits {
	l := airlock.DefaultLimits()
	l.Timeout, l.Memory, l.Output, l.FSBytes, l.FSFiles, l.Threads = *m.timeout, m.memory.n, m.output.n, m.fsBytes.n, *m.fsFiles, *m.threads
	return l
}

// sessionFlags are the Sandbox's session TTL and cap (serve, mcp).
type sessionFlags struct {
	ttl *time.Duration
	max *int
}

func (f *sessionFlags) register(fs *flag.FlagSet) {
	f.ttl = fs.Duration("session-ttl", airlock.DefaultSessionTTL, "how long a session may sit idle before it expires (negative: never)")
	f.max = fs.Int("max-sessions", airlock.DefaultMaxSessions, "live sessions at most (each holds the memory its calls built, a few MB for small state up to --max-memory, and its files)")
}

func (f *sessionFlags) options() ([]airlock.Option, error) {
	if *f.max < 1 {
		return nil, usageError{"--max-sessions must be at least 1"}
	}
	if *f.ttl == 0 {
		return nil, usageError{"--session-ttl must not be 0 (negative: never expire)"}
	}
	return []airlock.Option{airlock.WithSessionTTL(*f.ttl), airlock.WithMaxSessions(*f.max)}, nil
}

// envFlags are repeated --env KEY=VALUE flags: variables over the run's
// default environment (Request.Env; the HTTP API's "env").
type envFlags struct{ multiFlag }

func (e *envFlags) register(fs *flag.FlagSet) {
	fs.Var(&e.multiFlag, "env", "KEY=VALUE set in the code's environment, over the defaults (HOME, LANG, ...); nothing of this process's is passed on (repeatable)")
}

// env is the flags' variables, nil without any; a malformed one is a
// usage error.
func (e *envFlags) env() (map[string]string, error) {
	if len(e.multiFlag) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(e.multiFlag))
	for _, kv := range e.multiFlag {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, usageError{fmt.Sprintf("--env %q: want KEY=VALUE", kv)}
		}
		env[k] = v
	}
	return env, nil
}

// canaryFlags plant honeytokens in every run of the command's Sandbox
// (airlock.WithCanaries): a run that opens one, or sends its value
// anywhere, is reported suspicious.
type canaryFlags struct {
	inline multiFlag
	file   string
}

func (c *canaryFlags) register(fs *flag.FlagSet) {
	fs.Var(&c.inline, "canary", "plant a honeytoken in every run, env:NAME=VALUE (an environment variable) or file:PATH=VALUE (a file; PATH relative to /home/user), VALUE 8 bytes or more; a run that reads the file or sends the value anywhere is reported suspicious (repeatable)")
	fs.StringVar(&c.file, "canaries-file", "", `JSON file of canaries, for values a flag cannot carry (several lines): [{"path": ".aws/credentials", "value": "..."}, {"env": "AWS_SECRET_ACCESS_KEY", "value": "..."}]`)
}

// canaryJSON is a canary as --canaries-file lists it.
type canaryJSON struct {
	Path  string `json:"path"`
	Env   string `json:"env"`
	Value string `json:"value"`
}

// options is the canaries' option, none without any. A malformed flag or
// file is a usage error; the library checks the canaries themselves
// (airlock.ErrInvalidCanary, which sandbox makes a usage error too).
func (c *canaryFlags) options() ([]airlock.Option, error) {
	var cs []airlock.Canary
	for _, spec := range c.inline {
		kind, rest, _ := strings.Cut(spec, ":")
		name, value, ok := strings.Cut(rest, "=")
		switch {
		case !ok || name == "":
			return nil, usageError{fmt.Sprintf("--canary %q: want env:NAME=VALUE or file:PATH=VALUE", spec)}
		case kind == "env":
			cs = append(cs, airlock.Canary{Env: name, Value: []byte(value)})
		case kind == "file":
			cs = append(cs, airlock.Canary{Path: name, Value: []byte(value)})
		default:
			return nil, usageError{fmt.Sprintf("--canary %q: want env:NAME=VALUE or file:PATH=VALUE", spec)}
		}
	}
	if c.file != "" {
		data, err := os.ReadFile(c.file)
		if err != nil {
			return nil, argFileError("--canaries-file", err)
		}
		var list []canaryJSON
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&list); err != nil {
			return nil, usageError{fmt.Sprintf("--canaries-file %s: %v (want a JSON list of {\"path\" or \"env\", \"value\"})", c.file, err)}
		}
		for _, j := range list {
			cs = append(cs, airlock.Canary{Path: j.Path, Env: j.Env, Value: []byte(j.Value)})
		}
	}
	if len(cs) == 0 {
		return nil, nil
	}
	return []airlock.Option{airlock.WithCanaries(cs...)}, nil
}

// envEngine is the environment variable --engine defaults to (the
// library reads no environment).
const envEngine = "AIRLOCK_ENGINE"

// hiddenUsage starts the usage of a flag kept under an old name: it
// parses as before, and help (printDefaults) leaves it out.
const hiddenUsage = "\x00old name of "

// hostFuncsFlag defines --host-funcs, with --tools, its old name, hidden.
func hostFuncsFlag(fs *flag.FlagSet, usage string) *string {
	p := fs.String("host-funcs", "", usage)
	fs.Var(fs.Lookup("host-funcs").Value, "tools", hiddenUsage+"--host-funcs")
	return p
}

// printDefaults is fs.PrintDefaults without the flags kept under an old
// name (hiddenUsage).
func printDefaults(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, hiddenUsage) {
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(f.Name).DefValue = f.DefValue
	})
	shown.PrintDefaults()
}
