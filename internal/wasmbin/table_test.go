package wasmbin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/table"
)

// tableModule has a 5-slot table that one function-index segment fills at
// 1 and 2 (with functions returning 10 and 20) and an expression segment
// fills at 3 (30) and nulls at 4, and exports "call" (i32) -> i32, which
// calls slot i and adds 1, and "tail", which tail-calls it. Options add
// sections or change the table.
func tableModule(edit ...func([]Section) []Section) []byte {
	secs := []Section{
		{ID: TypeID, Body: vec([]byte{0x60, 0, 1, 0x7f}, []byte{0x60, 1, 0x7f, 1, 0x7f})},
		{ID: FunctionID, Body: vec([]byte{0}, []byte{0}, []byte{0}, []byte{1}, []byte{1})},
		{ID: TableID, Body: vec([]byte{0x70, 1, 5, 5})},
		{ID: ExportID, Body: EncodeExports([]Export{{"call", KindFunc, 3}, {"tail", KindFunc, 4}})},
		{ID: ElementID, Body: vec(
			[]byte{0, 0x41, 1, 0x0b, 2, 0, 1},
			[]byte{4, 0x41, 3, 0x0b, 2, 0xd2, 2, 0x0b, 0xd0, 0x70, 0x0b},
		)},
		{ID: CodeID, Body: vec(
			fn(0x41, 10), fn(0x41, 20), fn(0x41, 30),
			fn(0x20, 0, 0x11, 0, 0, 0x41, 1, 0x6a), // local.get 0; call_indirect (type 0); i32.const 1; i32.add
			fn(0x20, 0, 0x13, 0, 0),                // local.get 0; return_call_indirect (type 0)
		)},
	}
	for _, e := range edit {
		secs = e(secs)
	}
	return Encode(secs)
}

// fn is a function body without locals, code followed by end.
func fn(code ...byte) []byte { return append([]byte{byte(len(code) + 2), 0}, append(code, 0x0b)...) }

func replace(id byte, body []byte) func([]Section) []Section {
	return func(secs []Section) []Section {
		for i := range secs {
			if secs[i].ID == id {
				secs[i].Body = body
			}
		}
		return secs
	}
}

// The rewritten module calls through the slots the segments filled, traps
// on an empty slot and past the table's end as the original does, and
// fills a new instance's table again.
func TestLazyTableCallsThroughTheSegments(t *testing.T) {
	ctx := context.Background()
	lazy, added, err := LazyTable(tableModule(), "")
	if err != nil || added != 5 {
		t.Fatalf("LazyTable: fill at %d, %v; want 5 (after the module's own five)", added, err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall))
	defer r.Close(ctx)
	compiled := map[string]wazero.CompiledModule{}
	for name, wasm := range map[string][]byte{"original": tableModule(), "lazy": lazy} {
		if compiled[name], err = r.CompileModule(ctx, wasm); err != nil {
			t.Fatalf("%s does not compile: %v", name, err)
		}
	}
	for round := range 2 {
		for name, c := range compiled {
			mod, err := r.InstantiateModule(ctx, c, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatal(err)
			}
			exports := []string{"call", "tail"}
			if round == 1 { // the first call through each slot a tail call
				exports = []string{"tail", "call"}
			}
			for _, export := range exports {
				f := mod.ExportedFunction(export)
				want := map[uint64]uint64{1: 10, 2: 20, 3: 30, 1 << 31: 0} // 0: traps
				if export == "call" {
					want = map[uint64]uint64{1: 11, 2: 21, 3: 31, 1 << 31: 0}
				}
				for _, slot := range []uint64{2, 1, 3, 2, 0, 4, 5, 1 << 31} {
					res, err := f.Call(ctx, slot)
					switch w, ok := want[slot]; {
					case ok && w != 0 && (err != nil || res[0] != w):
						t.Errorf("%s, instance %d: %s(%d) = %v, %v; want %d", name, round, export, slot, res, err, w)
					case (!ok || w == 0) && err == nil:
						t.Errorf("%s, instance %d: %s(%d) = %v; want a trap", name, round, export, slot, res)
					}
				}
			}
			mod.Close(ctx)
		}
	}
	secs, err := Sections(lazy)
	if err != nil {
		t.Fatal(err)
	}
	// The segments declarative, and one (type 0's trampoline, function
	// 6, after fill) active at slot 5, which the table grew by.
	for _, s := range secs {
		want := map[byte]string{
			ElementID: string(vec([]byte{3, 0, 2, 0, 1}, []byte{3, 0, 1, 2}, []byte{0, 0x41, 5, 0x0b, 1, 6})),
			TableID:   string(vec([]byte{0x70, 1, 6, 6})),
		}[s.ID]
		if want != "" && string(s.Body) != want {
			t.Errorf("section %d: % x, want % x", s.ID, s.Body, want)
		}
	}
}

