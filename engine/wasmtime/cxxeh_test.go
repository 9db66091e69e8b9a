//go:build airlock_wasmtime && cgo && unix

package wasmtime_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	wasmtime "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// invokeAfterTableSet is a guest that calls slot 0 through invoke_ii, so
// the slot's function is checked and kept, then puts REPLACEMENT in the
// slot with table.set and calls it again; it exits with 10 * the first
// result + the second.
const invokeAfterTableSet = `(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (import "env" "invoke_ii" (func $invoke_ii (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global (export "__stack_pointer") (mut i32) (i32.const 1024))
  (table $t (export "__indirect_function_table") 1 funcref)
  (elem (i32.const 0) $plus1)
  (elem declare func $times10 $other_type)
  (func $plus1 (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func $times10 (param i32) (result i32) (i32.mul (local.get 0) (i32.const 10)))
  (func $other_type (param i64) (result i32) (i32.const 99))
  (func (export "setThrew") (param i32 i32))
  (func (export "_start")
    (local $first i32)
    (local.set $first (call $invoke_ii (i32.const 0) (i32.const 4)))
    (table.set $t (i32.const 0) REPLACEMENT)
    (call $exit (i32.add (i32.mul (local.get $first) (i32.const 10))
      (call $invoke_ii (i32.const 0) (i32.const 4))))))`

// invoke_ keeps the functions it checked, per slot; a slot the guest
// changed since is never called as it was: a function of the call's type
// is called, and one of another type, or none, is refused as at the first
// call.
func TestInvokeSeesTableSet(t *testing.T) {
	for _, c := range []struct {
		replacement string
		exit        uint32 // 0: refused with ErrInvokeTarget
	}{
		{"(ref.func $plus1)", 55},
		{"(ref.func $times10)", 90},
		{"(ref.func $other_type)", 0},
		{"(ref.null func)", 0},
	} {
		wasm, err := wasmtime.Wat2Wasm(strings.Replace(invokeAfterTableSet, "REPLACEMENT", c.replacement, 1))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		m, err := engine.Load(ctx, wasm, engine.Options{Engine: engine.EngineWasmtime})
		if err != nil {
			t.Fatal(err)
		}
		st := wasi.NewState(wasi.Config{FS: memfs.New(memfs.Options{}), Stdout: io.Discard, Stderr: io.Discard})
		o, err := m.Run(ctx, engine.RunSpec{WASI: st, MemoryLimit: 16 << 20})
		st.Close()
		m.Close(ctx)
		if c.exit == 0 {
			if !errors.Is(err, engine.ErrInvokeTarget) {
				t.Errorf("slot set to %s: %v, exit %d; want ErrInvokeTarget", c.replacement, err, o.ExitCode)
			}
		} else if err != nil || o.ExitCode != c.exit {
			t.Errorf("slot set to %s: %v, exit %d; want exit %d", c.replacement, err, o.ExitCode, c.exit)
		}
	}
}
