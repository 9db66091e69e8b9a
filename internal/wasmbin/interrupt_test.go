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
// that traps stops the loop.
func TestAddInterruptCheckStopsLoops(t *testing.T) {
	wasm, err := AddInterruptCheck(spinModule(), "stop", "env", "yield", 1000)
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
	// A SIMD instruction (v128.const) is outside the supported set.
	simd := spinModule(0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a)
	if _, err := AddInterruptCheck(simd, "stop", "env", "yield", 1000); err == nil || !bytes.Contains([]byte(err.Error()), []byte("unsupported opcode 0xfd")) {
		t.Errorf("SIMD: %v, want an unsupported-opcode error", err)
	}
	for i := range len(spinModule()) {
		if _, err := AddInterruptCheck(spinModule()[:i], "stop", "env", "yield", 1000); err == nil {
			t.Errorf("truncated at %d: no error", i)
		}
	}
}

func FuzzAddInterruptCheck(f *testing.F) {
	f.Add(spinModule())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		AddInterruptCheck(wasm, "stop", "env", "yield", 1000) // must not panic
	})
}
