package airlock_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/wasi"
)

// Airlock's own WASI conformance programs (wasi-c/*.c, compiled by
// scripts/build-wasi-c.sh into the cache): each checks a part of
// wasi_snapshot_preview1 against the answers wasmtime gives, written down
// beside each check. TestWASIC runs them through engine.RunModule;
// wasic_wasmtime_test.go runs them under wasmtime's own WASI, so the
// expectations stay true to it.

const (
	wasicSources = "wasi-c"
	wasicScript  = "../../scripts/build-wasi-c.sh"
)

// wasicKeyFiles are build-wasi-c.sh's cache key's inputs: the script,
// then each source.
func wasicKeyFiles() ([]keyFile, error) {
	srcs, err := dirKeyFiles(wasicSources, "")
	return append([]keyFile{{wasicScript, "scripts/build-wasi-c.sh"}}, srcs...), err
}

// wasicProgram is one compiled program and how the harness runs it.
type wasicProgram struct {
	name     string // without .wasm
	wasm     []byte
	args     []string // after argv[0], which is name+".wasm"
	env      map[string]string
	stdin    []byte
	wantExit int
	// limits are the Airlock run's (wasmtime's WASI has none to set).
	limits engine.Limits
}

// wasicPrograms loads every program the sources make, built for exactly
// these sources.
func wasicPrograms(t *testing.T) []wasicProgram {
	t.Helper()
	files, err := wasicKeyFiles()
	if err != nil {
		t.Fatal(err)
	}
	dir := stageDir(t, "wasi-c", "scripts/build-wasi-c.sh", files)
	srcs, err := filepath.Glob(filepath.Join(wasicSources, "*.c"))
	if err != nil {
		t.Fatal(err)
	}
	var progs []wasicProgram
	for _, src := range srcs {
		name := strings.TrimSuffix(filepath.Base(src), ".c")
		if name == "check" {
			continue
		}
		wasm, err := os.ReadFile(filepath.Join(dir, name+".wasm"))
		if err != nil {
			t.Fatalf("%v: rebuild with scripts/build-wasi-c.sh", err)
		}
		p := wasicProgram{
			name: name, wasm: wasm,
			args:  []string{"alpha", "two words", ""},
			env:   map[string]string{"GREETING": "hello world", "EMPTY": ""},
			stdin: []byte("line one\n"),
		}
		switch name {
		case "proc":
			// proc.c ends with proc_exit(42) when its checks passed.
			p.wantExit = 42
		case "limits":
			// limits.c's checks are written for these.
			p.limits = engine.Limits{FSBytes: 8 << 20, FSFiles: 64, Memory: 64 << 20}
		}
		progs = append(progs, p)
	}
	if len(progs) == 0 {
		t.Fatalf("no programs in %s", wasicSources)
	}
	return progs
}

// wasicReport checks one run's outcome: the exit status, and a PASS
// line; it names every check that did not print "ok".
func wasicReport(t *testing.T, p wasicProgram, exit int, stdout, stderr []byte) {
	t.Helper()
	var failed []string
	for _, line := range strings.Split(strings.TrimRight(string(stdout), "\n"), "\n") {
		if !strings.HasSuffix(line, ": ok") && !strings.HasPrefix(line, "PASS: ") {
			failed = append(failed, line)
		}
	}
	passLine := slices.ContainsFunc(strings.Split(string(stdout), "\n"), func(l string) bool { return strings.HasPrefix(l, "PASS: ") })
	if exit != p.wantExit || len(failed) > 0 || !passLine {
		t.Errorf("%s: exit %d, want %d; not ok:\n%s\nstderr: %s", p.name, exit, p.wantExit, strings.Join(failed, "\n"), stderr)
	}
}

func TestWASIC(t *testing.T) {
	ctx := context.Background()
	progs := wasicPrograms(t)
	// The programs cover the whole table: a function added to it without a
	// program calling it fails here.
	called := map[string]bool{}
	for _, p := range progs {
		imports, err := wasmbin.FuncImports(p.wasm)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		for _, im := range imports {
			called[im.Name] = true
		}
	}
	for _, f := range wasi.Functions() {
		if !called[f.Name] {
			t.Errorf("no program in %s calls %s", wasicSources, f.Name)
		}
	}
	for _, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			env := map[string]string{"CONFORMANCE_HOST": "airlock"}
			for k, v := range p.env {
				env[k] = v
			}
			// An empty directory as "/", as the wasmtime side gets: a
			// module given none has no directory at all.
			root := engine.Dir{Host: t.TempDir(), Guest: "/"}
			res, err := engine.RunModule(ctx, p.name+".wasm", p.wasm, engine.ModuleRequest{Args: p.args, Env: env, Stdin: p.stdin, Limits: p.limits, Dirs: []engine.Dir{root}}, moduleCacheOpts())
			if err != nil {
				t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", p.name, err, res.Stdout, res.Stderr)
			}
			if testing.Verbose() {
				t.Logf("%s", res.Stdout)
			}
			wasicReport(t, p, res.ExitCode, res.Stdout, res.Stderr)
		})
	}
}
