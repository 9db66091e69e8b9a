package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/python"
)

func cmdSetup(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock setup", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	var common commonFlags
	common.register(fs)
	snapshots := fs.Bool("snapshots", true, "also asyncify python.wasm with Binaryen's wasm-opt ($AIRLOCK_WASM_OPT or $PATH) and capture the snapshot image")
	exportPath := fs.String("export", "", "then write the own build and its asyncified module to this bundle `file` (gzipped if it ends in .gz or .tgz), for hosts that cannot build it")
	importPath := fs.String("import", "", "install the own build and its asyncified module from a bundle `file` (setup --export), then prepare it: needs no wasm-opt, npm or root")
	fetchURL := fs.String("fetch", "", "download the own build's bundle from this `URL` (a release's, or your mirror of it), check it against the pinned manifest sha256 (or --bundle-sha256), install and prepare it: needs no root, apt, wasm-opt or npm")
	bundleSum := fs.String("bundle-sha256", "", "with --fetch, the bundle's manifest sha256 (setup --export prints it; default: the one this version of Airlock pins)")
	compiledPath := fs.String("export-compiled", "", "then write this machine's compiled code for the own build's snapshot module to `file`, for scripts/embed.sh: an edge binary carrying it skips the compile on hosts of the same OS, architecture and CPU features")
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	if *fetchURL != "" && *importPath != "" {
		return exitUsage, usageError{"--fetch and --import: one source at a time"}
	}
	if *bundleSum != "" && *fetchURL == "" {
		return exitUsage, usageError{"--bundle-sha256: needs --fetch URL"}
	}
	source := *importPath
	if *fetchURL != "" {
		source = *fetchURL
	}
	if *exportPath != "" || source != "" {
		if err := bundleUsage(common, *exportPath, source, *snapshots); err != nil {
			return exitUsage, err
		}
	}
	if *compiledPath != "" && (!*snapshots || common.python != "" && common.python != python.SelectOwn) {
		return exitUsage, usageError{"--export-compiled: the code is the own build's snapshot module's, which needs --snapshots and --python own"}
	}
	dir := common.cacheDir
	if dir == "" {
		var err error
		if dir, err = python.CacheDir(); err != nil {
			return 1, err
		}
	}
	if err := writableCache(dir); err != nil {
		return 1, err
	}
	if code, err := installBuild(ctx, common.python, dir, *importPath, *fetchURL, *bundleSum, stdout, stderr); err != nil {
		return code, err
	}
	// An imported build is asyncified already: preparing it only loads
	// that module, so no wasm-opt is needed.
	if err := prepare(ctx, common, dir, *snapshots, source == "", stdout, stderr); err != nil {
		return 1, err
	}
	if *exportPath != "" {
		if err := exportBundle(common, *exportPath, dir, stdout); err != nil {
			return 1, err
		}
	}
	if *compiledPath != "" {
		if err := exportCompiled(ctx, common, *compiledPath, dir, stdout); err != nil {
			return 1, err
		}
	}
	return 0, nil
}

// installBuild puts the build asked for into dir: the npm one fetched
// when it is the one named, or the own build from a bundle file
// (importPath) or URL (fetchURL, checked against bundleSum or the pinned
// sum). With none of them it does nothing: prepare then makes the own
// build's modules from what setup built. It returns the exit status with
// its error.
func installBuild(ctx context.Context, build, dir, importPath, fetchURL, bundleSum string, stdout, stderr io.Writer) (int, error) {
	// Only the build asked for is prepared: the npm one is fetched when it
	// is the one named, never as a stand-in for a missing own build.
	if build == python.SelectNPM {
		path, err := python.Fetch(ctx, dir, stderr)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(stdout, "python.wasm %s (sha256 %s, verified)\n", path, python.DefaultSHA256)
	}
	if importPath != "" {
		if err := importBundle(importPath, dir, stdout); err != nil {
			return 1, err
		}
	}
	if fetchURL != "" {
		man, err := python.FetchBundle(ctx, nil, fetchURL, bundleSum, dir)
		if errors.Is(err, python.ErrBundleNotPinned) {
			return exitUsage, usageError{err.Error() + ": --bundle-sha256"}
		}
		if err != nil {
			return 1, fmt.Errorf("fetch bundle %s: %w", fetchURL, err)
		}
		fmt.Fprintf(stdout, "fetched %s into %s: CPython %s, manifest sha256 %s (pinned), %d files checked against their sha256\n", fetchURL, dir, man.Python, man.SHA256, len(man.Files))
	}
	return 0, nil
}

