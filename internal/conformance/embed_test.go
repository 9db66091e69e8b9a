//go:build airlock_embed

package airlock_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// A binary with the embedded build runs it on an empty cache directory,
// with snapshots and sessions, and no wasm-opt anywhere.
func TestEmbeddedBuildOnEmptyCache(t *testing.T) {
	withoutWasmOpt(t)
	t.Setenv(python.EnvPython, "")
	ctx := context.Background()
	dir := t.TempDir()
	s, err := airlock.New(ctx, airlock.WithCacheDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if info := s.Info(); !s.Snapshots() || info.Build != "own" || info.Path != "" {
		t.Fatalf("embedded build: snapshots %v, info %+v", s.Snapshots(), info)
	}
	if out := mustRunOn(t, s, "import sys; print(sys.version_info[:2])"); out != "(3, 13)\n" {
		t.Fatalf("printed %q", out)
	}
	sess, err := s.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	sess.Run(ctx, airlock.Request{Code: "n = 40"})
	if res, err := sess.Run(ctx, airlock.Request{Code: "print(n + 2)"}); err != nil || string(res.Stdout) != "42\n" {
		t.Fatalf("session: %v, %+v", err, res)
	}
	// Nothing of the build is written to the cache: it is in the binary.
	if _, err := os.Stat(python.OwnDir(dir)); !os.IsNotExist(err) {
		t.Fatalf("%s: %v; the embedded build is not installed", python.OwnDir(dir), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "asyncify")); !os.IsNotExist(err) {
		t.Fatalf("asyncify dir: %v; the embedded module is not copied out", err)
	}
}
