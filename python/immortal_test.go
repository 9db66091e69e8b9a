package python

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi/errno"
)

func words(ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// The immortaliser marks only what names a live object's count in
// memory; any write naming something else changes nothing at all.
func TestImmortaliserWrites(t *testing.T) {
	const immortal = 0x3fffffff
	fresh := func() []byte {
		mem := make([]byte, 64)
		binary.LittleEndian.PutUint32(mem[8:], 3)  // an object counted 3 times
		binary.LittleEndian.PutUint32(mem[16:], 1) // and one counted once
		return mem
	}
	mem := fresh()
	p := words(immortal, 8, 16)
	if n, err := (immortaliser{}).WriteMemory(context.Background(), mem, p); err != nil || n != len(p) {
		t.Fatalf("WriteMemory = %d, %v", n, err)
	}
	want := fresh()
	binary.LittleEndian.PutUint32(want[8:], immortal)
	binary.LittleEndian.PutUint32(want[16:], immortal)
	if !bytes.Equal(mem, want) {
		t.Fatalf("memory after marking: % x", mem)
	}

	for name, p := range map[string][]byte{
		"no addresses":     words(immortal),
		"a torn word":      append(words(immortal, 8), 0),
		"a zero count":     words(0, 8),
		"misaligned":       words(immortal, 8, 17),
		"past the end":     words(immortal, 8, 64),
		"wrapping around":  words(immortal, 8, 0xfffffffc),
		"no object there":  words(immortal, 8, 24), // a count of zero
		"empty":            nil,
		"the count alone":  words(immortal)[:3],
		"a misaligned end": words(immortal, 8, 60)[:10],
	} {
		mem := fresh()
		n, err := (immortaliser{}).WriteMemory(context.Background(), mem, p)
		if n != 0 || !errors.Is(err, errno.EINVAL) {
			t.Errorf("%s: WriteMemory = %d, %v; want 0, EINVAL", name, n, err)
		}
		if !bytes.Equal(mem, fresh()) {
			t.Errorf("%s: memory changed: % x", name, mem)
		}
	}
}

// The random device takes the generator's state only where memory holds
// exactly what the guest reported, just past the object's header; any
// other write is refused and leaves the image without a fresh range.
func TestRandomReportFindsTheState(t *testing.T) {
	const addr = 64
	state := make([]uint32, mtWords)
	for i := range state {
		state[i] = uint32(i)*2654435761 + 1
	}
	mem := make([]byte, 4096)
	binary.LittleEndian.PutUint32(mem[addr+8:], 17) // the index
	copy(mem[addr+12:], words(state...))
	report := func(addr, index uint32, state []uint32) []byte {
		return append(append(words(addr), words(state...)...), words(index)...)
	}
	var d randomReport
	p := report(addr, 17, state)
	if n, err := d.WriteMemory(context.Background(), mem, p); err != nil || n != len(p) {
		t.Fatalf("WriteMemory = %d, %v", n, err)
	}
	if want := (engine.Range{Addr: addr + 12, Len: 4 * mtWords}); d.state != want {
		t.Fatalf("range %+v, want %+v", d.state, want)
	}

	other := append([]uint32(nil), state...)
	other[600]++
	for name, p := range map[string][]byte{
		"another state":    report(addr, 17, other),
		"another index":    report(addr, 18, state),
		"another object":   report(addr+4, 17, state),
		"past the end":     report(4000, 17, state),
		"wrapping around":  report(0xfffffff0, 17, state),
		"too few words":    report(addr, 17, state[:623]),
		"a torn word":      append(report(addr, 17, state), 0),
		"the address only": words(addr),
		"empty":            nil,
	} {
		var d randomReport
		n, err := d.WriteMemory(context.Background(), mem, p)
		if n != 0 || !errors.Is(err, errno.EINVAL) || d.state != (engine.Range{}) {
			t.Errorf("%s: WriteMemory = %d, %v, range %+v; want 0, EINVAL, none", name, n, err, d.state)
		}
	}
}
