package wasmbin

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Section ids this file reads or writes.
const (
	ImportID    = 2
	GlobalID    = 6
	ExportID    = 7
	DataID      = 11
	DataCountID = 12
)

// Kinds of imports and exports.
const (
	KindFunc   = 0
	KindTable  = 1
	KindMemory = 2
	KindGlobal = 3
	KindTag    = 4
)

// Export is one entry of the export section.
type Export struct {
	Name  string
	Kind  byte
	Index uint32
}

// reader walks a section body; the first error sticks and every later read
// returns zero, so callers check once at the end.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", ErrMalformed, what, r.off)
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b[r.off:])
	if k <= 0 || k > 5 || v > math.MaxUint32 {
		r.fail("bad u32")
		return 0
	}
	r.off += k
	return uint32(v)
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("length past the end")
		return nil
	}
	out := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return out
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

// count reads a vector length, refusing one that could not fit in what is
// left (every entry takes at least min bytes), so a hostile count cannot
// make a caller allocate.
func (r *reader) count(min int) uint32 {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(min) > uint64(len(r.b)-r.off) {
		r.fail("count past the end")
		return 0
	}
	return n
}

func (r *reader) done() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("trailing bytes")
	}
	return r.err
}

// DecodeExports parses an export section body.
//
// # Errors
// ErrMalformed for a truncated entry, an unknown kind or trailing bytes.
func DecodeExports(body []byte) ([]Export, error) {
	r := &reader{b: body}
	n := r.count(3)
	out := make([]Export, 0, n)
	for range n {
		e := Export{Name: r.name(), Kind: r.byte(), Index: r.u32()}
		if e.Kind > KindTag {
			r.fail("unknown export kind " + strconv.Itoa(int(e.Kind)))
		}
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, e)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return out, nil
}

// EncodeExports is the inverse of DecodeExports.
func EncodeExports(exports []Export) []byte {
	out := binary.AppendUvarint(nil, uint64(len(exports)))
	for _, e := range exports {
		out = binary.AppendUvarint(out, uint64(len(e.Name)))
		out = append(out, e.Name...)
		out = append(out, e.Kind)
		out = binary.AppendUvarint(out, uint64(e.Index))
	}
	return out
}

// GlobalType is a global's value type and mutability.
type GlobalType struct {
	ValType byte
	Mutable bool
}

// Globals lists the module's global index space: imported globals first,
// then those the global section defines.
//
// # Errors
// ErrMalformed, as Sections, or for an import or global entry that does not parse.
func Globals(wasm []byte) ([]GlobalType, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	return globalsOf(secs)
}

