package main

import (
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
	"github.com/airlock-sandbox/airlock/internal/python"
	"github.com/airlock-sandbox/airlock/server"
)

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// sizeFlag parses 256MiB, 1MB, 4096 and the like.
type sizeFlag struct{ n int64 }

func (s *sizeFlag) String() string { return strconv.FormatInt(s.n, 10) }
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
	fsFiles                 *int
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
	l.fuel = fs.Int64("fuel", 0, "CPU budget in fuel units, about one per WebAssembly instruction; same verdict on any machine (wasmtime engine only; 0: none)")
}

func (l *limitFlags) limits() airlock.Limits {
	return airlock.Limits{Timeout: *l.timeout, Memory: l.memory.n, Output: l.output.n, FSBytes: l.fsBytes.n, FSFiles: *l.fsFiles, Fuel: *l.fuel}
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
	defer fromEnv("engine", airlock.EnvEngine, false)
	fs.StringVar(&c.python, "python", "", "build to run: own (Airlock's CPython 3.13, the default), npm (the -O0 CPython 3.12 fallback) or a python.wasm path (default: $AIRLOCK_PYTHON, else own)")
	fs.StringVar(&c.cacheDir, "cache-dir", "", "artifact and compile cache (default: $AIRLOCK_CACHE_DIR or the user cache dir)")
	fs.StringVar(&c.engine, "engine", "", "WebAssembly engine: wazero, or wasmtime in builds with -tags airlock_wasmtime (default: $AIRLOCK_ENGINE, else wazero); bench takes a comma-separated list")
	fs.BoolVar(&c.fuelMetering, "fuel-metering", true, "on wasmtime, meter fuel so runs report it and accept --fuel; false runs interpreter-bound code ~20% faster")
}

func (c *commonFlags) sandbox(ctx context.Context, stderr io.Writer, extra ...airlock.Option) (*airlock.Sandbox, error) {
	opts := append([]airlock.Option{airlock.WithNotice(stderr)}, extra...)
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
	return airlock.New(ctx, opts...)
}

// packageFlags give a long-lived Sandbox (serve, mcp, repl) its packages:
// loaded once, shared by every run. There is no request field for them,
// as a remote client must not name the server's host paths.
type packageFlags struct {
	packages  multiFlag
	preimport multiFlag
}

func (p *packageFlags) register(fs *flag.FlagSet) {
	fs.Var(&p.packages, "package", "pure-Python package every run can import: a wheel, a zip or a directory (repeatable)")
	fs.Var(&p.preimport, "preimport", "module to import before every run, once into the snapshot (repeatable, or comma-separated)")
}

func (p *packageFlags) options() []airlock.Option {
	var mods []string
	for _, v := range p.preimport {
		for m := range strings.SplitSeq(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				mods = append(mods, m)
			}
		}
	}
	return []airlock.Option{airlock.WithPackages(p.packages...), airlock.WithPreimport(mods...)}
}

// parseInterleaved lets flags follow positional arguments, as in
// `airlock run main.py --json`.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		common        commonFlags
		limits        limitFlags
		code          = fs.String("c", "", "program passed in as a string")
		files         fileFlags
		packages      multiFlag
		outDir        = fs.String("out", "", "write files created or changed under /home/user to this directory")
		stdinFile     = fs.String("stdin", "", "file to feed as the program's stdin ('-' for this process's stdin)")
		asJSON        = fs.Bool("json", false, "print one JSON object instead of the program's output")
		deterministic = fs.Bool("deterministic", false, "fake clocks, seeded randomness, fixed hash seed")
		seed          = fs.Uint64("seed", 0, "seed for --deterministic")
		tools         = fs.String("tools", "", "expose built-in host tools to Python (import airlock): demo")
		watch         = fs.String("watch", "", "re-run on every change to this file or directory (Ctrl-C stops)")
		clearScreen   = fs.Bool("clear", false, "with --watch, clear the screen before each run")
		serverURL     = fs.String("server", os.Getenv("AIRLOCK_SERVER"), "send the run to an `airlock serve` at this URL (default $AIRLOCK_SERVER; token: $AIRLOCK_TOKEN)")
	)
	common.register(fs)
	limits.register(fs)
	files.register(fs)
	fs.Var(&packages, "package", "pure-Python package to make importable: a wheel, a zip or a directory (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock run [flags] FILE.py | -c CODE")
		fs.PrintDefaults()
	}
	positional, err := parseInterleaved(fs, args)
	if stop, code, err := flagResult(err); stop {
		return code, err
	}
	var sbOpts []airlock.Option
	if *tools != "" && *serverURL != "" {
		return exitUsage, usageError{"--tools: with --server, the server's tools apply"}
	}
	if len(packages) > 0 && *serverURL != "" {
		// A remote client must not name the server's host paths.
		return exitUsage, usageError{"--package: with --server, start the server with --package instead"}
	}
	if *tools != "" {
		opt, err := toolsOption(*tools)
		if err != nil {
			return exitUsage, err
		}
		sbOpts = append(sbOpts, opt)
	}
	if *watch != "" && !watching(ctx) {
		return watchRun(ctx, *watch, *clearScreen, *serverURL == "", &common, sbOpts, stdout, stderr,
			func(ctx context.Context) (int, error) { return cmdRun(ctx, args, stdin, stdout, stderr) })
	}
	req := airlock.Request{
		Limits:        limits.limits(),
		Deterministic: *deterministic,
		Seed:          *seed,
		Packages:      packages,
	}
	switch {
	case *code != "" && len(positional) == 0:
		req.Code, req.Filename = *code, "<string>"
	case *code == "" && len(positional) == 1:
		src, err := os.ReadFile(positional[0])
		if err != nil {
			return exitUsage, argFileError("", err)
		}
		req.Code, req.Filename = string(src), filepath.Base(positional[0])
	default:
		fs.Usage()
		return exitUsage, usageError{"give exactly one of FILE.py or -c CODE"}
	}
	if req.Files, err = files.read(); err != nil {
		return exitUsage, err
	}
	switch *stdinFile {
	case "":
	case "-":
		if req.Stdin, err = io.ReadAll(stdin); err != nil {
			return 1, fmt.Errorf("--stdin: %w", err)
		}
	default:
		if req.Stdin, err = os.ReadFile(*stdinFile); err != nil {
			return exitUsage, argFileError("--stdin", err)
		}
	}

	if *serverURL != "" {
		return runRemote(ctx, *serverURL, req, *outDir, *asJSON, stdout, stderr)
	}
	sb, err := common.sandbox(ctx, stderr, sbOpts...)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	res, runErr := sb.Run(ctx, req)
	if *asJSON {
		printJSON(stdout, server.NewResult(res, server.PythonOf(sb), false))
	} else {
		stdout.Write(res.Stdout)
		stderr.Write(res.Stderr)
		if runErr != nil {
			fmt.Fprintln(stderr, "airlock:", runErr)
		}
	}
	// After the report: a file the host cannot write (the guest names
	// them) must not cost the run's output or exit status; it only keeps
	// a successful run from exiting 0.
	status := exitStatus(res)
	if *outDir != "" && !writeOut(*outDir, res.Files, stderr) && status == 0 {
		status = 1
	}
	return status, nil
}

