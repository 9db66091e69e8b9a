//go:build airlock_wasmtime

package cpython

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enginewasmtime "github.com/airlock-sandbox/airlock/engine/wasmtime" // also registers the engine: TestCPythonInSandbox runs on it too ($AIRLOCK_ENGINE)
	"github.com/airlock-sandbox/airlock/internal/atomicfile"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/bytecodealliance/wasmtime-go/v39"
)

// TestCPythonOnWasmtimeWASI runs the same python.wasm and the same modules
// under wasmtime's own WASI (wasmtime-go's WasiConfig: host directories
// preopened, no Airlock code between the guest and the host), so that
// expected.json's wasmtime counts are measured, not remembered: the
// reference that tells a sandbox difference from a test that fails on
// any WASI. wasmtime's defaults otherwise (no fuel), but for the stack:
// with its default 512 KiB, test_json's recursion tests exhaust it and the
// trap ends the interpreter, a stack size and not WASI, so it gets the
// stack Airlock's wasmtime engine gives.
func TestCPythonOnWasmtimeWASI(t *testing.T) {
	exp := loadExpected(t)
	cache := cacheDir(t)
	dir, version := testsDir(t, cache)
	if version != exp.CPython {
		t.Fatalf("the own build is CPython %s; expected.json is for %s: re-measure and update it", version, exp.CPython)
	}
	// The build's folder holds python313.zip, which PYTHONHOME=/usr/local
	// finds at /usr/local/lib/python313.zip.
	own, err := filepath.EvalSymlinks(python.OwnDir(cache))
	if err != nil {
		t.Fatalf("these tests need the own build: run scripts/setup.sh (%v)", err)
	}
	wasm, err := os.ReadFile(filepath.Join(own, python.OwnWasm))
	if err != nil {
		t.Fatalf("these tests need the own build: run scripts/setup.sh (%v)", err)
	}
	cfg := wasmtime.NewConfig()
	cfg.SetEpochInterruption(true)
	cfg.SetMaxWasmStack(enginewasmtime.WasmStack())
	eng := wasmtime.NewEngineWithConfig(cfg)
	mod := compiled(t, eng, wasm, cache)
	for _, m := range exp.Modules {
		t.Run(m.Module, func(t *testing.T) {
			stdout, stderr, code, err := runWasmtime(t, eng, mod, own, filepath.Dir(dir), runnerCode(m, python.Home))
			if err != nil {
				t.Fatalf("%s: %v\nstderr (end):\n%s", m.Module, err, tail(stderr, 4000))
			}
			r, err := parseResult(string(stdout))
			if err != nil {
				t.Fatalf("%s: exit %d: %v\nstderr (end):\n%s", m.Module, code, err, tail(stderr, 4000))
			}
			check(t, "wasmtime", m, m.Wasmtime, r)
		})
	}
}

// compiled is python.wasm compiled for this engine configuration, cached
// in the cache dir as the sandbox's engine caches its own (a compile is
// ~40-70 s of CPU here, the modules ~60 s), keyed by the module, the
// wasmtime version and the configuration, with a trailing sha256 so a
// damaged file is compiled again rather than loaded.
func compiled(t *testing.T, eng *wasmtime.Engine, wasm []byte, cache string) *wasmtime.Module {
	t.Helper()
	h := sha256.New()
	h.Write(wasm)
	h.Write([]byte(fmt.Sprintf("\x00%s\x00epoch-interruption stack=%d", enginewasmtime.WasmtimeVersion, enginewasmtime.WasmStack())))
	path := filepath.Join(python.CompiledDir(cache), "wasmtime-wasi", hex.EncodeToString(h.Sum(nil))+".cwasm")
	if data, err := os.ReadFile(path); err == nil && len(data) > sha256.Size {
		code, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
		if want := sha256.Sum256(code); bytes.Equal(sum, want[:]) {
			if mod, err := wasmtime.NewModuleDeserialize(eng, code); err == nil {
				return mod
			}
		}
	}
	start := time.Now()
	mod, err := wasmtime.NewModule(eng, wasm)
	if err != nil {
		t.Fatalf("wasmtime compiling python.wasm: %v", err)
	}
	t.Logf("wasmtime compiled python.wasm in %s", time.Since(start).Round(time.Millisecond))
	code, err := mod.Serialize()
	if err != nil {
		t.Fatalf("serializing the compiled python.wasm: %v", err)
	}
	sum := sha256.Sum256(code)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteBytes(path, 0o600, append(code, sum[:]...)); err != nil {
		t.Logf("not cached (the next run compiles again): %v", err)
	}
	return mod
}

