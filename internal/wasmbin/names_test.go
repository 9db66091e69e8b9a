package wasmbin

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// nameSection names function 0 "get" (and a local, in a subsection
// FuncIndexes skips).
func nameSection() Section {
	funcs := vec(cat([]byte{0}, name("get")))
	locals := vec(cat([]byte{0}, vec(cat([]byte{0}, name("x")))))
	body := cat(name("name"),
		[]byte{2, byte(len(locals))}, locals,
		[]byte{functionNames, byte(len(funcs))}, funcs)
	return Section{ID: CustomID, Body: body}
}

func TestFuncIndexesAndAddExports(t *testing.T) {
	secs, _ := Sections(testModule())
	mod := Encode(append(secs, nameSection()))
	found, err := FuncIndexes(mod, []string{"get", "absent"})
	if err != nil || !reflect.DeepEqual(found, map[string]uint32{"get": 0}) {
		t.Fatalf("FuncIndexes = %v, %v", found, err)
	}
	if found, err := FuncNamesMatching(mod, func(n string) bool { return n != "absent" }); err != nil || !reflect.DeepEqual(found, map[string]uint32{"get": 0}) {
		t.Fatalf("FuncNamesMatching = %v, %v", found, err)
	}
	if found, err := FuncIndexes(testModule(), []string{"get"}); err != nil || len(found) != 0 {
		t.Fatalf("without a name section: %v, %v", found, err)
	}

	out, err := AddExports(mod, []Export{{"entry.get", KindFunc, found["get"]}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddExports(out, []Export{{"entry.get", KindFunc, 0}}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("adding an export twice: err = %v", err)
	}
	ctx := context.Background()
	inst, err := runtimeWithEnv(t).Instantiate(ctx, out)
	if err != nil {
		t.Fatalf("module with the added export does not instantiate: %v", err)
	}
	if res, err := inst.ExportedFunction("entry.get").Call(ctx); err != nil || res[0] != 7 {
		t.Fatalf("entry.get() = %v, %v", res, err)
	}
}

// A name section that does not parse is an error, not a partial answer.
func TestFuncIndexesMalformed(t *testing.T) {
	secs, _ := Sections(testModule())
	for _, body := range [][]byte{
		cat(name("name"), []byte{functionNames, 9, 1}),          // subsection past the end
		cat(name("name"), []byte{functionNames, 3, 5, 0, 0x20}), // five names in three bytes
		cat(name("name"), []byte{functionNames, 4, 1, 0, 9, 'x'}),
	} {
		mod := Encode(append(secs, Section{ID: CustomID, Body: body}))
		if _, err := FuncIndexes(mod, []string{"x"}); !errors.Is(err, ErrMalformed) {
			t.Errorf("name section % x: err = %v, want ErrMalformed", body, err)
		}
	}
}

func FuzzFuncIndexes(f *testing.F) {
	f.Add(nameSection().Body)
	f.Fuzz(func(t *testing.T, body []byte) {
		secs, _ := Sections(testModule())
		mod := Encode(append(secs, Section{ID: CustomID, Body: append(name("name"), body...)}))
		_, _ = FuncIndexes(mod, []string{"get"})
	})
}
