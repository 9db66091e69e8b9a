package wasmbin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

func vec(items ...[]byte) []byte {
	out := binary.AppendUvarint(nil, uint64(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func name(s string) []byte { return append([]byte{byte(len(s))}, s...) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// testModule has an imported immutable global (index 0), a mutable i32
// global (1) initialised to 7, an immutable one (2), a mutable i64 (3), one
// page of memory, an exported function "get" returning global 1, two
// active data segments and a passive one.
func testModule() []byte {
	return Encode([]Section{
		{ID: 1, Body: vec([]byte{0x60, 0, 1, 0x7f})}, // type 0: () -> i32
		{ID: ImportID, Body: vec(cat(name("env"), name("base"), []byte{KindGlobal, 0x7f, 0}))},
		{ID: 3, Body: vec([]byte{0})},    // func 0: type 0
		{ID: 5, Body: vec([]byte{0, 1})}, // memory: min 1
		{ID: GlobalID, Body: vec(
			[]byte{0x7f, 1, 0x41, 7, 0x0b},
			[]byte{0x7f, 0, 0x23, 0, 0x0b}, // = the imported global
			[]byte{0x7e, 1, 0x42, 0x7f, 0x0b},
		)},
		{ID: ExportID, Body: vec(cat(name("get"), []byte{KindFunc, 0}), cat(name("memory"), []byte{KindMemory, 0}))},
		{ID: DataCountID, Body: []byte{3}},
		{ID: 10, Body: vec(cat([]byte{4, 0}, []byte{0x23, 1, 0x0b}))}, // get: global.get 1
		{ID: DataID, Body: vec(
			cat([]byte{0, 0x41, 16, 0x0b}, name("hello")),
			cat([]byte{1}, name("passive")),
			cat([]byte{2, 0, 0x41, 0x80, 0x01, 0x0b}, name("world")), // offset 128
		)},
		custom("producers-ish", 1, 2),
	})
}

func TestExportsRoundTrip(t *testing.T) {
	in := []Export{{"a", KindFunc, 0}, {"", KindGlobal, 300}, {"mem", KindMemory, 0}}
	out, err := DecodeExports(EncodeExports(in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v %v", out, err)
	}
	for name, body := range map[string][]byte{
		"truncated":   EncodeExports(in)[:5],
		"bad kind":    vec(cat(name("x"), []byte{9, 0})),
		"huge count":  {0xff, 0xff, 0xff, 0xff, 0x0f},
		"trailing":    append(EncodeExports(in), 0),
		"long name":   vec(cat([]byte{50}, []byte("short"))),
		"index > u32": vec(cat(name("x"), []byte{0, 0xff, 0xff, 0xff, 0xff, 0x7f})),
	} {
		if _, err := DecodeExports(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestGlobals(t *testing.T) {
	g, err := Globals(testModule())
	want := []GlobalType{{0x7f, false}, {0x7f, true}, {0x7f, false}, {0x7e, true}}
	if err != nil || !reflect.DeepEqual(g, want) {
		t.Fatalf("Globals = %v, %v", g, err)
	}
}

// TestExportMutableGlobals checks the edited module with a real engine:
// the new exports read and write the globals the code uses.
func TestExportMutableGlobals(t *testing.T) {
	mod, names, err := ExportMutableGlobals(testModule(), "g.")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names, []string{"g.1", "g.3"}) {
		t.Fatalf("names = %v", names)
	}
	if _, _, err := ExportMutableGlobals(mod, "g."); !errors.Is(err, ErrMalformed) {
		t.Fatalf("exporting twice: err = %v", err)
	}
	ctx := context.Background()
	r := runtimeWithEnv(t)
	inst, err := r.Instantiate(ctx, mod)
	if err != nil {
		t.Fatalf("edited module does not instantiate: %v", err)
	}
	g := inst.ExportedGlobal("g.1").(api.MutableGlobal)
	if g.Get() != 7 {
		t.Fatalf("g.1 = %d", g.Get())
	}
	g.Set(42)
	if res, err := inst.ExportedFunction("get").Call(ctx); err != nil || res[0] != 42 {
		t.Fatalf("get() = %v, %v", res, err)
	}
	if inst.ExportedGlobal("g.3").Get() != ^uint64(0) {
		t.Fatalf("g.3 = %d", inst.ExportedGlobal("g.3").Get())
	}
	if b, _ := inst.Memory().Read(16, 5); string(b) != "hello" {
		t.Fatalf("data segment not applied: %q", b)
	}

	// A module without an export section gains one in the right place.
	secs, _ := Sections(testModule())
	var noExports []Section
	for _, s := range secs {
		if s.ID != ExportID {
			noExports = append(noExports, s)
		}
	}
	mod2, _, err := ExportMutableGlobals(Encode(noExports), "g.")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CompileModule(ctx, mod2); err != nil {
		t.Fatalf("inserted export section: %v", err)
	}
}

func TestDropActiveData(t *testing.T) {
	mod, segs, err := DropActiveData(testModule())
	if err != nil {
		t.Fatal(err)
	}
	want := []Segment{{16, []byte("hello")}, {128, []byte("world")}}
	if !reflect.DeepEqual(segs, want) {
		t.Fatalf("segments = %+v", segs)
	}
	ctx := context.Background()
	r := runtimeWithEnv(t)
	inst, err := r.Instantiate(ctx, mod)
	if err != nil {
		t.Fatalf("module without data does not instantiate: %v", err)
	}
	if b, _ := inst.Memory().Read(16, 5); !bytes.Equal(b, make([]byte, 5)) {
		t.Fatalf("data segment still applied: %q", b)
	}
	// No memory.init or data.drop: the emptied segments go, and the data
	// count follows.
	if data, count := dataSections(t, mod); data != string(vec(cat([]byte{1}, name("passive")))) || count != "\x01" {
		t.Errorf("data section %q, count %q", data, count)
	}
}

// With a memory.init in the code, segment indices stay: the active
// segments become empty passive ones.
func TestDropActiveDataKeepsIndicesTheCodeUses(t *testing.T) {
	secs, _ := Sections(testModule())
	for i, s := range secs {
		if s.ID == CodeID { // get: i32.const 0 (x3); memory.init 1; global.get 1
			secs[i].Body = vec(cat([]byte{14, 0}, []byte{0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 8, 1, 0, 0x23, 1, 0x0b}))
		}
	}
	mod, segs, err := DropActiveData(Encode(secs))
	if err != nil || len(segs) != 2 {
		t.Fatalf("segments %d, err %v", len(segs), err)
	}
	if data, count := dataSections(t, mod); data != string(vec([]byte{1, 0}, cat([]byte{1}, name("passive")), []byte{1, 0})) || count != "\x03" {
		t.Errorf("data section %q, count %q", data, count)
	}
	inst, err := runtimeWithEnv(t).Instantiate(context.Background(), mod)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := inst.ExportedFunction("get").Call(context.Background()); err != nil || res[0] != 7 {
		t.Fatalf("get() = %v, %v", res, err)
	}
}

// Code the package cannot decode (atomics) might use the segments: their
// indices stay, and the module is still edited.
func TestDropActiveDataKeepsIndicesPastUndecodableCode(t *testing.T) {
	secs, _ := Sections(testModule())
	for i, s := range secs {
		if s.ID == CodeID { // get: atomic.fence; global.get 1
			secs[i].Body = vec([]byte{7, 0, 0xfe, 0x03, 0x00, 0x23, 1, 0x0b})
		}
	}
	mod, segs, err := DropActiveData(Encode(secs))
	if err != nil || len(segs) != 2 {
		t.Fatalf("segments %d, err %v", len(segs), err)
	}
	if data, count := dataSections(t, mod); data != string(vec([]byte{1, 0}, cat([]byte{1}, name("passive")), []byte{1, 0})) || count != "\x03" {
		t.Errorf("data section %q, count %q", data, count)
	}
	ctx := context.Background()
	threads := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesThreads))
	defer threads.Close(ctx)
	if _, err := threads.CompileModule(ctx, mod); err != nil {
		t.Fatal(err)
	}
}

// dataSections returns the bodies of mod's data and data count sections.
func dataSections(t *testing.T, mod []byte) (data, count string) {
	t.Helper()
	secs, err := Sections(mod)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		switch s.ID {
		case DataID:
			data = string(s.Body)
		case DataCountID:
			count = string(s.Body)
		}
	}
	return data, count
}

// runtimeWithEnv is a runtime where testModule's import resolves: a tiny
// module named env exporting the global "base".
func runtimeWithEnv(t *testing.T) wazero.Runtime {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	env := Encode([]Section{
		{ID: GlobalID, Body: vec([]byte{0x7f, 0, 0x41, 5, 0x0b})},
		{ID: ExportID, Body: vec(cat(name("base"), []byte{KindGlobal, 0}))},
	})
	if _, err := r.InstantiateWithConfig(ctx, env, wazero.NewModuleConfig().WithName("env")); err != nil {
		t.Fatal(err)
	}
	return r
}

func FuzzExports(f *testing.F) {
	f.Add(EncodeExports([]Export{{"memory", KindMemory, 0}, {"_start", KindFunc, 12}}))
	f.Add([]byte{1, 1, 'x', 3, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, body []byte) {
		exports, err := DecodeExports(body)
		if err != nil {
			return
		}
		again, err := DecodeExports(EncodeExports(exports))
		if err != nil || !reflect.DeepEqual(exports, again) {
			t.Fatalf("re-encoding changed the exports: %v", err)
		}
	})
}

// FuzzModuleEdits feeds arbitrary modules to every editor: none may panic,
// and what they return must parse again with the edit in place.
func FuzzModuleEdits(f *testing.F) {
	f.Add(testModule())
	f.Add(Encode([]Section{{ID: GlobalID, Body: vec([]byte{0x7f, 1, 0x41, 0x7f, 0x0b})}}))
	f.Add(Encode([]Section{{ID: DataID, Body: vec(cat([]byte{0, 0x41, 0, 0x0b}, name("x")))}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := Globals(b); err != nil {
			return
		}
		if out, names, err := ExportMutableGlobals(b, "g."); err == nil {
			secs, err := Sections(out)
			if err != nil {
				t.Fatalf("edited module does not parse: %v", err)
			}
			found := 0
			for _, s := range secs {
				if s.ID == ExportID {
					exports, err := DecodeExports(s.Body)
					if err != nil {
						t.Fatalf("edited exports do not parse: %v", err)
					}
					for _, e := range exports {
						if e.Kind == KindGlobal && len(e.Name) > 2 && e.Name[:2] == "g." {
							found++
						}
					}
				}
			}
			if found != len(names) {
				t.Fatalf("%d global exports, want %d", found, len(names))
			}
		}
		if out, _, err := DropActiveData(b); err == nil {
			if _, _, err := DropActiveData(out); err != nil {
				t.Fatalf("dropped module does not parse: %v", err)
			}
		}
	})
}

// TestDropActiveDataWithoutDataCount: with no data count section the
// emptied segments go; passive ones stay.
func TestDropActiveDataWithoutDataCount(t *testing.T) {
	secs, _ := Sections(testModule())
	var noCount []Section
	for _, s := range secs {
		if s.ID != DataCountID {
			noCount = append(noCount, s)
		}
	}
	mod, segs, err := DropActiveData(Encode(noCount))
	if err != nil || len(segs) != 2 {
		t.Fatalf("segments %d, err %v", len(segs), err)
	}
	secs, _ = Sections(mod)
	for _, s := range secs {
		if s.ID == DataID && !bytes.Equal(s.Body, cat([]byte{1}, []byte{1}, name("passive"))) {
			t.Fatalf("data section = %q", s.Body)
		}
	}
	if _, err := runtimeWithEnv(t).CompileModule(context.Background(), mod); err != nil {
		t.Fatal(err)
	}
}
