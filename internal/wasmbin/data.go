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
// segments on every instantiation. Without a data count section the code
// cannot refer to segments (memory.init and data.drop need one), so the
// active segments are removed; with one, each becomes an empty passive
// segment, keeping every index valid.
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
		keepIndices = keepIndices || s.ID == DataCountID
	}
	var segs []Segment
	for i, s := range secs {
		if s.ID != DataID {
			continue
		}
		r := &reader{b: s.Body}
		n := r.count(2)
		kept := uint32(0)
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
				return nil, nil, r.err
			}
		}
		if err := r.done(); err != nil {
			return nil, nil, err
		}
		secs[i].Body = append(binary.AppendUvarint(nil, uint64(kept)), body...)
	}
	return Encode(secs), segs, nil
}
