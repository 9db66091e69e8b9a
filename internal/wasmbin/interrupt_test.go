package wasmbin

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// spinModule imports env.yield and exports "spin", a function that loops
// forever, and "count", which counts to its argument in a loop and
// returns it; it has no global section.
func spinModule(extra ...byte) []byte {
	body := func(code ...byte) []byte { return append([]byte{byte(len(code) + 1), 0}, code...) }
	spin := body(0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b) // loop br 0 end end
	// (local i32) loop: local.get 1; i32.const 1; i32.add; local.tee 1;
	// local.get 0; i32.lt_s; br_if 0; end; local.get 1; end
	count := []byte{0x01, 0x01, 0x7f, 0x03, 0x40, 0x20, 0x01, 0x41, 0x01, 0x6a, 0x22, 0x01, 0x20, 0x00, 0x48, 0x0d, 0x00, 0x0b, 0x20, 0x01}
	count = append(count, extra...)
	count = append(count, 0x0b)
	count = append([]byte{byte(len(count))}, count...)
	code := append([]byte{2}, spin...)
	code = append(code, count...)
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	sec := func(id byte, b []byte) { m = append(append(m, id, byte(len(b))), b...) }
	sec(1, []byte{3, 0x60, 0, 0, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 0, 1, 0x7f}) // types
	sec(2, []byte{1, 3, 'e', 'n', 'v', 5, 'y', 'i', 'e', 'l', 'd', 0, 2})   // import env.yield: () -> i32
	sec(3, []byte{2, 0, 1})                                                 // functions
	sec(7, []byte{2, 4, 's', 'p', 'i', 'n', 0, 1, 5, 'c', 'o', 'u', 'n', 't', 0, 2})
	sec(10, code)
	return m
}

// TestAddInterruptCheckStopsLoops: the budget calls the yield import
// every period iterations, and at once when the host zeroes it; a yield
// that traps stops the loop. So too in a module with SIMD code (as LLVM
// makes a Rust crate with simd128 functions under LTO).
func TestAddInterruptCheckStopsLoops(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testStopsLoops(t, spinModule()) })
	t.Run("SIMD", func(t *testing.T) { testStopsLoops(t, spinModule(simdCode...)) })
}

func testStopsLoops(t *testing.T, module []byte) {
	wasm, err := AddInterruptCheck(module, "stop", "env", "yield", 1000)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(false))
	defer r.Close(ctx)
	var yields atomic.Int64
	var stopping atomic.Bool
	_, err = r.NewHostModuleBuilder("env").NewFunctionBuilder().WithFunc(func() int32 {
		yields.Add(1)
		if stopping.Load() {
			panic("stopped")
		}
		return 0
	}).Export("yield").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatalf("the rewritten module does not instantiate: %v", err)
	}
	// Behaviour is unchanged while the global is 0.
	if res, err := mod.ExportedFunction("count").Call(ctx, 100000); err != nil || res[0] != 100000 {
		t.Fatalf("count(100000) = %v, %v", res, err)
	}
	if n := yields.Load(); n < 99 || n > 101 {
		t.Errorf("100000 iterations with a period of 1000 yielded %d times", n)
	}
	stop := mod.ExportedGlobal("stop").(api.MutableGlobal)
	done := make(chan error)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	stopping.Store(true)
	// -1 rather than the host's 0: what a store of 0 racing the guest's
	// decrement leaves; it must still yield at the next iteration.
	stop.Set(uint64(uint32(0xffffffff)))
	select {
	case err := <-done:
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("stopped")) {
			t.Fatalf("spin ended with %v, want the yield's trap", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("setting the global did not stop the loop")
	}
}

