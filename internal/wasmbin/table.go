package wasmbin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Section ids LazyTable reads or writes, besides those of exports.go.
const (
	TypeID     = 1
	FunctionID = 3
	TableID    = 4
	ElementID  = 9
)

// ErrTableInUse reports a module whose table LazyTable cannot take over:
// the table is imported, or exported without a fill export to serve its
// reader, there is more than one, the code reads or writes it other than
// by calling through it, or an element segment is not a list of functions
// at a constant offset.
var ErrTableInUse = errors.New("wasmbin: the function table is used beyond indirect calls")

// LazyTable moves the filling of the module's function table from
// instantiation to first use. wazero evaluates every active element entry
// as a constant expression, with its allocations, each time it
// instantiates: for CPython with numpy and pandas that is 16,418 entries
// and most of an instance's start, though a run calls through a few
// hundred of them.
//
// The active segments become declarative ones (so ref.func of their
// functions stays valid and the table starts empty), a new function
// fill(i) stores the function the segments put at slot i, and every
// call_indirect (and return_call_indirect) of type T first does
//
//	local.tee t; table.get 0; ref.is_null
//	if (result i32) local.get t; global.set pending; i32.const trampoline(T)
//	else local.get t end
//
// with t a new i32 local of the calling function: a filled slot is called
// as before; an empty one calls, with the same arguments, T's trampoline,
// which fills slot pending and calls it. The trampolines (one per type
// called indirectly) sit in new slots past the table's end, filled at
// instantiation. The calling function makes no call of its own for this,
// so what it keeps live across the check stays in registers: a guard that
// called fill itself made CPython's evaluation loop spill more, and deep
// recursion ran out of wazero's stack before CPython's limit stopped it.
//
// A slot no segment fills stays null and the call traps as before, in the
// trampoline; so does a slot past the table's end, at the table.get. A
// call through a trampoline's own slot (past the old end: no pointer the
// guest made holds one) reaches the guest's own function of that type
// that pending names, as a stray pointer reaches some function: nothing
// outside the module. Element segment indices are kept. added is the index
// of fill, the first function the rewrite adds (the trampolines follow).
//
// fillExport, when not "", exports fill under that name, for a host that
// reaches the table without an export (wazero's experimental/table, which
// the engine's invoke_ uses) and so must fill a slot before it looks the
// slot up. The table's own export, if the module has one, is then dropped
// rather than refused: whatever read the table through it would see empty
// slots, and the host that has fill does not need it. With fillExport ""
// an exported table is refused, as nothing could fill it for its reader.
//
// # Errors
// ErrMalformed for bytes that do not decode; ErrTableInUse for a module
// whose table is used other than above, or that exports fillExport's name
// already, which the caller keeps as it is; an error naming the opcode for
// an instruction outside the supported set.
func LazyTable(wasm []byte, fillExport string) (out []byte, added uint32, err error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, 0, err
	}
	globals, err := globalsOf(secs)
	if err != nil {
		return nil, 0, err
	}
	m := lazyTableModule{secs: secs, pending: uint32(len(globals)), trampolines: map[uint32]uint32{}, fillExport: fillExport}
	if err := m.decode(); err != nil {
		return nil, 0, err
	}
	if len(m.slots) == 0 {
		return nil, 0, fmt.Errorf("%w: no active element segment", ErrTableInUse)
	}
	if m.span() > maxLazySpan {
		return nil, 0, fmt.Errorf("%w: filled slots spread over %d", ErrTableInUse, m.span())
	}
	m.fill = m.importedFuncs + uint32(len(m.funcTypes))
	// The code first: it names the types called indirectly, each of which
	// gets a trampoline, a function and a slot.
	var code []byte
	for _, s := range m.secs {
		if s.ID == CodeID {
			code, err = mapFuncs(s.Body, m.guardIndirectCalls)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	k := uint64(len(m.order))
	if uint64(m.tableMin)+k > maxLazySlots || m.hasMax && uint64(m.tableMax)+k > maxLazySlots {
		return nil, 0, fmt.Errorf("%w: no room for %d trampolines", ErrTableInUse, k)
	}
	fillType, typeBody := m.fillType()
	funcs := binary.AppendUvarint(nil, uint64(fillType))
	bodies := [][]byte{m.fillBody()}
	tramps := binary.AppendUvarint(nil, k)
	for i, t := range m.order {
		funcs = binary.AppendUvarint(funcs, uint64(t))
		bodies = append(bodies, m.trampolineBody(t))
		tramps = binary.AppendUvarint(tramps, uint64(m.fill)+1+uint64(i))
	}
	pending := []byte{0x7f, 1, 0x41, 0, 0x0b} // mutable i32 = 0
	hasGlobals, hasExports := false, false
	for i := range m.secs {
		sec := &m.secs[i]
		switch sec.ID {
		case ExportID:
			hasExports = true
			sec.Body, err = m.exportSection(sec.Body)
		case TypeID:
			sec.Body = typeBody
		case FunctionID:
			sec.Body, err = appendVecEntries(sec.Body, funcs, 1+len(m.order))
		case TableID:
			sec.Body = m.tableSection(uint32(k))
		case GlobalID:
			hasGlobals = true
			sec.Body, err = appendVecEntry(sec.Body, pending)
		case ElementID:
			sec.Body = m.elements
			if k > 0 { // active, past the old end
				seg := append([]byte{0, 0x41}, sleb32(int32(m.tableMin))...)
				sec.Body, err = appendVecEntry(sec.Body, append(append(seg, 0x0b), tramps...))
			}
		case CodeID:
			sec.Body = code
			for _, b := range bodies {
				if err == nil {
					sec.Body, err = appendVecEntry(sec.Body, sized(b))
				}
			}
		}
		if err != nil {
			return nil, 0, err
		}
	}
	if !hasGlobals {
		m.secs = insertSection(m.secs, Section{ID: GlobalID, Body: append([]byte{1}, pending...)})
	}
	if !hasExports && fillExport != "" {
		body, _ := m.exportSection([]byte{0})
		m.secs = insertSection(m.secs, Section{ID: ExportID, Body: body})
	}
	return Encode(m.secs), m.fill, nil
}

// exportSection is the export section body with fill exported and the
// table's export dropped, when the caller named fill's export; otherwise
// body as it is (decode refused a table export then).
func (m *lazyTableModule) exportSection(body []byte) ([]byte, error) {
	if m.fillExport == "" {
		return body, nil
	}
	exports, err := DecodeExports(body)
	if err != nil {
		return nil, err
	}
	exports = slices.DeleteFunc(exports, func(e Export) bool { return e.Kind == KindTable })
	return EncodeExports(append(exports, Export{Name: m.fillExport, Kind: KindFunc, Index: m.fill})), nil
}

// maxLazySlots bounds the table LazyTable leaves (wazero's own limit is
// 10,000,000 elements).
const maxLazySlots = 10_000_000

// appendVecEntries adds n encoded entries to a section body that is a vector.
func appendVecEntries(body, entries []byte, n int) ([]byte, error) {
	count, k := binary.Uvarint(body)
	if k <= 0 || count+uint64(n) >= 1<<32 {
		return nil, fmt.Errorf("%w: vector count", ErrMalformed)
	}
	out := binary.AppendUvarint(nil, count+uint64(n))
	out = append(out, body[k:]...)
	return append(out, entries...), nil
}

// lazyTableModule is what LazyTable reads of a module.
type lazyTableModule struct {
	secs          []Section
	types         []funcType
	importedFuncs uint32
	funcTypes     []uint32 // type index of each defined function
	tableMin      uint32   // the table's initial size
	tableMax      uint32   // and its maximum, if hasMax
	hasMax        bool
	slots         map[uint32]uint32 // table slot -> function the segments put there
	elements      []byte            // the element section, active segments made declarative
	fill          uint32            // fill's function index; the trampolines follow
	fillExport    string            // fill's export name, "" for none
	pending       uint32            // the global a guard leaves the slot in for a trampoline
	trampolines   map[uint32]uint32 // type index -> trampoline number
	order         []uint32          // the trampolines' types, by number
}

type funcType struct{ params, results []byte }

func (m *lazyTableModule) decode() error {
	var tables, codes int
	for _, s := range m.secs {
		var err error
		switch s.ID {
		case TypeID:
			m.types, err = decodeTypes(s.Body)
		case ImportID:
			var imports []importEntry
			imports, err = decodeImports(s.Body)
			for _, e := range imports {
				switch e.Kind {
				case KindFunc:
					m.importedFuncs++
				case KindTable:
					return fmt.Errorf("%w: the table is imported", ErrTableInUse)
				}
			}
		case FunctionID:
			r := &reader{b: s.Body}
			for n := r.count(1); n > 0 && r.err == nil; n-- {
				m.funcTypes = append(m.funcTypes, r.u32())
			}
			err = r.done()
		case TableID:
			r := &reader{b: s.Body}
			for n := r.count(3); n > 0 && r.err == nil; n-- {
				if r.byte() != 0x70 {
					return fmt.Errorf("%w: a table that does not hold functions", ErrTableInUse)
				}
				m.tableMin, m.tableMax, m.hasMax = r.tableLimits()
				tables++
			}
			err = r.done()
		case ExportID:
			var exports []Export
			exports, err = DecodeExports(s.Body)
			for _, e := range exports {
				switch {
				case e.Kind == KindTable && m.fillExport == "":
					return fmt.Errorf("%w: the table is exported as %q", ErrTableInUse, e.Name)
				case e.Name == m.fillExport && m.fillExport != "":
					return fmt.Errorf("%w: export %q exists already", ErrTableInUse, e.Name)
				}
			}
		case CodeID:
			codes++
		}
		if err != nil {
			return err
		}
	}
	switch {
	case tables != 1:
		return fmt.Errorf("%w: %d tables", ErrTableInUse, tables)
	case codes != 1:
		return fmt.Errorf("%w: %d code sections", ErrMalformed, codes)
	}
	for _, s := range m.secs {
		if s.ID == ElementID {
			return m.decodeElements(s.Body)
		}
	}
	return nil
}

// tableLimits reads a table's limits.
func (r *reader) tableLimits() (min, max uint32, hasMax bool) {
	flags := r.byte()
	if flags > 1 {
		r.fail("table limits other than 32-bit")
	}
	min = r.u32()
	if hasMax = flags&1 != 0; hasMax {
		max = r.u32()
	}
	return min, max, hasMax
}

// tableSection is the table section with room for k more slots.
func (m *lazyTableModule) tableSection(k uint32) []byte {
	body := []byte{1, 0x70, 0}
	if m.hasMax {
		body[2] = 1
	}
	body = binary.AppendUvarint(body, uint64(m.tableMin+k))
	if m.hasMax {
		body = binary.AppendUvarint(body, uint64(m.tableMax+k))
	}
	return body
}

// trampolineBody is the trampoline of type t: fill slot pending, then
// call it with the trampoline's own arguments.
func (m *lazyTableModule) trampolineBody(t uint32) []byte {
	g := binary.AppendUvarint(nil, uint64(m.pending))
	body := append([]byte{0, 0x23}, g...) // no locals; global.get pending
	body = append(body, 0x10)
	body = binary.AppendUvarint(body, uint64(m.fill)) // call fill
	for j := range len(m.types[t].params) {
		body = append(body, 0x20)
		body = binary.AppendUvarint(body, uint64(j))
	}
	body = append(append(body, 0x23), g...)
	body = append(body, 0x11)
	body = binary.AppendUvarint(body, uint64(t))
	return append(body, 0, 0x0b) // call_indirect t, table 0; end
}

// decodeElements records what the active segments put in the table, and
// rewrites each as a declarative segment of its functions.
func (m *lazyTableModule) decodeElements(body []byte) error {
	m.slots = map[uint32]uint32{}
	r := &reader{b: body}
	n := r.count(1)
	out := binary.AppendUvarint(nil, uint64(n))
	for range n {
		start := r.off
		flags := r.u32()
		if flags&1 != 0 { // passive or declarative: kept as it is
			r.skipElementSegment(flags)
			out = append(out, body[start:r.off]...)
			continue
		}
		if flags&2 != 0 && r.u32() != 0 {
			r.fail("element segment of a table other than 0")
		}
		offset, ok := r.constExpr()
		if r.err == nil && !ok {
			return fmt.Errorf("%w: an element segment's offset is not a constant", ErrTableInUse)
		}
		exprs := flags&4 != 0
		if flags&2 != 0 {
			want := byte(0x00) // element kind: function indices
			if exprs {
				want = 0x70 // reference type: funcref
			}
			if r.byte() != want {
				r.fail("element segment of a type other than funcref")
			}
		}
		entries := r.count(1)
		if r.err == nil && uint64(uint32(offset))+uint64(entries) > uint64(m.tableMin) {
			return fmt.Errorf("%w: an element segment past the table's end", ErrTableInUse)
		}
		var funcs []uint32
		for j := range entries {
			slot := uint32(offset) + j
			if !exprs {
				funcs = append(funcs, r.u32())
				m.slots[slot] = funcs[len(funcs)-1]
				continue
			}
			switch r.byte() { // an expression: ref.func f or ref.null func
			case 0xd2:
				funcs = append(funcs, r.u32())
				m.slots[slot] = funcs[len(funcs)-1]
			case 0xd0:
				r.byte()
				delete(m.slots, slot)
			default:
				return fmt.Errorf("%w: an element expression other than ref.func or ref.null", ErrTableInUse)
			}
			if r.byte() != 0x0b {
				r.fail("element expression not ended")
			}
		}
		if r.err != nil {
			return r.err
		}
		out = append(out, 3, 0x00) // declarative, of function indices
		out = binary.AppendUvarint(out, uint64(len(funcs)))
		for _, f := range funcs {
			out = binary.AppendUvarint(out, uint64(f))
		}
	}
	m.elements = out
	return r.done()
}

// skipElementSegment reads past a passive or declarative segment after its
// flags.
func (r *reader) skipElementSegment(flags uint32) {
	if flags > 7 {
		r.fail(fmt.Sprintf("element segment flags %d", flags))
		return
	}
	r.byte() // element kind or reference type
	for n := r.count(1); n > 0 && r.err == nil; n-- {
		if flags&4 == 0 {
			r.u32()
		} else {
			r.constExpr()
		}
	}
}

// fillType returns the index of a (i32) -> () type and the type section
// body that has it.
func (m *lazyTableModule) fillType() (uint32, []byte) {
	var body []byte
	for _, s := range m.secs {
		if s.ID == TypeID {
			body = s.Body
		}
	}
	for i, t := range m.types {
		if string(t.params) == "\x7f" && len(t.results) == 0 {
			return uint32(i), body
		}
	}
	if body == nil {
		m.secs = insertSection(m.secs, Section{ID: TypeID, Body: []byte{0}})
		body = []byte{0}
	}
	body, _ = appendVecEntry(body, []byte{0x60, 1, 0x7f, 0})
	return uint32(len(m.types)), body
}

// maxLazySpan bounds fill's br_table, which has a label per slot between
// the lowest and highest filled ones, against a sparse hostile table.
const maxLazySpan = 1 << 20

// span is the number of slots from the lowest filled one to the highest.
func (m *lazyTableModule) span() uint32 {
	low, high := uint32(1<<32-1), uint32(0)
	for s := range m.slots {
		low, high = min(low, s), max(high, s)
	}
	return high - low + 1
}

// fillBody is fill(i): a br_table over the slots from the lowest filled
// one, each case storing its function; a slot no segment fills, or one
// outside that range, returns with the table unchanged.
func (m *lazyTableModule) fillBody() []byte {
	slots := make([]uint32, 0, len(m.slots))
	for s := range m.slots {
		slots = append(slots, s)
	}
	slices.Sort(slots)
	low, span := slots[0], slots[len(slots)-1]-slots[0]+1
	body := []byte{0} // no locals
	for range span + 1 {
		body = append(body, 0x02, 0x40) // block
	}
	body = append(body, 0x20, 0, 0x41)              // local.get 0; i32.const
	body = append(body, sleb32(int32(low))...)      //   low
	body = append(body, 0x6b, 0x0e)                 // i32.sub; br_table
	body = binary.AppendUvarint(body, uint64(span)) //   span labels
	for k := range span {
		label := span // a slot no segment fills: the default
		if _, ok := m.slots[low+k]; ok {
			label = k
		}
		body = binary.AppendUvarint(body, uint64(label))
	}
	body = binary.AppendUvarint(body, uint64(span)) //   default
	for k := range span {
		body = append(body, 0x0b) // end of case k's block
		f, ok := m.slots[low+k]
		if !ok {
			continue // unreachable: its label is the default
		}
		body = append(body, 0x41) // i32.const slot; ref.func f; table.set 0; return
		body = append(body, sleb32(int32(low+k))...)
		body = append(body, 0xd2)
		body = binary.AppendUvarint(body, uint64(f))
		body = append(body, 0x26, 0, 0x0f)
	}
	return append(body, 0x0b, 0x0b) // the default block's end, the function's
}

// guardIndirectCalls appends function i's body, code, to out with every
// indirect call guarded (LazyTable), through a new local.
func (m *lazyTableModule) guardIndirectCalls(i uint32, code, out []byte) ([]byte, error) {
	if int(i) >= len(m.funcTypes) || int(m.funcTypes[i]) >= len(m.types) {
		return nil, fmt.Errorf("%w: function %d has no type", ErrMalformed, i)
	}
	r := &reader{b: code}
	groups := r.count(2)
	groupsEnd := r.off
	locals := uint64(len(m.types[m.funcTypes[i]].params)) + r.localDecls(groups)
	if r.err != nil {
		return nil, r.err
	}
	if locals >= 50000 { // wazero's own limit is lower; past it the module is not one it runs
		return nil, fmt.Errorf("%w: function %d has %d locals", ErrMalformed, i, locals)
	}
	body := r.off
	t := binary.AppendUvarint(nil, locals)
	g := binary.AppendUvarint(nil, uint64(m.pending))

	start := len(out)
	out = binary.AppendUvarint(out, uint64(groups)+1)
	out = append(out, code[groupsEnd:body]...)
	out = append(out, 1, 0x7f) // t
	guarded := false
	for r.off < len(r.b) && r.err == nil {
		at := r.off
		op := r.byte()
		switch {
		case op == 0x25 || op == 0x26:
			return nil, fmt.Errorf("%w: table.get or table.set in function %d", ErrTableInUse, i)
		case op == 0xfc && r.off < len(r.b):
			if sub, _ := binary.Uvarint(r.b[r.off:]); sub == 12 || sub == 14 || sub == 15 || sub == 17 {
				return nil, fmt.Errorf("%w: a table instruction (0xfc %d) in function %d", ErrTableInUse, sub, i)
			}
		case op == 0x11 || op == 0x13:
			typ, k := binary.Uvarint(r.b[r.off:])
			if k <= 0 || typ >= uint64(len(m.types)) {
				return nil, fmt.Errorf("%w: call_indirect of type %d in function %d", ErrMalformed, typ, i)
			}
			out = append(out, 0x22)
			out = append(out, t...)
			out = append(out, 0x25, 0, 0xd1, 0x04, 0x7f, 0x20) // table.get 0; ref.is_null; if (result i32); local.get
			out = append(out, t...)
			out = append(out, 0x24) // global.set
			out = append(out, g...)
			out = append(out, 0x41) // i32.const
			out = append(out, sleb32(int32(m.tableMin+m.trampoline(uint32(typ))))...)
			out = append(out, 0x05, 0x20) // else; local.get
			out = append(out, t...)
			out = append(out, 0x0b) // end
			guarded = true
		}
		if err := skipImmediates(r, op); err != nil {
			return nil, err
		}
		out = append(out, code[at:r.off]...)
	}
	if r.err != nil {
		return nil, r.err
	}
	if !guarded { // no indirect call: the body as it was, without t
		return append(out[:start], code...), nil
	}
	return out, nil
}

// trampoline returns the number of type t's trampoline, giving it one.
func (m *lazyTableModule) trampoline(t uint32) uint32 {
	n, ok := m.trampolines[t]
	if !ok {
		n = uint32(len(m.order))
		m.trampolines[t] = n
		m.order = append(m.order, t)
	}
	return n
}

// mapFuncs rewrites every function body of a code section with f, which
// appends function i's new body (without its size) to out.
func mapFuncs(body []byte, f func(i uint32, code, out []byte) ([]byte, error)) ([]byte, error) {
	n, _ := binary.Uvarint(body) // eachFunc checks it
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(body)/8), n)
	var fn []byte
	err := eachFunc(body, func(i uint32, code []byte) error {
		var err error
		if fn, err = f(i, code, fn[:0]); err != nil {
			return err
		}
		out = binary.AppendUvarint(out, uint64(len(fn)))
		out = append(out, fn...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachFunc calls f with every function body of a code section, in order,
// until f returns an error (errStop ends the walk without one).
func eachFunc(body []byte, f func(i uint32, code []byte) error) error {
	r := &reader{b: body}
	n := r.count(1)
	for i := uint32(0); i < n && r.err == nil; i++ {
		code := r.bytes(r.u32())
		if r.err != nil {
			break
		}
		if err := f(i, code); errors.Is(err, errStop) {
			return nil
		} else if err != nil {
			return fmt.Errorf("function %d: %w", i, err)
		}
	}
	return r.done()
}

// errStop, from eachFunc's f, ends the walk early.
var errStop = errors.New("wasmbin: stop")

// localDecls reads a function body's local declarations after their
// count, groups, and returns how many locals they declare.
func (r *reader) localDecls(groups uint32) uint64 {
	var n uint64
	for range groups {
		n += uint64(r.u32())
		r.byte()
	}
	return n
}

// sized prefixes b with its length, as code section entries are.
func sized(b []byte) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
}

// decodeTypes parses a type section body (function types only).
func decodeTypes(body []byte) ([]funcType, error) {
	r := &reader{b: body}
	n := r.count(3)
	out := make([]funcType, 0, n)
	for range n {
		if r.byte() != 0x60 {
			r.fail("not a function type")
		}
		out = append(out, funcType{params: r.bytes(r.u32()), results: r.bytes(r.u32())})
		if r.err != nil {
			return nil, r.err
		}
	}
	return out, r.done()
}