// runWasmtime runs python.wasm -c code with a fresh host directory as the
// guest's "/" (holding /tmp and /home/user, as the sandbox has them), the
// build's folder read-only at /usr/local/lib and Lib/test's parent
// read-only on PYTHONPATH; the environment is the sandbox's.
func runWasmtime(t *testing.T, eng *wasmtime.Engine, mod *wasmtime.Module, own, tests, code string) (stdout, stderr []byte, exit int32, err error) {
	root := t.TempDir()
	for _, d := range []string{"tmp", "home/user"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	wasi := wasmtime.NewWasiConfig()
	wasi.SetArgv([]string{"python.wasm", "-c", code})
	env := map[string]string{"PYTHONHOME": python.OwnHome, "PYTHONPATH": "/opt/cpython-tests"}
	var keys, values []string
	for _, kv := range python.DefaultEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, v := range env {
		keys, values = append(keys, k), append(values, v)
	}
	wasi.SetEnv(keys, values)
	if err := wasi.SetStdoutFile(filepath.Join(out, "stdout")); err != nil {
		t.Fatal(err)
	}
	if err := wasi.SetStderrFile(filepath.Join(out, "stderr")); err != nil {
		t.Fatal(err)
	}
	rw := func(host, guest string) {
		if err := wasi.PreopenDir(host, guest, wasmtime.DIR_READ|wasmtime.DIR_WRITE, wasmtime.FILE_READ|wasmtime.FILE_WRITE); err != nil {
			t.Fatalf("preopen %s: %v", host, err)
		}
	}
	ro := func(host, guest string) {
		if err := wasi.PreopenDir(host, guest, wasmtime.DIR_READ, wasmtime.FILE_READ); err != nil {
			t.Fatalf("preopen %s: %v", host, err)
		}
	}
	rw(root, "/")
	ro(own, "/usr/local/lib")
	ro(tests, "/opt/cpython-tests")

	store := wasmtime.NewStore(eng)
	defer store.Close()
	store.SetWasi(wasi)
	store.Limiter(int64(sandboxLimits.Memory), -1, -1, -1, -1)
	store.SetEpochDeadline(1)
	linker := wasmtime.NewLinker(eng)
	defer linker.Close()
	if err := linker.DefineWasi(); err != nil {
		t.Fatal(err)
	}
	defineOtherImports(t, linker, mod)
	inst, err := linker.Instantiate(store, mod)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	// The epoch ends a module that hangs, as the sandbox's timeout does.
	timer := time.AfterFunc(sandboxLimits.Timeout, eng.IncrementEpoch)
	_, err = inst.GetFunc(store, "_start").Call(store)
	timer.Stop()
	var werr *wasmtime.Error
	if errors.As(err, &werr) {
		if status, ok := werr.ExitStatus(); ok {
			exit, err = status, nil
		}
	}
	stdout, _ = os.ReadFile(filepath.Join(out, "stdout"))
	stderr, _ = os.ReadFile(filepath.Join(out, "stderr"))
	return stdout, stderr, exit, err
}

// defineOtherImports serves python.wasm's imports that are not WASI, the
// exception lowering's (which the engine serves and this reference does
// not use): env.invoke_SIG(slot, args...) calls the table's slot, as the
// engine's does without an exception (libc++'s iostream set-up in _start
// goes through it); anything else, and a throw, traps, ending the module,
// whose counts would then differ from expected.json's. The standard
// library's tests reach no C++ that throws.
func defineOtherImports(t *testing.T, linker *wasmtime.Linker, mod *wasmtime.Module) {
	t.Helper()
	for _, im := range mod.Imports() {
		ft := im.Type().FuncType()
		if ft == nil || im.Name() == nil || im.Module() == wasi.ModuleName {
			continue
		}
		what := im.Module() + "." + *im.Name()
		fn := func(*wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
			return nil, wasmtime.NewTrap(what + ": not provided by the plain-WASI reference run")
		}
		if strings.HasPrefix(*im.Name(), "invoke_") && len(ft.Params()) > 0 {
			fn = func(c *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
				return callSlot(c, what, args)
			}
		}
		if im.Module() == "airlock_threads" {
			// As on an engine without threads: none starts (ENOTSUP), a
			// wake finds nobody, a timed wait times out, an untimed one
			// (a deadlock on one thread) traps.
			switch *im.Name() {
			case "spawn":
				fn = func(*wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
					return []wasmtime.Val{wasmtime.ValI32(58)}, nil
				}
			case "wake":
				fn = func(*wasmtime.Caller, []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
					return []wasmtime.Val{wasmtime.ValI32(0)}, nil
				}
			case "wait":
				fn = func(_ *wasmtime.Caller, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
					if args[2].I64() < 0 {
						return nil, wasmtime.NewTrap(what + ": an untimed wait on one thread")
					}
					time.Sleep(time.Duration(args[2].I64()))
					return []wasmtime.Val{wasmtime.ValI32(1)}, nil
				}
			}
		}
		if err := linker.FuncNew(im.Module(), *im.Name(), ft, fn); err != nil {
			t.Fatalf("define %s: %v", what, err)
		}
	}
}

// callSlot calls the function in the exported table's slot args[0] with
// the rest of args.
func callSlot(c *wasmtime.Caller, what string, args []wasmtime.Val) ([]wasmtime.Val, *wasmtime.Trap) {
	x := c.GetExport("__indirect_function_table")
	if x == nil || x.Table() == nil {
		return nil, wasmtime.NewTrap(what + ": python.wasm exports no function table")
	}
	defer x.Close()
	v, err := x.Table().Get(c, uint64(uint32(args[0].I32())))
	if err != nil || v.Funcref() == nil {
		return nil, wasmtime.NewTrap(fmt.Sprintf("%s: slot %d: %v", what, args[0].I32(), err))
	}
	callArgs := make([]any, len(args)-1)
	for i, a := range args[1:] {
		callArgs[i] = a
	}
	ret, err := v.Funcref().Call(c, callArgs...)
	if err != nil {
		return nil, wasmtime.NewTrap(fmt.Sprintf("%s: %v", what, err))
	}
	switch r := ret.(type) {
	case nil:
		return nil, nil
	case int32:
		return []wasmtime.Val{wasmtime.ValI32(r)}, nil
	case int64:
		return []wasmtime.Val{wasmtime.ValI64(r)}, nil
	case float32:
		return []wasmtime.Val{wasmtime.ValF32(r)}, nil
	case float64:
		return []wasmtime.Val{wasmtime.ValF64(r)}, nil
	}
	return nil, wasmtime.NewTrap(fmt.Sprintf("%s: a result of type %T", what, ret))
}