// globalsOf is Globals of a module's sections.
func globalsOf(secs []Section) ([]GlobalType, error) {
	var out []GlobalType
	var err error
	for _, s := range secs {
		switch s.ID {
		case ImportID:
			out, err = importedGlobals(s.Body, out)
		case GlobalID:
			out, err = definedGlobals(s.Body, out)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// importEntry is one entry of the import section; FuncType is set for
// functions, Global for globals.
type importEntry struct {
	Module, Name string
	Kind         byte
	FuncType     uint32
	Global       GlobalType
}

// decodeImports parses an import section body.
func decodeImports(body []byte) ([]importEntry, error) {
	r := &reader{b: body}
	n := r.count(4)
	out := make([]importEntry, 0, n)
	for range n {
		e := importEntry{Module: r.name(), Name: r.name(), Kind: r.byte()}
		switch e.Kind {
		case KindFunc:
			e.FuncType = r.u32()
		case KindTable:
			r.byte()
			r.limits()
		case KindMemory:
			r.limits()
		case KindGlobal:
			e.Global = GlobalType{ValType: r.byte(), Mutable: r.byte() == 1}
		case KindTag:
			r.byte()
			r.u32()
		default:
			r.fail("unknown import kind")
		}
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, e)
	}
	return out, r.done()
}

func importedGlobals(body []byte, out []GlobalType) ([]GlobalType, error) {
	imports, err := decodeImports(body)
	if err != nil {
		return nil, err
	}
	for _, e := range imports {
		if e.Kind == KindGlobal {
			out = append(out, e.Global)
		}
	}
	return out, nil
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

func definedGlobals(body []byte, out []GlobalType) ([]GlobalType, error) {
	r := &reader{b: body}
	n := r.count(3)
	for range n {
		g := GlobalType{ValType: r.byte(), Mutable: r.byte() == 1}
		r.constExpr()
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, g)
	}
	return out, r.done()
}

// constExpr skips a constant expression up to and including its end opcode,
// returning the value when it is a lone i32.const.
func (r *reader) constExpr() (v int32, isConst bool) {
	instrs := 0
	for r.err == nil {
		op := r.byte()
		switch op {
		case 0x0b: // end
			return v, isConst && instrs == 1
		case 0x41: // i32.const
			v, isConst = r.s32(), true
		case 0x42: // i64.const
			r.s64()
		case 0x43: // f32.const
			r.bytes(4)
		case 0x44: // f64.const
			r.bytes(8)
		case 0x23, 0xd2: // global.get, ref.func
			r.u32()
		case 0xd0: // ref.null
			r.byte()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended-const arithmetic
		default:
			r.fail("unsupported constant expression")
		}
		instrs++
	}
	return 0, false
}

func (r *reader) s32() int32 {
	v := r.s64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("bad s32")
	}
	return int32(v)
}

func (r *reader) s64() int64 {
	var v int64
	var shift uint
	for i := 0; r.err == nil; i++ {
		if r.off >= len(r.b) || i >= 10 {
			r.fail("bad sleb")
			return 0
		}
		c := r.b[r.off]
		r.off++
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
	return 0
}

// ExportMutableGlobals adds an export named prefix+index (say "g.0") for
// every mutable global the module defines, so a host can read and restore
// the whole mutable state of an instance. It returns the new module and the
// exported names in global-index order. Globals exported already keep their
// export and gain the new name too.
//
// # Errors
// ErrMalformed, as Globals and DecodeExports; a name that collides with an
// existing export.
func ExportMutableGlobals(wasm []byte, prefix string) ([]byte, []string, error) {
	globals, err := Globals(wasm)
	if err != nil {
		return nil, nil, err
	}
	imported, err := importedGlobalCount(wasm)
	if err != nil {
		return nil, nil, err
	}
	var add []Export
	var names []string
	for i := imported; i < len(globals); i++ {
		if !globals[i].Mutable {
			continue
		}
		name := prefix + strconv.Itoa(i)
		add = append(add, Export{Name: name, Kind: KindGlobal, Index: uint32(i)})
		names = append(names, name)
	}
	out, err := AddExports(wasm, add)
	if err != nil {
		return nil, nil, err
	}
	return out, names, nil
}

func importedGlobalCount(wasm []byte) (int, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return 0, err
	}
	for _, s := range secs {
		if s.ID == ImportID {
			g, err := importedGlobals(s.Body, nil)
			return len(g), err
		}
	}
	return 0, nil
}

// order is the position of each known section id in a module: custom
// sections may go anywhere, the others in this order (data count sits
// between import-related sections and code).
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// insertSection puts s before the first non-custom section that must follow it.
func insertSection(secs []Section, s Section) []Section {
	pos := len(secs)
	for i, x := range secs {
		if x.ID != CustomID && order[x.ID] > order[s.ID] {
			pos = i
			break
		}
	}
	out := append(secs[:pos:pos], s)
	return append(out, secs[pos:]...)
}

// Import names one imported function.
type Import struct{ Module, Name string }

// FuncImports lists the functions a module imports.
//
// # Errors
// ErrMalformed, as Sections, or for an import entry that does not parse.
func FuncImports(wasm []byte) ([]Import, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	var out []Import
	for _, s := range secs {
		if s.ID != ImportID {
			continue
		}
		entries, err := decodeImports(s.Body)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Kind == KindFunc {
				out = append(out, Import{Module: e.Module, Name: e.Name})
			}
		}
	}
	return out, nil
}

// Exports lists a module's exports.
//
// # Errors
// ErrMalformed, as Sections and DecodeExports.
func Exports(wasm []byte) ([]Export, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	var out []Export
	for _, s := range secs {
		if s.ID == ExportID {
			exports, err := DecodeExports(s.Body)
			if err != nil {
				return nil, err
			}
			out = append(out, exports...)
		}
	}
	return out, nil
}
