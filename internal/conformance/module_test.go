package airlock_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
)

// wasmModule encodes a small module by hand: the tests of RunModule's
// refusals and limits need programs that do one thing, and no compiler.
type wasmModule struct {
	imports []string // wasi_snapshot_preview1 (or "mod.name") functions of type (i32) -> ()
	start   []byte   // _start's body, without locals and end
	noStart bool
	noMem   bool
	memMin  uint32 // pages
}

func (w wasmModule) encode() []byte {
	u := func(v uint32) []byte { return binary.AppendUvarint(nil, uint64(v)) }
	name := func(s string) []byte { return append(u(uint32(len(s))), s...) }
	section := func(id byte, body []byte) []byte { return append(append([]byte{id}, u(uint32(len(body)))...), body...) }
	vec := func(items ...[]byte) []byte {
		out := u(uint32(len(items)))
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	// Types: 0 is (i32) -> (), 1 is () -> ().
	out = append(out, section(1, vec([]byte{0x60, 1, 0x7f, 0}, []byte{0x60, 0, 0}))...)
	var imports [][]byte
	for _, im := range w.imports {
		mod, fn, ok := strings.Cut(im, ".")
		if !ok {
			mod, fn = "wasi_snapshot_preview1", im
		}
		imports = append(imports, append(append(name(mod), name(fn)...), 0, 0))
	}
	out = append(out, section(2, vec(imports...))...)
	out = append(out, section(3, vec([]byte{1}))...)
	if !w.noMem {
		out = append(out, section(5, vec([]byte{0, byte(w.memMin)}))...)
	}
	var exports [][]byte
	if !w.noStart {
		exports = append(exports, append(name("_start"), 0, byte(len(w.imports))))
	}
	if !w.noMem {
		exports = append(exports, append(name("memory"), 2, 0))
	}
	out = append(out, section(7, vec(exports...))...)
	body := append(append([]byte{0}, w.start...), 0x0b)
	return append(out, section(10, vec(append(u(uint32(len(body))), body...)))...)
}

// exitWith is a _start body calling the first import, proc_exit, with code.
func exitWith(code byte) []byte { return []byte{0x41, code, 0x10, 0} }

// moduleCacheOpts keep the compiled modules where the suite's cache is.
func moduleCacheOpts() engine.ModuleOptions {
	if dir := testenv.FromEnv().CacheDir; dir != "" {
		return engine.ModuleOptions{CacheDir: python.CompiledDir(dir)}
	}
	return engine.ModuleOptions{}
}

func TestModuleExitAndRefusals(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, w wasmModule, req engine.ModuleRequest) (*engine.Result, error) {
		t.Helper()
		return engine.RunModule(ctx, "t.wasm", w.encode(), req, moduleCacheOpts())
	}
	t.Run("exit code", func(t *testing.T) {
		res, err := run(t, wasmModule{imports: []string{"proc_exit"}, start: exitWith(7), memMin: 1}, engine.ModuleRequest{})
		if err != nil || res.ExitCode != 7 {
			t.Fatalf("err %v, exit %d; want nil, 7", err, res.ExitCode)
		}
	})
	t.Run("returning from _start is exit 0", func(t *testing.T) {
		res, err := run(t, wasmModule{memMin: 1}, engine.ModuleRequest{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("err %v, exit %d", err, res.ExitCode)
		}
	})
	refused := []struct {
		name    string
		w       wasmModule
		want    string
		imports bool // ErrModuleImports
	}{
		{"an import from elsewhere", wasmModule{imports: []string{"env.open_socket"}, memMin: 1}, "env.open_socket", true},
		{"an unknown WASI function", wasmModule{imports: []string{"sock_open"}, memMin: 1}, "wasi_snapshot_preview1.sock_open", true},
		{"no _start", wasmModule{noStart: true, memMin: 1}, "no _start", false},
		{"no memory", wasmModule{noMem: true}, "no memory", false},
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			_, err := run(t, tc.w, engine.ModuleRequest{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want one naming %q", err, tc.want)
			}
			if tc.imports != errors.Is(err, engine.ErrModuleImports) {
				t.Fatalf("errors.Is(%v, ErrModuleImports) is wrong", err)
			}
		})
	}
	t.Run("refused: not a module", func(t *testing.T) {
		if _, err := engine.RunModule(ctx, "x", []byte("#!/bin/sh\nrm -rf /\n"), engine.ModuleRequest{}, engine.ModuleOptions{}); err == nil {
			t.Fatal("a shell script loaded as a module")
		}
	})
	t.Run("a guest trap is a crash", func(t *testing.T) {
		res, err := run(t, wasmModule{start: []byte{0x00}, memMin: 1}, engine.ModuleRequest{}) // unreachable
		if err == nil || res.Error.Kind != airlock.KindCrash || !strings.Contains(res.Error.Message, "unreachable") {
			t.Fatalf("err %v; want a crash naming the trap", err)
		}
	})
	t.Run("an endless loop ends at the deadline", func(t *testing.T) {
		start := time.Now()
		res, err := run(t, wasmModule{start: []byte{0x03, 0x40, 0x0c, 0, 0x0b}, memMin: 1}, engine.ModuleRequest{Limits: engine.Limits{Timeout: 200 * time.Millisecond}})
		if err == nil || res.Error.Kind != airlock.KindTimeout {
			t.Fatalf("err %v; want a timeout", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the loop ran %v past a 200ms deadline", d)
		}
	})
	t.Run("memory limit below the module's minimum", func(t *testing.T) {
		res, err := run(t, wasmModule{memMin: 40}, engine.ModuleRequest{Limits: engine.Limits{Memory: 1 << 20}})
		if err == nil || res.Error.Kind != airlock.KindMemoryLimit || !strings.Contains(res.Error.Message, "minimum") {
			t.Fatalf("err %v; want a memory limit naming the module's minimum", err)
		}
	})
	t.Run("negative limits", func(t *testing.T) {
		res, err := run(t, wasmModule{memMin: 1}, engine.ModuleRequest{Limits: engine.Limits{Output: -1}})
		if err == nil || res.Error.Kind != airlock.KindInvalidRequest {
			t.Fatalf("err %v; want an invalid request", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		m, err := engine.LoadModule(ctx, "t.wasm", wasmModule{memMin: 1}.encode(), moduleCacheOpts())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if res, err := m.Run(ctx, engine.ModuleRequest{}); err != nil && !errors.Is(err, engine.ErrClosed) {
					t.Errorf("a run racing Close: %v (exit %d)", err, res.ExitCode)
				}
			})
		}
		m.Close(ctx)
		wg.Wait()
		if _, err := m.Run(ctx, engine.ModuleRequest{}); !errors.Is(err, engine.ErrClosed) {
			t.Fatalf("a run after Close: %v; want ErrClosed", err)
		}
	})
}

