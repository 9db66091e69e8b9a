package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

func cmdSetup(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	common.register(fs)
	snapshots := fs.Bool("snapshots", true, "also asyncify python.wasm with Binaryen's wasm-opt ($AIRLOCK_WASM_OPT or $PATH) and capture the snapshot image")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		return exitUsage, usageError{err.Error()}
	}
	dir := common.cacheDir
	if dir == "" {
		var err error
		if dir, err = python.CacheDir(); err != nil {
			return 1, err
		}
	}
	path, err := python.Fetch(ctx, dir, stderr)
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(stdout, "python.wasm %s (sha256 %s, verified)\n", path, python.DefaultSHA256)
	var opts []airlock.Option
	if *snapshots {
		art, err := python.Load(common.python, dir)
		if err != nil {
			return 1, err
		}
		if _, err := python.Asyncify(ctx, art, dir, stderr); err != nil {
			return 1, err
		}
		_, rec, err := python.LoadAsyncified(art, dir)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(stdout, "asyncified %s -> %s with %s (%.0fs)\n", rec.InputSHA256[:12], rec.OutputSHA256[:12], rec.Tool, rec.Seconds)
		opts = append(opts, airlock.WithSnapshots(true))
	}
	// Compile (and capture the snapshot) now, so the first run does not
	// pay for it, and check that a run works.
	start := time.Now()
	sb, err := common.sandbox(ctx, stderr, opts...)
	if err != nil {
		return 1, err
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, airlock.Request{Code: `print("ok")`})
	if err != nil {
		return 1, fmt.Errorf("check run: %w", err)
	}
	// A deterministic run starts an interpreter from scratch: it compiles
	// (and checks) that module too, so no later run pays for it.
	if _, err := sb.Run(ctx, airlock.Request{Code: "pass", Deterministic: true}); err != nil {
		return 1, fmt.Errorf("check run without snapshot: %w", err)
	}
	fmt.Fprintf(stdout, "ready in %s (snapshots: %v): %s", time.Since(start).Round(time.Millisecond), sb.Snapshots(), res.Stdout)
	return 0, nil
}

func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	common.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		return exitUsage, usageError{err.Error()}
	}
	sb, err := common.sandbox(ctx, stderr)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
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
	if info.Pinned {
		pin = "pinned default " + python.DefaultPackage
	}
	fmt.Fprintf(stdout, "airlock %s\npython %s\nartifact %s\nsha256 %s (%s)\nengine %s (built in: %s)\n",
		airlock.Version, trimNL(string(res.Stdout)), src, info.SHA256, pin, sb.Engine(), strings.Join(airlock.AvailableEngines(), ", "))
	return 0, nil
}

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
