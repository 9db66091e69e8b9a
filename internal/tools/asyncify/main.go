// Command asyncify is the snapshot half of Airlock's set-up: it transforms
// the python.wasm in use with Binaryen's asyncify (cached by input sha256,
// arguments and wasm-opt version; a no-op when done already), compiles the
// result into the compile cache and captures the snapshot image, so the
// first Sandbox of every later process starts warm.
//
//	go run ./internal/tools/asyncify   # or scripts/asyncify.sh, which installs wasm-opt
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "asyncify:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir, err := python.CacheDir()
	if err != nil {
		return err
	}
	art, err := python.Load("", dir)
	if err != nil {
		return err
	}
	path, err := python.Asyncify(ctx, art, dir, os.Stderr)
	if err != nil {
		return err
	}
	_, rec, err := python.LoadAsyncified(art, dir)
	if err != nil {
		return err
	}
	fmt.Printf("asyncified %s\n  input  %s\n  output %s\n  tool   %s %v (%.0fs)\n", path, rec.InputSHA256, rec.OutputSHA256, rec.Tool, rec.Args, rec.Seconds)
	start := time.Now()
	sb, err := airlock.New(ctx, airlock.WithSnapshots(true), airlock.WithNotice(os.Stderr))
	if err != nil {
		return err
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, airlock.Request{Code: `print("snapshot ok")`})
	if err != nil {
		return err
	}
	fmt.Printf("compiled, captured and checked the snapshot in %s: %s", time.Since(start).Round(time.Millisecond), res.Stdout)
	return nil
}