func TestAddInterruptCheckRefusals(t *testing.T) {
	if _, err := AddInterruptCheck(spinModule(), "spin", "env", "yield", 1000); !errors.Is(err, ErrMalformed) {
		t.Errorf("export name collision: %v", err)
	}
	if _, err := AddInterruptCheck(spinModule(), "stop", "env", "other", 1000); err == nil {
		t.Error("a missing yield import was accepted")
	}
	// An opcode the SIMD proposal left unassigned (154), and relaxed SIMD
	// (256), are outside the supported set.
	for _, op := range [][]byte{{0x9a, 0x01}, {0x80, 0x02}} {
		simd := spinModule(append([]byte{0xfd}, op...)...)
		if _, err := AddInterruptCheck(simd, "stop", "env", "yield", 1000); err == nil || !bytes.Contains([]byte(err.Error()), []byte("unsupported opcode 0xfd")) {
			t.Errorf("SIMD opcode % x: %v, want an unsupported-opcode error", op, err)
		}
	}
	for i := range len(spinModule()) {
		if _, err := AddInterruptCheck(spinModule()[:i], "stop", "env", "yield", 1000); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
}

// simdCode is stack-neutral code with an instruction of each SIMD
// immediate form that needs no memory: v128.const (16 bytes), twice;
// i8x16.shuffle (16 lane bytes); i32x4.extract_lane (one lane byte); drop.
var simdCode = func() []byte {
	konst := append([]byte{0xfd, 0x0c}, make([]byte, 16)...)
	code := append(append([]byte{}, konst...), konst...)
	code = append(code, 0xfd, 0x0d)
	for lane := range byte(16) {
		code = append(code, lane)
	}
	return append(code, 0xfd, 0x1b, 0x00, 0x1a)
}()

// skipSIMD reads each immediate form to its end, whatever the bytes after.
func TestSkipSIMDImmediates(t *testing.T) {
	for _, c := range []struct {
		name string
		code []byte // after 0xfd
		size int    // bytes skipSIMD reads; 0: an error
	}{
		{"v128.load (memarg)", []byte{0x00, 0x04, 0x80, 0x01}, 4},
		{"v128.store (memarg)", []byte{0x0b, 0x04, 0x10}, 3},
		{"v128.load64_zero (memarg)", []byte{0x5d, 0x03, 0x00}, 3},
		{"v128.const", append([]byte{0x0c}, make([]byte, 16)...), 17},
		{"i8x16.shuffle", append([]byte{0x0d}, make([]byte, 16)...), 17},
		{"i8x16.extract_lane_s", []byte{0x15, 0x0f}, 2},
		{"f64x2.replace_lane", []byte{0x22, 0x01}, 2},
		{"v128.load8_lane (memarg, lane)", []byte{0x54, 0x00, 0x00, 0x07}, 4},
		{"v128.store64_lane (memarg, lane)", []byte{0x5b, 0x03, 0x08, 0x01}, 4},
		{"i8x16.swizzle", []byte{0x0e}, 1},
		{"v128.bitselect", []byte{0x52}, 1},
		{"f64x2.promote_low_f32x4 (two-byte opcode)", []byte{0x5f}, 1},
		{"i32x4.trunc_sat_f64x2_u_zero (two-byte opcode)", []byte{0xfd, 0x01}, 2},
		{"unassigned 154", []byte{0x9a, 0x01}, 0},
		{"unassigned 238", []byte{0xee, 0x01}, 0},
		{"relaxed SIMD", []byte{0x80, 0x02}, 0},
		{"v128.const, truncated", append([]byte{0x0c}, make([]byte, 15)...), 0},
	} {
		trailer := []byte{0x0b, 0x0b, 0x0b}
		r := &reader{b: append(append([]byte{}, c.code...), trailer...)}
		err := skipSIMD(r)
		if err == nil {
			err = r.err
		}
		switch {
		case c.size == 0 && err == nil && r.off <= len(c.code):
			t.Errorf("%s: read %d bytes, want an error", c.name, r.off)
		case c.size != 0 && (err != nil || r.off != c.size):
			t.Errorf("%s: read %d bytes, %v; want %d", c.name, r.off, err, c.size)
		}
	}
}

func FuzzAddInterruptCheck(f *testing.F) {
	f.Add(spinModule())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		AddInterruptCheck(wasm, "stop", "env", "yield", 1000) // must not panic
	})
}
