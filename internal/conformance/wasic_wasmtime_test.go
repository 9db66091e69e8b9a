//go:build airlock_wasmtime

package airlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bytecodealliance/wasmtime-go/v39"
)

// TestWASICWasmtime runs the conformance programs under wasmtime's own
// WASI (not Airlock's), with a fresh host directory preopened as "/":
// every expectation the programs hold is wasmtime's answer, or says why
// Airlock deliberately differs (CONFORMANCE_HOST).
func TestWASICWasmtime(t *testing.T) {
	engine := wasmtime.NewEngine()
	for _, p := range wasicPrograms(t) {
		t.Run(p.name, func(t *testing.T) {
			exit, stdout, stderr := runWasmtimeWASI(t, engine, p)
			if testing.Verbose() {
				t.Logf("%s", stdout)
			}
			wasicReport(t, p, exit, stdout, stderr)
		})
	}
}

func runWasmtimeWASI(t *testing.T, engine *wasmtime.Engine, p wasicProgram) (int, []byte, []byte) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	stdin, stdout, stderr := filepath.Join(dir, "stdin"), filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	if err := os.WriteFile(stdin, p.stdin, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := wasmtime.NewWasiConfig()
	cfg.SetArgv(append([]string{p.name + ".wasm"}, p.args...))
	keys, vals := []string{"CONFORMANCE_HOST"}, []string{"wasmtime"}
	for k, v := range p.env {
		keys, vals = append(keys, k), append(vals, v)
	}
	cfg.SetEnv(keys, vals)
	for _, err := range []error{
		cfg.SetStdinFile(stdin), cfg.SetStdoutFile(stdout), cfg.SetStderrFile(stderr),
		cfg.PreopenDir(root, "/", wasmtime.DIR_READ|wasmtime.DIR_WRITE, wasmtime.FILE_READ|wasmtime.FILE_WRITE),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	store := wasmtime.NewStore(engine)
	defer store.Close()
	store.SetWasi(cfg)
	linker := wasmtime.NewLinker(engine)
	if err := linker.DefineWasi(); err != nil {
		t.Fatal(err)
	}
	mod, err := wasmtime.NewModule(engine, p.wasm)
	if err != nil {
		t.Fatalf("compile %s: %v", p.name, err)
	}
	inst, err := linker.Instantiate(store, mod)
	if err != nil {
		t.Fatalf("instantiate %s: %v", p.name, err)
	}
	exit := 0
	if _, err := inst.GetFunc(store, "_start").Call(store); err != nil {
		var we *wasmtime.Error
		code, ok := int32(0), false
		if errors.As(err, &we) {
			code, ok = we.ExitStatus()
		}
		if !ok {
			out, _ := os.ReadFile(stdout)
			t.Fatalf("%s trapped under wasmtime: %v\nstdout: %s", p.name, err, out)
		}
		exit = int(code)
	}
	out, err := os.ReadFile(stdout)
	if err != nil {
		t.Fatal(err)
	}
	errOut, _ := os.ReadFile(stderr)
	return exit, out, errOut
}
