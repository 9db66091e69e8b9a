package engine_test

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/engine"
	"github.com/airlock-sandbox/airlock/internal/wasi"
	"github.com/airlock-sandbox/airlock/internal/wasi/memfs"
)

// exitModule is a module whose _start calls proc_exit(code); with other,
// a function before _start exits with other instead.
func exitModule(code int32, other ...int32) []byte {
	sleb := func(v int32) []byte {
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
	sec := func(id byte, b ...byte) []byte { return append([]byte{id, byte(len(b))}, b...) }
	body := func(c int32) []byte {
		b := append(append([]byte{0, 0x41}, sleb(c)...), 0x10, 0, 0x0b)
		return append([]byte{byte(len(b))}, b...)
	}
	funcs, bodies := []byte{1, 1}, append([]byte{1}, body(code)...)
	start := byte(1) // function index: the import is 0
	for _, c := range other {
		funcs, bodies, start = []byte{2, 1, 1}, append(append([]byte{2}, body(c)...), bodies[1:]...), 2
	}
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = append(m, sec(1, 2, 0x60, 1, 0x7f, 0, 0x60, 0, 0)...)
	imp := append([]byte{1, 22}, "wasi_snapshot_preview1"...)
	imp = append(append(append(imp, 9), "proc_exit"...), 0, 0)
	m = append(m, sec(2, imp...)...)
	m = append(m, sec(3, funcs...)...)
	m = append(m, sec(5, 1, 0, 1)...)
	exp := append([]byte{2, 6}, "memory"...)
	exp = append(append(append(exp, 2, 0, 6), "_start"...), 0, start)
	m = append(m, sec(7, exp...)...)
	return append(m, sec(10, bodies...)...)
}

// runExit loads wasm with opts and returns its exit code.
func runExit(t *testing.T, wasm []byte, opts engine.Options) uint32 {
	t.Helper()
	ctx := context.Background()
	m, err := engine.Load(ctx, wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	st := wasi.NewState(wasi.Config{FS: memfs.New(memfs.Options{}), Stdout: io.Discard, Stderr: io.Discard})
	defer st.Close()
	o, err := m.Run(ctx, engine.RunSpec{WASI: st, MemoryLimit: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return o.ExitCode
}

// wazero's cache file checks its code with a CRC but not the function
// offsets before it: pointing _start's offset at the other function made
// it run that function's code. Load finds the file changed and compiles
// again.
func TestWazeroCacheRefusesADamagedFile(t *testing.T) {
	wasm := exitModule(222, 111)
	dir := t.TempDir()
	opts := engine.Options{CacheDir: dir}
	if got := runExit(t, wasm, opts); got != 222 {
		t.Fatalf("exit %d", got)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	data, _ := os.ReadFile(files[0])
	if len(data) < 16 || string(data[:6]) != "WAZEVO" {
		t.Fatalf("not a wazero cache file: %.16q", data)
	}
	hdr := 6 + 1 + int(data[6]) + 4 // magic, version, function count
	n := int(binary.LittleEndian.Uint32(data[hdr-4:]))
	if n != 2 {
		t.Fatalf("%d functions in the cache file", n)
	}
	copy(data[hdr+8:hdr+16], data[hdr:hdr+8]) // _start's code offset := the other's
	if err := os.WriteFile(files[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := runExit(t, wasm, opts); got != 222 {
		t.Fatalf("a damaged cache file ran: exit %d, want 222", got)
	}
}