// With a fill export, a module exporting its table is taken: the export
// is dropped, fill is exported, and a host reaching the table from outside
// (wazero's experimental/table, as the engine's invoke_ does) finds an
// empty slot until fill(slot) has stored the segments' function there.
// fill leaves a slot no segment fills, or one past the table, as it is.
func TestLazyTableFillExport(t *testing.T) {
	ctx := context.Background()
	exported := replace(ExportID, EncodeExports([]Export{{"call", KindFunc, 3}, {"t", KindTable, 0}}))
	for name, edit := range map[string]func([]Section) []Section{
		"table exported": exported,
		"no export section": func(secs []Section) []Section {
			return slices.DeleteFunc(secs, func(s Section) bool { return s.ID == ExportID })
		},
	} {
		lazy, added, err := LazyTable(tableModule(edit), "fill")
		if err != nil || added != 5 {
			t.Fatalf("%s: LazyTable: fill at %d, %v; want 5", name, added, err)
		}
		secs, err := Sections(lazy)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secs {
			if s.ID != ExportID {
				continue
			}
			exports, err := DecodeExports(s.Body)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range exports {
				if e.Kind == KindTable || e.Name == "fill" && (e.Kind != KindFunc || e.Index != added) {
					t.Errorf("%s: export %+v; want the table's dropped and fill's function %d", name, e, added)
				}
			}
		}
		r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall))
		mod, err := r.Instantiate(ctx, lazy)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fill := mod.ExportedFunction("fill")
		if fill == nil {
			t.Fatalf("%s: fill not exported", name)
		}
		i32 := []api.ValueType{api.ValueTypeI32}
		lookup := func(slot uint32) (f api.Function, trapped any) {
			defer func() { trapped = recover() }()
			return table.LookupFunction(mod, 0, slot, nil, i32), nil
		}
		if _, trapped := lookup(2); trapped == nil {
			t.Errorf("%s: slot 2 found before fill: the table was filled at instantiation", name)
		}
		for slot, want := range map[uint32]uint64{1: 10, 2: 20, 3: 30, 0: 0, 4: 0, 5: 0, 6: 0, 1 << 31: 0} {
			if _, err := fill.Call(ctx, uint64(slot)); err != nil {
				t.Errorf("%s: fill(%d): %v", name, slot, err)
			}
			f, trapped := lookup(slot)
			switch {
			case want == 0 && slot == 5: // type 0's trampoline, filled at instantiation
				if trapped != nil {
					t.Errorf("%s: trampoline slot 5: %v", name, trapped)
				}
			case want == 0 && trapped == nil:
				t.Errorf("%s: slot %d found after fill; want it still empty or out of the table", name, slot)
			case want != 0 && trapped != nil:
				t.Errorf("%s: slot %d after fill: %v", name, slot, trapped)
			case want != 0:
				if res, err := f.Call(ctx); err != nil || res[0] != want {
					t.Errorf("%s: slot %d = %v, %v; want %d", name, slot, res, err, want)
				}
			}
		}
		// The guest's own calls still work after the host's fills.
		if call := mod.ExportedFunction("call"); call != nil {
			if res, err := call.Call(ctx, 2); err != nil || res[0] != 21 {
				t.Errorf("%s: call(2) after fill = %v, %v; want 21", name, res, err)
			}
		} else if name == "table exported" {
			t.Errorf("%s: the module's own export is gone", name)
		}
		r.Close(ctx)
	}
	taken := replace(ExportID, EncodeExports([]Export{{"call", KindFunc, 3}, {"fill", KindFunc, 0}}))
	if _, _, err := LazyTable(tableModule(taken), "fill"); !errors.Is(err, ErrTableInUse) {
		t.Errorf("fill's name taken: %v, want ErrTableInUse", err)
	}
}

