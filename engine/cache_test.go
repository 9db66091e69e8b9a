package engine_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
)

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