// exportCompiled writes the compiled code of the snapshot module that
// prepare compiled (or found) in dir's cache.
func exportCompiled(ctx context.Context, common commonFlags, path, dir string, stdout io.Writer) error {
	art, err := python.Load(python.SelectOwn, dir)
	if err != nil {
		return err
	}
	var size int64
	err = atomicfile.Write(path, 0o644, func(w io.Writer) error {
		cw := &countingWriter{w: w}
		err := python.WritePrecompiled(ctx, cw, art, dir)
		size = cw.n
		return err
	})
	if err != nil {
		return fmt.Errorf("export compiled code %s: %w", path, err)
	}
	fmt.Fprintf(stdout, "exported %s: compiled code for %s/%s, %d MB gzipped\n", path, runtime.GOOS, runtime.GOARCH, size>>20)
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// bundleUsage checks the flags that go with --export or --import.
func bundleUsage(common commonFlags, exportPath, importPath string, snapshots bool) error {
	build := common.python
	switch {
	case exportPath != "" && importPath != "":
		return usageError{"--export with --import or --fetch: one at a time"}
	case build != "" && build != python.SelectOwn:
		return usageError{fmt.Sprintf("--export and --import: a bundle holds the own build, not %q", build)}
	case exportPath != "" && !snapshots:
		return usageError{"--export: a bundle holds the asyncified module, which needs --snapshots"}
	case importPath != "" && python.Embedded():
		// Load would take the embedded build over the imported one.
		return usageError{"--import: this binary carries the own build already (-tags airlock_embed)"}
	}
	return nil
}

func importBundle(path, dir string, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("import bundle: %w", err)
	}
	defer f.Close()
	man, err := python.ImportBundle(f, dir)
	if err != nil {
		return fmt.Errorf("import bundle %s: %w", path, err)
	}
	fmt.Fprintf(stdout, "imported %s into %s: CPython %s, %d files checked against their sha256\n", path, dir, man.Python, len(man.Files))
	return nil
}

func exportBundle(common commonFlags, path, dir string, stdout io.Writer) error {
	art, err := python.Load(common.python, dir)
	if err != nil {
		return err
	}
	gz := strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".tgz")
	var man *python.BundleManifest
	// Written aside and renamed: a failed export leaves no half a bundle.
	err = atomicfile.Write(path, 0o644, func(w io.Writer) error {
		man, err = python.ExportBundle(w, art, dir, gz)
		return err
	})
	if err != nil {
		return fmt.Errorf("export bundle %s: %w", path, err)
	}
	var size int64
	for _, f := range man.Files {
		size += f.Size
	}
	fmt.Fprintf(stdout, "exported %s: CPython %s, %d files (%d MB before compression), manifest sha256 %s\n", path, man.Python, len(man.Files), size>>20, man.SHA256)
	return nil
}

func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock version", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	var common commonFlags
	common.register(fs)
	packages := fs.Bool("packages", false, "list the built-in packages: compiled into python.wasm, mounted by default, and those pending or planned")
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	sb, err := common.sandbox(ctx, stderr)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	if *packages {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tSTATUS\tSHA256")
		for _, p := range sb.Packages() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, cmp.Or(p.Version, "-"), p.Kind, p.Status, cmp.Or(p.SHA256, "-"))
		}
		return 0, tw.Flush()
	}
	res, err := sb.Run(ctx, airlock.Request{Code: "import sys; print(sys.version.split()[0])"})
	if err != nil {
		return 1, fmt.Errorf("ask python for its version: %w", err)
	}
	info := sb.Info()
	src := info.Path
	if src == "" {
		src = "(embedded)"
	}
	pin := "custom build"
	switch {
	case info.Pinned:
		pin = "pinned npm fallback " + python.DefaultPackage
	case info.Build == "own":
		pin = "own build, checked against its build.json"
	}
	fmt.Fprintf(stdout, "airlock %s\npython %s\nartifact %s\nsha256 %s (%s)\nbuild %s\nengine %s (built in: %s)\n",
		airlock.Version, trimNL(string(res.Stdout)), src, info.SHA256, pin, info.Description, sb.Engine(), strings.Join(airlock.AvailableEngines(), ", "))
	if info.StdlibSHA256 != "" {
		fmt.Fprintf(stdout, "stdlib %s (sha256 %s)\n", python.OwnStdlibAt, info.StdlibSHA256)
	}
	return 0, nil
}

