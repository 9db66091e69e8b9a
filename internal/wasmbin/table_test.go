package wasmbin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
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
	lazy, added, err := LazyTable(tableModule())
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
		if _, _, err := LazyTable(tableModule(edit)); !errors.Is(err, ErrTableInUse) {
			t.Errorf("%s: %v, want ErrTableInUse", name, err)
		}
	}
	whole := tableModule()
	for i := range len(whole) {
		if _, _, err := LazyTable(whole[:i]); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
	simd := replace(CodeID, vec(fn(0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a)))
	if _, _, err := LazyTable(tableModule(simd)); err == nil || !strings.Contains(err.Error(), "unsupported opcode 0xfd") {
		t.Errorf("SIMD: %v, want an unsupported-opcode error", err)
	}
}

func FuzzLazyTable(f *testing.F) {
	f.Add(tableModule())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, _, err := LazyTable(wasm) // must not panic
		if err == nil {
			if _, err := Sections(out); err != nil {
				t.Fatalf("rewritten module does not parse: %v", err)
			}
		}
	})
}
