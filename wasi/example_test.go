package wasi_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// The WASI table serves a module on wazero: register Functions as the
// wasi_snapshot_preview1 host module, give each run a State in its
// context, and the guest sees a memory-only filesystem and captured
// output, nothing of the host.
func Example() {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)

	b := r.NewHostModuleBuilder(wasi.ModuleName)
	for _, f := range wasi.Functions() {
		call := f.Call
		fn := api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			mem, _ := mod.Memory().Read(0, mod.Memory().Size())
			if err := call(ctx, wasi.StateFrom(ctx), mem, stack); err != nil {
				panic(err) // a trap: proc_exit, a failed write
			}
		})
		b.NewFunctionBuilder().WithGoModuleFunction(fn, valueTypes(f.Params), valueTypes(f.Results)).Export(f.Name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		log.Fatal(err)
	}

	var stdout bytes.Buffer
	fs := memfs.New(memfs.Options{Quota: memfs.Quota{MaxBytes: 1 << 20, MaxInodes: 100}})
	state := wasi.NewState(wasi.Config{Stdout: &stdout, FS: fs})
	defer state.Close()
	// Instantiating runs the module's _start, which writes to fd 1.
	if _, err := r.InstantiateWithConfig(wasi.WithState(ctx, state), helloModule("hello from WASI\n"), wazero.NewModuleConfig()); err != nil {
		log.Fatal(err)
	}
	fmt.Print(stdout.String())
	// Output: hello from WASI
}

func valueTypes(ts []wasi.ValueType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t) // both are the binary format's type codes
	}
	return out
}

// helloModule is a WebAssembly module whose _start writes msg to fd 1
// with fd_write: an iovec at 0 points at msg at 16.
func helloModule(msg string) []byte {
	section := func(id byte, content ...byte) []byte { return append([]byte{id, byte(len(content))}, content...) }
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	var imp []byte
	imp = append(imp, 1)
	imp = append(imp, name(wasi.ModuleName)...)
	imp = append(imp, name("fd_write")...)
	imp = append(imp, 0x00, 0) // a function of type 0
	var exp []byte
	exp = append(exp, 2)
	exp = append(append(exp, name("memory")...), 0x02, 0)
	exp = append(append(exp, name("_start")...), 0x00, 1)
	data := append([]byte{16, 0, 0, 0, byte(len(msg)), 0, 0, 0}, make([]byte, 8)...) // iovec, then nwritten
	data = append(data, msg...)
	seg := append([]byte{1, 0, 0x41, 0, 0x0b, byte(len(data))}, data...)       // one active segment at 0
	body := []byte{0, 0x41, 1, 0x41, 0, 0x41, 1, 0x41, 8, 0x10, 0, 0x1a, 0x0b} // fd_write(1, 0, 1, 8); drop
	var m []byte
	m = append(m, 0x00, 'a', 's', 'm', 1, 0, 0, 0)
	m = append(m, section(1, 2, 0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 1, 0x7f, 0x60, 0, 0)...)
	m = append(m, section(2, imp...)...)
	m = append(m, section(3, 1, 1)...)
	m = append(m, section(5, 1, 0, 1)...)
	m = append(m, section(7, exp...)...)
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...)
	m = append(m, section(11, seg...)...)
	return m
}
