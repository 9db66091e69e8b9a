package wasmbin

import (
	"encoding/binary"
	"fmt"
)

// CodeID is the code section's id.
const CodeID = 10

// AddInterruptCheck gives every loop of the module a budget: a new mutable
// i32 global, exported as exportName, that each iteration decrements;
// when it reaches zero it is refilled with period and the module's import
// yieldModule.yieldName (a () -> i32 function, such as WASI's sched_yield)
// is called, its result dropped. The host thus gets control at least
// every period iterations of any loop, and can set the budget to zero to
// get it at the next iteration: a guest stuck in a loop can be stopped,
// and a goroutine spinning in compiled code yields to the Go scheduler,
// at the cost of a few instructions per iteration rather than a call into
// the runtime at each.
//
// The rewrite decodes every instruction, so it refuses opcodes it does not
// know (threads, exceptions, relaxed SIMD), leaving the caller to stop
// guests some other way.
//
// # Errors
// ErrMalformed for bytes that do not decode; an error naming the opcode
// for an instruction outside the supported set; a name that collides
// with an existing export.
func AddInterruptCheck(wasm []byte, exportName, yieldModule, yieldName string, period int32) ([]byte, error) {
	secs, err := Sections(wasm)
	if err != nil {
		return nil, err
	}
	globals, err := globalsOf(secs)
	if err != nil {
		return nil, err
	}
	yield, err := findYield(secs, yieldModule, yieldName)
	if err != nil {
		return nil, err
	}
	index := uint32(len(globals)) // imported and defined globals come first
	g := binary.AppendUvarint(nil, uint64(index))
	n := sleb32(period)
	// if (budget < 1) { budget = period; drop(yield()) } budget -= 1
	// (< 1, not == 0: a host store of 0 racing the decrement leaves -1.)
	check := append([]byte{0x23}, g...)
	check = append(check, 0x41, 0x01, 0x48, 0x04, 0x40, 0x41)
	check = append(check, n...)
	check = append(append(check, 0x24), g...)
	check = append(append(check, 0x10), binary.AppendUvarint(nil, uint64(yield))...)
	check = append(check, 0x1a, 0x0b, 0x23)
	check = append(check, g...)
	check = append(check, 0x41, 0x01, 0x6b, 0x24)
	check = append(check, g...)
	initial := append([]byte{0x7f, 0x01, 0x41}, n...)
	initial = append(initial, 0x0b)

	var hasGlobals, hasExports, hasCode bool
	for i := range secs {
		switch secs[i].ID {
		case GlobalID:
			hasGlobals = true
			secs[i].Body, err = appendVecEntry(secs[i].Body, initial)
		case ExportID:
			hasExports = true
			var exports []Export
			if exports, err = DecodeExports(secs[i].Body); err == nil {
				for _, e := range exports {
					if e.Name == exportName {
						return nil, fmt.Errorf("%w: export %q exists already", ErrMalformed, exportName)
					}
				}
				exports = append(exports, Export{Name: exportName, Kind: KindGlobal, Index: index})
				secs[i].Body = EncodeExports(exports)
			}
		case CodeID:
			hasCode = true
			secs[i].Body, err = instrumentCode(secs[i].Body, check)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasCode {
		return nil, fmt.Errorf("%w: no code section", ErrMalformed)
	}
	if !hasGlobals {
		secs = insertSection(secs, Section{ID: GlobalID, Body: append([]byte{1}, initial...)})
	}
	if !hasExports {
		secs = insertSection(secs, Section{ID: ExportID, Body: EncodeExports([]Export{{Name: exportName, Kind: KindGlobal, Index: index}})})
	}
	return Encode(secs), nil
}

// appendVecEntry adds one encoded entry to a section body that is a vector.
func appendVecEntry(body, entry []byte) ([]byte, error) {
	return appendVecEntries(body, entry, 1)
}

// instrumentCode inserts check after the block type of every loop in
// every function body of a code section.
func instrumentCode(body, check []byte) ([]byte, error) {
	return mapFuncs(body, func(_ uint32, code, out []byte) ([]byte, error) {
		return instrumentFunc(out, code, check)
	})
}

func instrumentFunc(out, code, check []byte) ([]byte, error) {
	r := &reader{b: code}
	r.localDecls(r.count(2))
	if r.err != nil {
		return nil, r.err
	}
	out = append(out, code[:r.off]...)
	for r.off < len(r.b) && r.err == nil {
		start := r.off
		op := r.byte()
		if err := skipImmediates(r, op); err != nil {
			return nil, err
		}
		out = append(out, code[start:r.off]...)
		if op == 0x03 && r.err == nil { // loop
			out = append(out, check...)
		}
	}
	return out, r.err
}

// skipImmediates reads past op's immediates (the WebAssembly 2.0 core set,
// fixed-width SIMD included, plus tail calls).
func skipImmediates(r *reader, op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c || op == 0x0d, op == 0x10, op == 0x12, // br, br_if, call, return_call
		op >= 0x20 && op <= 0x26, op == 0xd2: // locals, globals, table.get/set, ref.func
		r.u32()
	case op == 0x0e: // br_table
		for n := r.count(1); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		for n := r.count(1); n > 0 && r.err == nil; n-- {
			r.byte()
		}
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		r.u32()
		r.u32()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41: // i32.const
		r.leb(5)
	case op == 0x42: // i64.const
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null t
		r.byte()
	case op == 0xfc:
		return skipPrefixed(r)
	case op == 0xfd:
		return skipSIMD(r)
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, // unreachable, nop, else, end, return, drop, select
		op >= 0x45 && op <= 0xc4, op == 0xd1: // numeric, ref.is_null
	default:
		return fmt.Errorf("unsupported opcode %#x at byte %d", op, r.off-1)
	}
	return nil
}

// skipPrefixed reads past a 0xfc instruction (saturating truncation, bulk
// memory, table operations).
func skipPrefixed(r *reader) error {
	switch sub := r.u32(); {
	case sub <= 7:
	case sub == 8, sub == 12, sub == 14: // memory.init, table.init, table.copy
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10: // memory.copy
		r.u32()
		r.u32()
	default:
		return fmt.Errorf("unsupported opcode 0xfc %d at byte %d", sub, r.off)
	}
	return nil
}

// skipSIMD reads past a 0xfd instruction: fixed-width SIMD, which LLVM
// emits for a whole module once any function in it enables simd128 (fat
// LTO of a Rust crate whose dependencies, memchr and bytecount in orjson,
// have such functions: v128 stores then initialise ordinary structs).
// Opcodes the proposal left unassigned, and relaxed SIMD, are refused.
func skipSIMD(r *reader) error {
	switch sub := r.u32(); {
	case sub <= 11, sub == 92, sub == 93: // loads, v128.store, load zero: memarg
		r.u32()
		r.u32()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane: memarg, lane
		r.u32()
		r.u32()
		r.byte()
	case sub > 255 || unassignedSIMD[sub]:
		return fmt.Errorf("unsupported opcode 0xfd %d at byte %d", sub, r.off)
	}
	return nil
}

// unassignedSIMD holds the gaps in the SIMD proposal's opcodes up to 255.
var unassignedSIMD = func() (gaps [256]bool) {
	for _, op := range []int{154, 162, 165, 166, 175, 176, 178, 179, 180, 187, 194, 197, 198, 207, 208, 210, 211, 212, 226, 238} {
		gaps[op] = true
	}
	return gaps
}()

// blockType reads a block type: empty (0x40), a value type, or a type
// index (a positive s33).
func (r *reader) blockType() {
	if r.err != nil || r.off >= len(r.b) {
		r.fail("unexpected end")
		return
	}
	switch c := r.b[r.off]; {
	case c == 0x40, c >= 0x6f && c <= 0x7f:
		r.off++
	default:
		r.leb(5)
	}
}

// leb skips a LEB128 number of at most max bytes (signed or not).
func (r *reader) leb(max int) {
	for i := 0; i < max; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail("LEB128 too long")
}

// sleb32 encodes v as a signed LEB128.
func sleb32(v int32) []byte {
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

// findYield returns the function index of the import module.name, which
// must have type () -> i32.
func findYield(secs []Section, module, name string) (uint32, error) {
	var types []funcType
	for _, s := range secs {
		if s.ID == TypeID {
			var err error
			if types, err = decodeTypes(s.Body); err != nil {
				return 0, err
			}
		}
	}
	for _, s := range secs {
		if s.ID != ImportID {
			continue
		}
		imports, err := decodeImports(s.Body)
		if err != nil {
			return 0, err
		}
		funcs := uint32(0)
		for _, e := range imports {
			if e.Kind != KindFunc {
				continue
			}
			if e.Module == module && e.Name == name {
				t := e.FuncType
				if int(t) >= len(types) || len(types[t].params) != 0 || string(types[t].results) != "\x7f" {
					return 0, fmt.Errorf("%w: %s.%s is not () -> i32", ErrMalformed, module, name)
				}
				return funcs, nil
			}
			funcs++
		}
	}
	return 0, fmt.Errorf("the module does not import %s.%s", module, name)
}
