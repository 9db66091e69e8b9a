package enginetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/backend"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// InvokeModule is a module that reaches its function table only through
// env.invoke_ii, as the C++ exception lowering's code does: it has no
// call_indirect, so on wazero, whose rewrite leaves the table empty until
// first use, only invoke_ can fill a slot. Its segment puts double (x*2)
// in slot 1 and thrower in slot 2; the table has 4 slots. _start does
//
//	r = invoke_ii(slot, 21)  // 42 for slot 1
//	invoke_ii(2, 0)          // thrower: unwind, so setThrew(1, 0)
//	exit(r + 100*threw + 10*(__stack_pointer restored))
//
// thrower moves __stack_pointer before it unwinds, as a C++ throw leaves
// it, so the +10 says invoke_ put it back. Slot 1 exits with 152.
func InvokeModule(slot int32) []byte {
	vec := func(items ...[]byte) []byte {
		return append(binary.AppendUvarint(nil, uint64(len(items))), bytes.Join(items, nil)...)
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	fn := func(locals []byte, code ...byte) []byte {
		body := append(append(locals, code...), 0x0b)
		return append(binary.AppendUvarint(nil, uint64(len(body))), body...)
	}
	i32 := func(v int32) []byte { return append([]byte{0x41}, sleb(v)...) }
	const (
		procExit, invoke, unwind   = 0, 1, 2 // imported functions
		double, thrower, setThrew  = 3, 4, 5
		start                      = 6
		stackPointer, threw        = 0, 1 // globals
		typeInvoke, typeTarget     = 0, 1
		typeStart, typeExit        = 2, 3
		typeUnwind, typeSetThrew   = 4, 5
		stackTop                   = 4096
		tableSize, targetArg       = 4, 21
		threwWeight, restoreWeight = 100, 10
	)
	startCode := cat(i32(slot), i32(targetArg), []byte{0x10, invoke, 0x21, 0}, // local.set r
		i32(2), i32(0), []byte{0x10, invoke, 0x1a}, // drop
		[]byte{0x20, 0, 0x23, threw}, i32(threwWeight), []byte{0x6c, 0x6a}, // r + threw*100
		[]byte{0x23, stackPointer}, i32(stackTop), []byte{0x46}, i32(restoreWeight), []byte{0x6c, 0x6a},
		[]byte{0x10, procExit})
	secs := []wasmbin.Section{
		{ID: wasmbin.TypeID, Body: vec(
			[]byte{0x60, 2, 0x7f, 0x7f, 1, 0x7f}, []byte{0x60, 1, 0x7f, 1, 0x7f}, []byte{0x60, 0, 0},
			[]byte{0x60, 1, 0x7f, 0}, []byte{0x60, 0, 1, 0x7f}, []byte{0x60, 2, 0x7f, 0x7f, 0})},
		{ID: wasmbin.ImportID, Body: vec(
			cat(name(wasi.ModuleName), name("proc_exit"), []byte{wasmbin.KindFunc, typeExit}),
			cat(name("env"), name("invoke_ii"), []byte{wasmbin.KindFunc, typeInvoke}),
			cat(name("airlock_eh"), name("unwind"), []byte{wasmbin.KindFunc, typeUnwind}))},
		{ID: wasmbin.FunctionID, Body: vec([]byte{typeTarget}, []byte{typeTarget}, []byte{typeSetThrew}, []byte{typeStart})},
		{ID: wasmbin.TableID, Body: vec([]byte{0x70, 0, tableSize})},
		{ID: 5, Body: vec([]byte{0, 1})}, // memory: 1 page
		{ID: wasmbin.GlobalID, Body: vec(cat([]byte{0x7f, 1}, i32(stackTop), []byte{0x0b}), cat([]byte{0x7f, 1}, i32(0), []byte{0x0b}))},
		{ID: wasmbin.ExportID, Body: wasmbin.EncodeExports([]wasmbin.Export{
			{Name: "memory", Kind: wasmbin.KindMemory}, {Name: "_start", Kind: wasmbin.KindFunc, Index: start},
			{Name: backend.StackPointerExport, Kind: wasmbin.KindGlobal, Index: stackPointer},
			{Name: backend.SetThrewExport, Kind: wasmbin.KindFunc, Index: setThrew},
			{Name: backend.TableExport, Kind: wasmbin.KindTable}})},
		{ID: wasmbin.ElementID, Body: vec(cat([]byte{0}, i32(1), []byte{0x0b}, vec([]byte{double}, []byte{thrower})))},
		{ID: wasmbin.CodeID, Body: vec(
			fn([]byte{0}, 0x20, 0, 0x41, 2, 0x6c), // local.get 0; i32.const 2; i32.mul
			fn([]byte{0}, cat(i32(0), []byte{0x24, stackPointer, 0x10, unwind, 0x1a}, i32(7))...),
			fn([]byte{0}, 0x20, 0, 0x24, threw),
			fn([]byte{1, 1, 0x7f}, startCode...))},
	}
	return wasmbin.Encode(secs)
}

// InvokeModuleExit is InvokeModule's exit status through slot 1.
const InvokeModuleExit = 152

func sleb(v int32) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// InvokeRuns checks InvokeModule on the named engine, loaded with opts:
// many fresh instances (pooled and not) call through slot 1, which nothing
// but invoke_ fills, and catch thrower's unwind; a slot that is empty, past
// the table, or negative ends the run with a TrapError wrapping
// engine.ErrInvokeTarget, not a host panic. It returns the loaded module
// of slot 1, closed when the test ends.
func InvokeRuns(t *testing.T, name string, opts engine.Options) *engine.Compiled {
	t.Helper()
	ctx := context.Background()
	opts.Engine = name
	run := func(m *engine.Compiled, unpooled bool) (engine.Outcome, error) {
		st := wasi.NewState(wasi.Config{FS: memfs.New(memfs.Options{}), Stdout: io.Discard, Stderr: io.Discard})
		defer st.Close()
		return m.Run(ctx, engine.RunSpec{WASI: st, MemoryLimit: 16 << 20, Unpooled: unpooled})
	}
	good, err := engine.Load(ctx, InvokeModule(1), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Close(ctx) })
	for i := range 50 {
		if o, err := run(good, i%2 == 1); err != nil || o.ExitCode != InvokeModuleExit {
			t.Fatalf("%s, run %d: %+v, %v; want exit %d", name, i, o, err, InvokeModuleExit)
		}
	}
	for _, slot := range []int32{0, 3, 4, 99, 1 << 20, -1} {
		m, err := engine.Load(ctx, InvokeModule(slot), opts)
		if err != nil {
			t.Fatal(err)
		}
		o, err := run(m, false)
		m.Close(ctx)
		var trap *engine.TrapError
		if !errors.As(err, &trap) || !errors.Is(err, engine.ErrInvokeTarget) {
			t.Errorf("%s: invoke_ of slot %d: %+v, %v; want a TrapError wrapping ErrInvokeTarget", name, slot, o, err)
		}
	}
	return good
}

