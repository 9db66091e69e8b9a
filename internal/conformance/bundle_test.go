package airlock_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// The own build, exported from this host's cache and imported into an
// empty one, runs with snapshots there with no wasm-opt anywhere: fresh
// runs resume from the image, and sessions keep state.
func TestImportedBundleRunsWithSnapshots(t *testing.T) {
	src, err := python.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	art, err := python.LoadOwn(python.OwnDir(src))
	if err != nil {
		t.Fatalf("exporting needs the own build (make python; airlock setup): %v", err)
	}
	var bundle bytes.Buffer
	if _, err := python.ExportBundle(&bundle, art, src, true); err != nil {
		t.Fatal(err)
	}

	withoutWasmOpt(t)
	t.Setenv(python.EnvPython, "")

	dir := t.TempDir()
	if _, err := python.ImportBundle(&bundle, dir); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := airlock.New(ctx, airlock.WithCacheDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if !s.Snapshots() || s.Info().Build != "own" || s.Info().SHA256 != art.SHA256 {
		t.Fatalf("imported build: snapshots %v, info %+v", s.Snapshots(), s.Info())
	}
	if out := mustRunOn(t, s, "import sys, zlib; print(sys.version_info[:2], zlib.crc32(b'x'))"); out != "(3, 13) 2363233923\n" {
		t.Fatalf("run on the imported build printed %q", out)
	}
	sess, err := s.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	if _, err := sess.Run(ctx, airlock.Request{Code: "n = 40"}); err != nil {
		t.Fatal(err)
	}
	if res, err := sess.Run(ctx, airlock.Request{Code: "print(n + 2)"}); err != nil || string(res.Stdout) != "42\n" {
		t.Fatalf("session on the imported build: %v, %+v", err, res)
	}
	// Compiled into the new cache, for the next process. (The image
	// itself this process has in memory already, from the suite's own
	// Sandbox: the same module, prelude and layers.)
	if compiled, _ := os.ReadDir(filepath.Join(dir, "compiled")); len(compiled) == 0 {
		t.Fatal("nothing compiled into the imported cache")
	}
}

// withoutWasmOpt hides Binaryen's wasm-opt from the test, as on a host
// that imports a bundle or runs the embedded build instead of asyncifying.
func withoutWasmOpt(t *testing.T) {
	t.Helper()
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "wasm-opt")); err != nil {
			keep = append(keep, d)
		}
	}
	t.Setenv("PATH", strings.Join(keep, string(filepath.ListSeparator)))
	t.Setenv("AIRLOCK_WASM_OPT", filepath.Join(t.TempDir(), "no-wasm-opt"))
}