// exitStatus maps a Result to the CLI's exit status contract.
func exitStatus(res *airlock.Result) int {
	if res.Error == nil {
		return processStatus(res.ExitCode)
	}
	return kindStatus(res.Error.Kind)
}

// processStatus is code as a process exit status: the OS keeps 8 bits, so
// a failure whose low byte is 0 (os._exit(256)) would read as success.
func processStatus(code int) int {
	if code < 0 || code > 255 {
		return 1
	}
	return code
}

func kindStatus(kind airlock.Kind) int {
	switch kind {
	case airlock.KindTimeout:
		return exitTimeout
	case airlock.KindInvalidRequest:
		return exitUsage
	}
	return exitLimit
}

// printJSON prints the --json contract (server.Result, without file data).
func printJSON(w io.Writer, out server.Result) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(out)
}

// writeOut saves result files under dir, by their path below /home/user,
// and tells whether all were written. One that cannot be (a name too long
// for the host, say) is reported on stderr, its guest-chosen path quoted,
// and the others are still written.
func writeOut(dir string, files []airlock.File, stderr io.Writer) bool {
	ok := true
	for _, f := range files {
		rel, inHome := strings.CutPrefix(f.Path, "/home/user/")
		if !inHome || !filepath.IsLocal(rel) {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		err := os.MkdirAll(filepath.Dir(dst), 0o755)
		if err == nil {
			err = os.WriteFile(dst, f.Data, 0o644)
		}
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // its path is the guest's name, quoted below
			}
			fmt.Fprintf(stderr, "airlock: --out: %q not written: %v\n", f.Path, err)
			ok = false
		}
	}
	return ok
}

// runRemote sends req to an `airlock serve` at url and reports the result
// as a local run would.
func runRemote(ctx context.Context, url string, req airlock.Request, outDir string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	c := &server.Client{URL: url, Token: os.Getenv("AIRLOCK_TOKEN")}
	res, err := c.Run(ctx, server.RunRequest{
		Code: req.Code, Filename: req.Filename, Files: req.Files, Stdin: req.Stdin,
		Limits: server.FromLimits(req.Limits), Deterministic: req.Deterministic, Seed: req.Seed,
	})
	if err != nil {
		return 1, err
	}
	files := make([]airlock.File, len(res.Files))
	for i, f := range res.Files {
		files[i] = airlock.File{Path: f.Path, Size: f.Size, Data: f.Data}
	}
	if asJSON {
		for i := range res.Files {
			res.Files[i].Data = nil
		}
		printJSON(stdout, *res)
	} else {
		io.WriteString(stdout, res.Stdout)
		io.WriteString(stderr, res.Stderr)
		if res.Error != nil {
			fmt.Fprintf(stderr, "airlock: %s: %s\n", res.Error.Kind, res.Error.Message)
		}
	}
	status := processStatus(res.ExitCode)
	if res.Error != nil {
		status = kindStatus(airlock.Kind(res.Error.Kind))
	}
	if outDir != "" && !writeOut(outDir, files, stderr) && status == 0 {
		status = 1
	}
	return status, nil
}

// watchRun runs cmd under watchLoop, holding a Sandbox open meanwhile so
// that each run's own Sandbox reuses the compiled module (when local).
func watchRun(ctx context.Context, target string, clear, local bool, common *commonFlags, opts []airlock.Option,
	stdout, stderr io.Writer, cmd func(context.Context) (int, error)) (int, error) {
	if local {
		holder, err := common.sandbox(ctx, stderr, opts...)
		if err != nil {
			return 1, err
		}
		defer holder.Close(context.Background())
	}
	return watchLoop(ctx, target, clear, stdout, stderr, func(ctx context.Context) int {
		code, err := cmd(ctx)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "airlock:", err)
		}
		return code
	})
}