// InvokeAfterResume checks numpy.fft's C++ exceptions (pocketfft throws,
// numpy's lowered wrapper catches through invoke_) in python.wasm resumed
// from m's image, and again from the image that run paused in, as a
// session's next call is: every resume starts with the table as the
// image's module left it, empty on wazero.
func InvokeAfterResume(t *testing.T, m *engine.Compiled) {
	t.Helper()
	ctx := context.Background()
	const throw = "from numpy.fft import _pocketfft_umath as pu\n" +
		"try:\n    pu.fft(np.zeros(4, complex), 1.0, out=np.zeros(0, complex))\nexcept RuntimeError as e:\n    print(e)\n"
	img := CaptureLoop(t, m)
	var out bytes.Buffer
	first := "import numpy as np\nkept = np.arange(4.0)\n" + throw
	o, err := m.Resume(ctx, img, engine.RunSpec{WASI: ResumedThen([]byte(first), "", &out), MemoryLimit: 256 << 20, PauseWhen: AfterCode()})
	if err != nil || o.Image == nil || out.String() != "zero-length FFT requested\n" {
		t.Fatalf("resumed from the capture: %+v, %v\n%s", o, err, out.String())
	}
	defer o.Image.Close()
	out.Reset()
	second := throw + "print(np.fft.fft(kept).real.tolist())\n"
	o2, err := m.Resume(ctx, o.Image, engine.RunSpec{WASI: Resumed([]byte(second), &out), MemoryLimit: 256 << 20})
	if want := "zero-length FFT requested\n[6.0, -2.0, -2.0, -2.0]\n"; err != nil || o2.ExitCode != 0 || out.String() != want {
		t.Fatalf("resumed from the paused run's image: %+v, %v\n%s\nwant:\n%s", o2, err, out.String(), want)
	}
}