// pythonModule is the own build's python.wasm and its standard library,
// as files a module run gets: CPython is a WASI command like any other.
func pythonModule(t *testing.T) (wasm []byte, files map[string][]byte) {
	t.Helper()
	cache := testenv.FromEnv().CacheDir
	if cache == "" {
		var err error
		if cache, err = python.CacheDir(); err != nil {
			t.Fatal(err)
		}
	}
	dir := python.OwnDir(cache)
	wasm, err := os.ReadFile(filepath.Join(dir, "python.wasm"))
	if err != nil {
		t.Fatalf("the own build (scripts/setup.sh makes it): %v", err)
	}
	stdlib, err := os.ReadFile(filepath.Join(dir, "python313.zip"))
	if err != nil {
		t.Fatal(err)
	}
	return wasm, map[string][]byte{"/usr/local/lib/python313.zip": stdlib}
}

func TestModulePython(t *testing.T) {
	ctx := context.Background()
	wasm, files := pythonModule(t)
	m, err := engine.LoadModule(ctx, "python", wasm, moduleCacheOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)

	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "data", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "data", "sub", "in.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A host link out of the copied directory must not carry its target in.
	if err := os.Symlink(secret, filepath.Join(host, "data", "link")); err != nil {
		t.Fatal(err)
	}
	code := `
import os, sys
print(sys.argv[1:])
print(sorted(k for k in os.environ if k != "PYTHONHOME"), os.environ["GREETING"])
print(open("/mnt/data/sub/in.txt").read())
print(sorted(os.listdir("/mnt/data")))
open("/mnt/data/sub/in.txt", "w").write("overwritten in the sandbox")
os.makedirs("/out", exist_ok=True)
open("/out/result.txt", "w").write("made inside")
print(sys.stdin.read())
sys.exit(3)
`
	res, err := m.Run(ctx, engine.ModuleRequest{
		Args:  []string{"-c", code, "-x", "--flag"},
		Env:   map[string]string{"PYTHONHOME": "/usr/local", "GREETING": "hi"},
		Files: files,
		Dirs:  []engine.Dir{{Host: host, Guest: "/mnt"}},
		Stdin: []byte("from stdin"),
	})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("err %v exit %d\nstdout %s\nstderr %s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	want := "['-x', '--flag']\n['GREETING'] hi\nfrom the host\n['sub']\nfrom stdin\n"
	if string(res.Stdout) != want {
		t.Fatalf("stdout\n%s\nwant\n%s\nstderr %s", res.Stdout, want, res.Stderr)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Path] = string(f.Data)
	}
	if got["/out/result.txt"] != "made inside" || got["/mnt/data/sub/in.txt"] != "overwritten in the sandbox" || len(got) != 2 {
		t.Fatalf("files %v; want the two the program wrote", got)
	}
	if data, _ := os.ReadFile(filepath.Join(host, "data", "sub", "in.txt")); string(data) != "from the host" {
		t.Fatalf("the host's copy changed: %q", data)
	}

	t.Run("a fresh instance each run", func(t *testing.T) {
		res, err := m.Run(ctx, engine.ModuleRequest{Args: []string{"-c", "import os; print(os.path.exists('/out'))"}, Env: map[string]string{"PYTHONHOME": "/usr/local"}, Files: files})
		if err != nil || string(res.Stdout) != "False\n" {
			t.Fatalf("err %v stdout %q stderr %s", err, res.Stdout, res.Stderr)
		}
	})
	t.Run("output limit", func(t *testing.T) {
		res, err := m.Run(ctx, engine.ModuleRequest{Args: []string{"-c", "print('x' * 100000)"}, Env: map[string]string{"PYTHONHOME": "/usr/local"}, Files: files, Limits: engine.Limits{Output: 4096}})
		if err == nil || res.Error.Kind != airlock.KindOutputLimit || len(res.Stdout) > 4096 {
			t.Fatalf("err %v, %d bytes kept; want an output limit within 4096", err, len(res.Stdout))
		}
	})
	t.Run("filesystem quota on what is copied in", func(t *testing.T) {
		res, err := m.Run(ctx, engine.ModuleRequest{Files: files, Limits: engine.Limits{FSBytes: 1 << 20}})
		if err == nil || res.Error.Kind != airlock.KindFSQuota {
			t.Fatalf("err %v; want the 25 MB standard library refused by a 1 MiB quota", err)
		}
	})
	t.Run("a host file over the quota is refused unread", func(t *testing.T) {
		big := t.TempDir()
		f, err := os.Create(filepath.Join(big, "huge"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(8 << 30); err != nil { // sparse on the host: nothing to read if refused first
			t.Fatal(err)
		}
		f.Close()
		res, err := m.Run(ctx, engine.ModuleRequest{Dirs: []engine.Dir{{Host: big, Guest: "/big"}}, Limits: engine.Limits{FSBytes: 1 << 20}})
		if err == nil || res.Error.Kind != airlock.KindFSQuota || !strings.Contains(res.Error.Message, "over the filesystem quota") {
			t.Fatalf("err %v; want the 8 GiB file refused by a 1 MiB quota", err)
		}
	})
	t.Run("missing host directory", func(t *testing.T) {
		res, err := m.Run(ctx, engine.ModuleRequest{Dirs: []engine.Dir{{Host: filepath.Join(host, "nope"), Guest: "/x"}}})
		if err == nil || res.Error.Kind != airlock.KindInvalidRequest {
			t.Fatalf("err %v; want an invalid request", err)
		}
	})
}
