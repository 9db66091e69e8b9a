//go:build airlock_wasmtime && cgo && unix

package wasmtime

import (
	"bytes"
	"context"
	"testing"
	"unsafe"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/backend"
)

// peekModule exports its memory (one page at first), load(addr) -> the
// byte there, and store(addr, byte): raw access the guard must police.
func peekModule() []byte {
	sec := func(id byte, b ...byte) []byte { return append([]byte{id, byte(len(b))}, b...) }
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = append(m, sec(1, 2, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 2, 0x7f, 0x7f, 0)...) // (i32)->i32, (i32 i32)->()
	m = append(m, sec(3, 2, 0, 1)...)
	m = append(m, sec(5, 1, 0, 1)...)
	exp := append([]byte{3, 6}, "memory"...)
	exp = append(append(exp, 2, 0, 4), "load"...)
	exp = append(append(exp, 0, 0, 5), "store"...)
	m = append(m, sec(7, append(exp, 0, 1)...)...)
	load := []byte{7, 0, 0x20, 0, 0x2d, 0, 0, 0x0b}           // local.get 0; i32.load8_u; end
	store := []byte{9, 0, 0x20, 0, 0x20, 1, 0x3a, 0, 0, 0x0b} // local.get 0; local.get 1; i32.store8; end
	return append(m, sec(10, append(append([]byte{2}, load...), store...)...)...)
}

// A run resumed on wasmtime gets its memory in a pooled region, and the
// code wasmtime compiled checks no bounds: the region past the memory's
// size must fault (a trap), also where an earlier run of the same region
// had grown and written, and a reused region must read as the image again,
// zeros past it.
func TestPooledRegionTrapsPastItsMemory(t *testing.T) {
	ctx := context.Background()
	wasm := peekModule()
	code, err := loadWasmtimeModule(ctx, "peek", func() ([]byte, error) { return wasm, nil }, backend.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer code.Close(ctx)
	const page = engine.PageSize
	mem := bytes.Repeat([]byte{0x5a}, 2*page)
	img := backend.NewImage(mem)
	defer img.(*engine.Snapshot).Close()

	start := func() *wtInstance {
		t.Helper()
		// No host function is called: the run state is not needed.
		inst, err := code.Start(ctx, nil, backend.Spec{Limit: 64 << 20}, img)
		if err != nil {
			t.Fatal(err)
		}
		return inst.(*wtInstance)
	}
	load := func(i *wtInstance, addr uint32) (byte, error) {
		v, err := i.inst.GetFunc(i.store, "load").Call(i.store, int32(addr))
		if err != nil {
			return 0, err
		}
		return byte(v.(int32)), nil
	}
	store := func(i *wtInstance, addr uint32, b byte) {
		t.Helper()
		if _, err := i.inst.GetFunc(i.store, "store").Call(i.store, int32(addr), int32(b)); err != nil {
			t.Fatalf("store at %#x: %v", addr, err)
		}
	}
	expect := func(i *wtInstance, addr uint32, want byte) {
		t.Helper()
		if got, err := load(i, addr); err != nil || got != want {
			t.Fatalf("load at %#x: %#x, %v; want %#x", addr, got, err, want)
		}
	}
	expectTrap := func(i *wtInstance, addr uint32) {
		t.Helper()
		if got, err := load(i, addr); err == nil {
			t.Fatalf("load at %#x past the memory (%d bytes) read %#x; want a trap", addr, len(i.Memory()), got)
		}
	}

	// The first run learns the reservation wasmtime asks for; it maps its own.
	first := start()
	expect(first, 0, 0x5a)
	first.Close()
	if code.(*wtCode).regionSize.Load() == 0 {
		t.Fatal("no region size learned from the first run")
	}

	second := start()
	if !second.mem.pooled() {
		t.Fatal("the second run's memory is not the offered region")
	}
	base := unsafe.SliceData(second.Memory())
	expect(second, 2*page-1, 0x5a)
	expectTrap(second, 2*page)
	expectTrap(second, 1<<31)
	store(second, 100, 0x01)
	if _, ok := second.Grow(3); !ok {
		t.Fatal("grow failed")
	}
	store(second, 2*page+5, 0xab)
	store(second, 4*page+7, 0xcd)
	expectTrap(second, 5*page)
	second.Close()

	third := start()
	if !third.mem.pooled() || unsafe.SliceData(third.Memory()) != base {
		t.Fatal("the third run did not reuse the second's region")
	}
	expect(third, 100, 0x5a)
	expectTrap(third, 2*page+5) // grown and written by the second run
	expectTrap(third, 4*page+7)
	if _, ok := third.Grow(3); !ok {
		t.Fatal("grow failed")
	}
	expect(third, 2*page+5, 0)
	expect(third, 4*page+7, 0)
	expectTrap(third, 5*page)
	third.Close()
}
