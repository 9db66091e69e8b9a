package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/server"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// cmdWasm runs any WASI preview1 command module under the sandbox's
// isolation. Host directories are copied in, never mounted: what the
// module writes comes back only through --out.
func cmdWasm(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock wasm", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	var (
		limits        limitFlags
		dirs, env     multiFlag
		cacheDir      = fs.String("cache-dir", "", "compile cache (default: $AIRLOCK_CACHE_DIR or the user cache dir)")
		engineName    = fs.String("engine", os.Getenv(envEngine), "WebAssembly engine: wazero, or wasmtime in builds with -tags airlock_wasmtime (default: $AIRLOCK_ENGINE, else wazero)")
		outDir        = fs.String("out", "", "write files the module created or changed to this directory, by their guest path")
		stdinFile     = fs.String("stdin", "", "file to feed as the module's stdin ('-' for this process's stdin)")
		asJSON        = fs.Bool("json", false, "print one JSON object instead of the module's output")
		deterministic = fs.Bool("deterministic", false, "fake clocks and seeded randomness")
		seed          = fs.Uint64("seed", 0, "seed for --deterministic")
	)
	limits.register(fs)
	fs.Var(&dirs, "dir", "HOST:GUEST directory to copy in (repeatable; HOST alone goes to /)")
	fs.Var(&env, "env", "KEY=VALUE in the module's environment, which inherits nothing (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock wasm [flags] FILE.wasm [ARGS...]")
		printDefaults(fs)
	}
	// Flags end at the module: what follows it is the module's own argv.
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage, usageError{"name the FILE.wasm to run"}
	}
	file := fs.Arg(0)
	wasm, err := os.ReadFile(file)
	if err != nil {
		return exitUsage, argFileError("", err)
	}
	req := engine.ModuleRequest{Args: fs.Args()[1:], Limits: moduleLimits(limits.limits()), Deterministic: *deterministic, Seed: *seed, Env: map[string]string{}}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return exitUsage, usageError{fmt.Sprintf("--env %q: want KEY=VALUE", kv)}
		}
		req.Env[k] = v
	}
	for _, spec := range dirs {
		host, guest, ok := strings.Cut(spec, ":")
		if !ok {
			guest = "/"
		}
		if st, err := os.Stat(host); err != nil || !st.IsDir() {
			if err == nil {
				err = fmt.Errorf("%s is not a directory", host)
			}
			return exitUsage, argFileError("--dir", err)
		}
		req.Dirs = append(req.Dirs, engine.Dir{Host: host, Guest: guest})
	}
	if req.Stdin, err = readStdinFlag(*stdinFile, stdin); err != nil {
		return stdinFlagStatus(err), err
	}
	opts := engine.ModuleOptions{Notice: stderr, Engine: *engineName}
	if *cacheDir == "" {
		*cacheDir = os.Getenv(python.EnvCacheDir)
	}
	if *cacheDir == "" {
		if *cacheDir, err = python.CacheDir(); err != nil {
			return 1, err
		}
	}
	opts.CacheDir = python.CompiledDir(*cacheDir)
	mod, err := engine.LoadModule(ctx, filepath.Base(file), wasm, opts)
	if err != nil {
		return 1, err
	}
	defer mod.Close(context.Background())
	if !*asJSON {
		req.OnOutput = streamTo(stdout, stderr)
	}
	mres, _ := mod.Run(ctx, req) // the error is res.Error, which report prints
	res := moduleResult(mres)
	return report(server.NewResult(res, wire.Python{Build: "wasm module " + filepath.Base(file), SHA256: sha256Hex(wasm)}, false), res.Files, outFiles{*outDir, "/"}, *asJSON, !*asJSON, stdout, stderr), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// moduleLimits are the run's limits that apply to a module (host calls do
// not: a module gets no host functions).
func moduleLimits(l airlock.Limits) engine.Limits {
	return engine.Limits{Timeout: l.Timeout, Memory: l.Memory, Output: l.Output, FSBytes: l.FSBytes, FSFiles: l.FSFiles, Fuel: l.Fuel}
}

// moduleResult is a module run's result in the shape report prints and
// the JSON carries for Python runs.
func moduleResult(r *engine.Result) *airlock.Result {
	return &airlock.Result{
		Stdout: r.Stdout, Stderr: r.Stderr,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated,
		ExitCode: r.ExitCode, Error: r.Error, Duration: r.Duration,
		Files: r.Files, FilesOmitted: r.FilesOmitted,
		PeakMemory: r.PeakMemory, Fuel: r.Fuel,
	}
}
