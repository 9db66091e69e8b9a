package airlock_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
)

// keyFile is one input of a build stage's cache key: the file read, and
// the name its script hashes it under.
type keyFile struct{ path, name string }

// stageKey is a build stage's cache key as its script computes it: the
// first 16 hex digits of the sha256 of "<sha256>  <name>" lines, one per
// file in order.
func stageKey(files []keyFile) (string, error) {
	var lines strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", f.path, err)
		}
		fmt.Fprintf(&lines, "%x  %s\n", sha256.Sum256(data), f.name)
	}
	return fmt.Sprintf("%x", sha256.Sum256([]byte(lines.String())))[:16], nil
}

// dirKeyFiles are dir's regular files but dot files, in byte order of
// their names (as the scripts' ls lists them), each named prefix+name.
func dirKeyFiles(dir, prefix string) ([]keyFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the sources: %w", err)
	}
	var files []keyFile
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, keyFile{filepath.Join(dir, e.Name()), prefix + e.Name()})
		}
	}
	return files, nil
}

// stageDir is where a build stage (wasi-c, cxx-eh) left what it built
// from files; the test fails when that is not there, naming the script.
func stageDir(t testing.TB, stage, script string, files []keyFile) string {
	t.Helper()
	key, err := stageKey(files)
	if err != nil {
		t.Fatal(err)
	}
	cache := testenv.FromEnv().CacheDir
	if cache == "" {
		if cache, err = python.CacheDir(); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(cache, stage, key)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		t.Fatalf("the %s programs for these sources are not built (no %s): run %s (scripts/setup.sh does)", stage, dir, script)
	}
	return dir
}
