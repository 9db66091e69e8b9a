package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/pkgindex/indextest"
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

func TestRunIndexURL(t *testing.T) {
	ix := indextest.NewIndex(t,
		indextest.Wheel{Name: "greet-kit", Version: "1.0", Requires: []string{"wordlist"}, Module: "from wordlist import WORDS\n"},
		indextest.Wheel{Name: "wordlist", Version: "2.1", Module: "WORDS = ['hello', 'cli']\n"})
	code, stdout, stderr := cli(t, "", "run", "--json", "--index-url", ix.URL(), "-c",
		"import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'pip', 'install', '-q', 'greet-kit'], check=True)\nimport greet_kit\nprint(greet_kit.WORDS)")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res struct {
		Stdout   string
		Installs []airlock.PackageInstall
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "['hello', 'cli']\n" || len(res.Installs) != 1 || len(res.Installs[0].Packages) != 2 {
		t.Fatalf("%+v", res)
	}
	// --allow-package limits what can come, dependencies included.
	code, stdout, _ = cli(t, "", "run", "--index-url", ix.URL(), "--allow-package", "greet-kit", "-c",
		"import airlock\ntry:\n    airlock.install('greet-kit')\nexcept airlock.InstallError as e:\n    print(e.kind)")
	if code != 0 || stdout != "not_allowed\n" {
		t.Fatalf("--allow-package: exit %d, stdout %q", code, stdout)
	}
	for _, bad := range [][]string{
		{"run", "--index-url", "ftp://x/simple", "-c", "pass"},
		{"run", "--allow-package", "x", "-c", "pass"},
		{"run", "--index-url", ix.URL(), "--allow-package", "not a name", "-c", "pass"},
		{"run", "--server", "http://127.0.0.1:1", "--index-url", ix.URL(), "-c", "pass"},
		{"serve", "--index-url", "ftp://x"},
		{"mcp", "--index-url", "ftp://x"},
		{"repl", "--index-url", "ftp://x"},
	} {
		if st, _, errOut := cli(t, "", bad...); st != exitUsage || !(strings.Contains(errOut, "--index-url") || strings.Contains(errOut, "--allow-package")) {
			t.Errorf("%v: status %d (%s), want a usage error naming the flag", bad, st, errOut)
		}
	}
}