// prepareDefaultPackages makes the default packages' zip and returns
// what to print about it, for the caller to print in its order.
func prepareDefaultPackages(ctx context.Context, common commonFlags, dir string, stdout, stderr io.Writer) func() {
	start := time.Now()
	var popts []airlock.Option
	if common.python != "" {
		popts = append(popts, airlock.WithPython(common.python))
	}
	popts = append(popts, airlock.WithCacheDir(dir), airlock.WithNotice(stderr))
	if common.engine != "" {
		popts = append(popts, airlock.WithEngine(common.engine))
	}
	path, n, err := airlock.PrepareDefaultPackages(ctx, popts...)
	took := time.Since(start).Round(time.Millisecond)
	return func() {
		if err != nil {
			fmt.Fprintf(stderr, "airlock: runs will have no default packages (sympy, networkx, jinja2, ...): %v\n", err)
		} else {
			fmt.Fprintf(stdout, "default packages: %d in %s (%s)\n", n, path, took)
		}
	}
}

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// prepare asyncifies one build (when snapshots are wanted, and asyncify
// is true: else the asyncified module must be there), compiles it,
// captures its snapshot image and checks that a run works, so that no
// later run pays for any of it.
func prepare(ctx context.Context, common commonFlags, dir string, snapshots, asyncify bool, stdout, stderr io.Writer) error {
	var opts []airlock.Option
	// The default packages' zip, their bytecode compiled by python.wasm
	// (a few minutes once), is made while wasm-opt asyncifies: each keeps
	// about one core busy, and the image that mounts the zip waits for
	// both. An early return stops it and waits, so nothing outlives prepare.
	reportDefaults := func() {}
	if common.defaultPackages {
		dctx, cancel := context.WithCancel(ctx)
		result := make(chan func(), 1)
		go func() { result <- prepareDefaultPackages(dctx, common, dir, stdout, stderr) }()
		report := sync.OnceValue(func() func() { return <-result })
		reportDefaults = func() { report()() }
		defer func() { cancel(); report() }()
	}
	if snapshots {
		art, err := python.Load(common.python, dir)
		if err != nil {
			return err
		}
		if asyncify {
			if _, err := python.Asyncify(ctx, art, dir, os.Getenv(python.EnvWasmOpt), stderr); err != nil {
				// A host that imported a bundle has the module and no
				// wasm-opt: set-up goes on with what is there.
				if _, _, lerr := python.LoadAsyncified(art, dir); !errors.Is(err, python.ErrNoWasmOpt) || lerr != nil {
					return err
				}
				fmt.Fprintf(stderr, "airlock: %v; using the asyncified module in the cache\n", err)
			}
		}
		_, rec, err := python.LoadAsyncified(art, dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "asyncified %s -> %s with %s (%.0fs)\n", rec.InputSHA256[:12], rec.OutputSHA256[:12], rec.Tool, rec.Seconds)
		opts = append(opts, airlock.WithSnapshots(true))
	}
	reportDefaults()
	start := time.Now()
	sb, err := common.sandbox(ctx, stderr, opts...)
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, airlock.Request{Code: `print("ok")`})
	if err != nil {
		return fmt.Errorf("check run: %w", err)
	}
	// Code importing pandas resumes from the full image
	// (airlock.WithFullImage): made now, once per machine, rather than
	// by the first such run.
	if slices.ContainsFunc(sb.Info().Libraries, func(lib string) bool { return strings.HasPrefix(lib, "pandas ") }) {
		res, err := sb.Run(ctx, airlock.Request{Code: "import numpy, pandas"})
		if err != nil {
			return fmt.Errorf("check run of numpy and pandas: %w", err)
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("check run of numpy and pandas: exit status %d\n%s", res.ExitCode, res.Stderr)
		}
	}
	// A deterministic run starts an interpreter from scratch: it compiles
	// (and checks) that module too, so no later run pays for it.
	if _, err := sb.Run(ctx, airlock.Request{Code: "pass", Deterministic: true}); err != nil {
		return fmt.Errorf("check run without snapshot: %w", err)
	}
	fmt.Fprintf(stdout, "%s: ready in %s (snapshots: %v): %s", sb.Info().Description, time.Since(start).Round(time.Millisecond), sb.Snapshots(), res.Stdout)
	return nil
}
