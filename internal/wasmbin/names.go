package wasmbin

import "fmt"

// functionNames is the name section's subsection that names functions.
const functionNames = 1

// FuncIndexes finds, in the module's name section, the functions called
// by names, and returns the index of each it names; a module without a
// name section gives an empty map.
//
// # Errors
// ErrMalformed, as Sections, or for a name section that does not parse.
func FuncIndexes(wasm []byte, names []string) (map[string]uint32, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	return FuncNamesMatching(wasm, func(name string) bool { return want[name] })
}

// FuncNamesMatching returns the index of every function the module's name
// section names with a name match accepts (wasm-ld's "signature_mismatch:"
// stubs, say); a module without a name section gives an empty map.
//
// # Errors
// ErrMalformed, as Sections, or for a name section that does not parse.
func FuncNamesMatching(wasm []byte, match func(name string) bool) (map[string]uint32, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	found := map[string]uint32{}
	for _, s := range secs {
		if s.Name() != "name" {
			continue
		}
		r := &reader{b: s.Body}
		r.name() // the section's own name
		for r.err == nil && r.off < len(r.b) {
			id := r.byte()
			sub := &reader{b: r.bytes(r.u32())}
			if r.err != nil || id != functionNames {
				continue
			}
			for range sub.count(2) {
				index, name := sub.u32(), sub.name()
				if sub.err == nil && match(name) {
					found[name] = index
				}
			}
			if err := sub.done(); err != nil {
				return nil, fmt.Errorf("function names: %w", err)
			}
		}
		if r.err != nil {
			return nil, fmt.Errorf("name section: %w", r.err)
		}
	}
	return found, nil
}

// AddExports returns the module with add appended to its exports.
//
// # Errors
// ErrMalformed, as Sections and DecodeExports; a name that collides with
// an existing export.
func AddExports(wasm []byte, add []Export) ([]byte, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	var exports []Export
	at := -1
	for i, s := range secs {
		if s.ID == ExportID {
			if exports, err = DecodeExports(s.Body); err != nil {
				return nil, err
			}
			at = i
		}
	}
	taken := map[string]bool{}
	for _, e := range exports {
		taken[e.Name] = true
	}
	for _, e := range add {
		if taken[e.Name] {
			return nil, fmt.Errorf("%w: export %q exists already", ErrMalformed, e.Name)
		}
		taken[e.Name] = true
	}
	body := EncodeExports(append(exports, add...))
	if at >= 0 {
		secs[at].Body = body
	} else {
		secs = insertSection(secs, Section{ID: ExportID, Body: body})
	}
	return Encode(secs), nil
}