func TestLazyTableRefusals(t *testing.T) {
	twoTables := replace(TableID, vec([]byte{0x70, 0, 5}, []byte{0x70, 0, 1}))
	exported := replace(ExportID, EncodeExports([]Export{{"call", KindFunc, 3}, {"t", KindTable, 0}}))
	globalOffset := replace(ElementID, vec([]byte{0, 0x23, 0, 0x0b, 1, 0}))
	pastTheEnd := replace(ElementID, vec([]byte{0, 0x41, 4, 0x0b, 2, 0, 1}))
	tableGet := replace(CodeID, vec(fn(0x41, 10), fn(0x41, 20), fn(0x41, 30),
		fn(0x20, 0, 0x25, 0, 0x1a, 0x41, 0), // local.get 0; table.get 0; drop; i32.const 0
		fn(0x41, 0)))
	tableGrow := replace(CodeID, vec(fn(0x41, 10), fn(0x41, 20), fn(0x41, 30),
		fn(0xd0, 0x70, 0x41, 1, 0xfc, 15, 0), // ref.null func; i32.const 1; table.grow 0
		fn(0x41, 0)))
	imported := func(secs []Section) []Section {
		secs = replace(TableID, vec())(secs)
		return insertSection(secs, Section{ID: ImportID, Body: vec(cat(name("env"), name("t"), []byte{KindTable, 0x70, 0, 5}))})
	}
	noElements := func(secs []Section) []Section {
		return replace(ElementID, vec([]byte{1, 0, 1, 0}))(secs) // passive only
	}
	for name, edit := range map[string]func([]Section) []Section{
		"two tables": twoTables, "exported": exported, "global offset": globalOffset,
		"past the end": pastTheEnd, "table.get": tableGet, "table.grow": tableGrow, "imported": imported, "no active segment": noElements,
	} {
		if _, _, err := LazyTable(tableModule(edit), ""); !errors.Is(err, ErrTableInUse) {
			t.Errorf("%s: %v, want ErrTableInUse", name, err)
		}
	}
	whole := tableModule()
	for i := range len(whole) {
		if _, _, err := LazyTable(whole[:i], ""); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
	relaxed := replace(CodeID, vec(fn(0xfd, 0x80, 0x02), fn(0x41, 20), fn(0x41, 30), fn(0x41, 0), fn(0x41, 0)))
	if _, _, err := LazyTable(tableModule(relaxed), ""); err == nil || !strings.Contains(err.Error(), "unsupported opcode 0xfd") {
		t.Errorf("relaxed SIMD: %v, want an unsupported-opcode error", err)
	}
}

// A function with SIMD code, called through the table, is filled and
// called as any other.
func TestLazyTableTakesSIMD(t *testing.T) {
	withSIMD := replace(CodeID, vec(fn(append(append([]byte{}, simdCode...), 0x41, 10)...), fn(0x41, 20), fn(0x41, 30),
		fn(0x20, 0, 0x11, 0, 0, 0x41, 1, 0x6a), fn(0x20, 0, 0x13, 0, 0)))
	lazy, _, err := LazyTable(tableModule(withSIMD), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall))
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, lazy)
	if err != nil {
		t.Fatalf("the rewritten module does not instantiate: %v", err)
	}
	for slot, want := range map[uint64]uint64{1: 11, 2: 21} {
		if res, err := mod.ExportedFunction("call").Call(ctx, slot); err != nil || res[0] != want {
			t.Errorf("call(%d) = %v, %v; want %d", slot, res, err, want)
		}
	}
}

func FuzzLazyTable(f *testing.F) {
	f.Add(tableModule())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		for _, fillExport := range []string{"", "fill"} {
			out, _, err := LazyTable(wasm, fillExport) // must not panic
			if err == nil {
				if _, err := Sections(out); err != nil {
					t.Fatalf("rewritten module (fill export %q) does not parse: %v", fillExport, err)
				}
			}
		}
	})
}
