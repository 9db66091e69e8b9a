package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
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
	if stop, code, err := flagResult(fs.Parse(args)); stop {
		return code, err
	}
	dir := common.cacheDir
	if dir == "" {
		var err error
		if dir, err = python.CacheDir(); err != nil {
			return 1, err
		}
	}
	// Only the build asked for is prepared: the npm one is fetched when it
	// is the one named, never as a stand-in for a missing own build.
	build := common.python
	if build == "" {
		build = os.Getenv(python.EnvPython)
	}
	if build == python.SelectNPM {
		path, err := python.Fetch(ctx, dir, stderr)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(stdout, "python.wasm %s (sha256 %s, verified)\n", path, python.DefaultSHA256)
	}
	if err := prepare(ctx, common, dir, *snapshots, stdout, stderr); err != nil {
		return 1, err
	}
	return 0, nil
}

func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	common.register(fs)
	if stop, code, err := flagResult(fs.Parse(args)); stop {
		return code, err
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

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// prepare asyncifies one build (when snapshots are wanted), compiles it,
// captures its snapshot image and checks that a run works, so that no
// later run pays for any of it.
func prepare(ctx context.Context, common commonFlags, dir string, snapshots bool, stdout, stderr io.Writer) error {
	var opts []airlock.Option
	if snapshots {
		art, err := python.Load(common.python, dir)
		if err != nil {
			return err
		}
		if _, err := python.Asyncify(ctx, art, dir, stderr); err != nil {
			return err
		}
		_, rec, err := python.LoadAsyncified(art, dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "asyncified %s -> %s with %s (%.0fs)\n", rec.InputSHA256[:12], rec.OutputSHA256[:12], rec.Tool, rec.Seconds)
		opts = append(opts, airlock.WithSnapshots(true))
	}
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
	// A deterministic run starts an interpreter from scratch: it compiles
	// (and checks) that module too, so no later run pays for it.
	if _, err := sb.Run(ctx, airlock.Request{Code: "pass", Deterministic: true}); err != nil {
		return fmt.Errorf("check run without snapshot: %w", err)
	}
	fmt.Fprintf(stdout, "%s: ready in %s (snapshots: %v): %s", sb.Info().Description, time.Since(start).Round(time.Millisecond), sb.Snapshots(), res.Stdout)
	return nil
}
