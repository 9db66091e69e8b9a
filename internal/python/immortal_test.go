package python

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/wasi/errno"
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
