package wasmbin

import (
	"encoding/binary"
	"fmt"
)

// Segment is an active data segment of memory 0 at a constant offset.
type Segment struct {
	Offset uint32
	Data   []byte
}

// DropActiveData empties the module's active data segments and returns
// what they held. An instance of the result starts with zeroed memory; a
// host that restores memory from an image anyway skips writing the
// segments on every instantiation. Segments the code can refer to (it has
// a data count section and a memory.init or data.drop, or code this
// package cannot decode) become empty passive ones, keeping every index
// valid; otherwise the active segments are removed: wazero makes a slice
// entry per segment at every instantiation, ~10,400 of them for the own
// build.
//
// # Errors
// ErrMalformed for a data section that does not parse, or an active segment
// whose offset is not a constant (a relocatable module).
func DropActiveData(wasm []byte) ([]byte, []Segment, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, nil, err
	}
	keepIndices := false
	for _, s := range secs {
		if s.ID == DataCountID {
			// Code this package cannot decode (relaxed SIMD, threads) may refer to them.
			uses, err := codeUsesDataSegments(secs)
			keepIndices = uses || err != nil
		}
	}
	var segs []Segment
	kept := -1
	for i, s := range secs {
		if s.ID != DataID {
			continue
		}
		var body []byte
		if segs, body, kept, err = splitData(s.Body, segs, keepIndices); err != nil {
			return nil, nil, err
		}
		secs[i].Body = body
	}
	for i, s := range secs {
		if s.ID == DataCountID && kept >= 0 {
			secs[i].Body = binary.AppendUvarint(nil, uint64(kept))
		}
	}
	return Encode(secs), segs, nil
}

// ActiveData returns the module's active data segments.
//
// # Errors
// As DropActiveData's, for the data section.
func ActiveData(wasm []byte) ([]Segment, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	var segs []Segment
	for _, s := range secs {
		if s.ID == DataID {
			if segs, _, _, err = splitData(s.Body, segs, false); err != nil {
				return nil, err
			}
		}
	}
	return segs, nil
}

// splitData appends a data section's active segments to segs and returns
// the section without them (as empty passive segments if keepIndices),
// with the number of segments it keeps.
func splitData(section []byte, segs []Segment, keepIndices bool) ([]Segment, []byte, int, error) {
	r := &reader{b: section}
	n := r.count(2)
	kept := 0
	var body []byte
	for range n {
		flags := r.u32()
		switch flags {
		case 0, 2:
			if flags == 2 && r.u32() != 0 {
				r.fail("data segment of a memory other than 0")
			}
			off, ok := r.constExpr()
			if r.err == nil && !ok {
				r.fail("data segment offset is not an i32.const")
			}
			data := r.bytes(r.u32())
			segs = append(segs, Segment{Offset: uint32(off), Data: data})
			if keepIndices {
				body = append(body, 1, 0) // passive, empty
				kept++
			}
		case 1:
			data := r.bytes(r.u32())
			kept++
			body = append(body, 1)
			body = binary.AppendUvarint(body, uint64(len(data)))
			body = append(body, data...)
		default:
			r.fail(fmt.Sprintf("data segment flags %d", flags))
		}
		if r.err != nil {
			return nil, nil, 0, r.err
		}
	}
	if err := r.done(); err != nil {
		return nil, nil, 0, err
	}
	return segs, append(binary.AppendUvarint(nil, uint64(kept)), body...), kept, nil
}

// codeUsesDataSegments tells whether any function has a memory.init or a
// data.drop.
func codeUsesDataSegments(secs []Section) (bool, error) {
	uses := false
	for _, s := range secs {
		if s.ID != CodeID {
			continue
		}
		err := eachFunc(s.Body, func(_ uint32, code []byte) error {
			r := &reader{b: code}
			r.localDecls(r.count(2))
			for r.off < len(r.b) && r.err == nil {
				op := r.byte()
				if op == 0xfc && r.off < len(r.b) {
					if sub, _ := binary.Uvarint(r.b[r.off:]); sub == 8 || sub == 9 {
						uses = true
						return errStop
					}
				}
				if err := skipImmediates(r, op); err != nil {
					return err
				}
			}
			return r.err
		})
		if err != nil {
			return false, err
		}
	}
	return uses, nil
}
