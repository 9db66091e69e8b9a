package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunPackage(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "greeting")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), []byte("def hi():\n    return 'hi from a package'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "", "run", "--package", pkg, "-c", "import greeting; print(greeting.hi())")
	if code != 0 || stdout != "hi from a package\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if err := os.WriteFile(filepath.Join(pkg, "_native.so"), []byte("\x7fELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = cli(t, "", "run", "--package", pkg, "-c", "print('ran')")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "compiled extension") || !strings.Contains(stderr, "_native.so") {
		t.Fatalf("a package with native code: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	// serve and mcp load their packages once, at start: a refused one
	// stops them before they serve anything.
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0", "--package", pkg}, {"mcp", "--package", pkg}} {
		code, _, stderr = cli(t, "", args...)
		if code != exitAirlock || !strings.Contains(stderr, "compiled extension") || !strings.Contains(stderr, "_native.so") {
			t.Fatalf("%v with native code: exit %d, stderr:\n%s", args, code, stderr)
		}
	}
	code, _, stderr = cli(t, "", "mcp", "--preimport", "json, no_such_module_here")
	if code != exitAirlock || !strings.Contains(stderr, "pre-import failed") || !strings.Contains(stderr, "no_such_module_here") {
		t.Fatalf("mcp --preimport of a missing module: exit %d, stderr:\n%s", code, stderr)
	}
	// A remote client must not name the server's host paths.
	code, _, stderr = cli(t, "", "run", "--server", "http://127.0.0.1:1", "--package", pkg, "-c", "pass")
	if code != exitUsage || !strings.Contains(stderr, "--package") {
		t.Fatalf("--package with --server: exit %d, stderr:\n%s", code, stderr)
	}
}
