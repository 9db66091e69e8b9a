package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/python"
)

// TestWasmCommand runs the own build's python.wasm as a plain WASI
// module through `airlock wasm`: the standard library and a data
// directory copied in with --dir, the module's own flags after its file.
func TestWasmCommand(t *testing.T) {
	cache, err := python.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv(python.EnvCacheDir); v != "" {
		cache = v
	}
	own := python.OwnDir(cache)
	root := t.TempDir()
	lib := filepath.Join(root, "usr", "local", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	stdlib, err := os.ReadFile(filepath.Join(own, "python313.zip"))
	if err != nil {
		t.Fatalf("the own build (scripts/setup.sh): %v", err)
	}
	if err := os.WriteFile(filepath.Join(lib, "python313.zip"), stdlib, 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "in.txt"), []byte("42"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	wasm := filepath.Join(own, "python.wasm")
	prog := `import sys, os; print(sys.argv[1:], open("/data/in.txt").read(), os.environ["A"]); open("/data/new.txt", "w").write("made"); sys.exit(5)`
	code, stdout, stderr := cli(t, "", "wasm", "--dir", root, "--dir", data+":/data", "--env", "PYTHONHOME=/usr/local", "--env", "A=b=c",
		"--out", out, wasm, "-c", prog, "-v", "--timeout", "x")
	if code != 5 || stdout != "['-v', '--timeout', 'x'] 42 b=c\n" {
		t.Fatalf("exit %d stdout %q stderr %s", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "data", "new.txt")); string(got) != "made" {
		t.Fatalf("--out: data/new.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(data, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("the module wrote into the host directory: %v", err)
	}

	code, stdout, _ = cli(t, "", "wasm", "--json", "--timeout", "300ms", "--dir", root, "--env", "PYTHONHOME=/usr/local", wasm, "-c", "while True: pass")
	var res struct {
		Error struct{ Kind string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitTimeout || res.Error.Kind != "timeout" {
		t.Fatalf("exit %d, %v, json %s; want a timeout", code, err, stdout)
	}

	for _, args := range [][]string{
		{"wasm"},
		{"wasm", filepath.Join(data, "missing.wasm")},
		{"wasm", "--dir", filepath.Join(data, "in.txt"), wasm},
		{"wasm", "--env", "NOEQUALS", wasm},
	} {
		if code, _, stderr := cli(t, "", args...); code != exitUsage || strings.Count(strings.TrimSpace(stderr), "\n") > 2 {
			t.Errorf("%v: exit %d, stderr %q; want a short usage error", args, code, stderr)
		}
	}
	code, _, stderr = cli(t, "", "wasm", filepath.Join(data, "in.txt"))
	if code != exitAirlock || !strings.Contains(stderr, "decode the module") {
		t.Fatalf("a file that is no module: exit %d, stderr %q", code, stderr)
	}
}
