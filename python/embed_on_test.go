//go:build airlock_embed

package python

import (
	"testing"
	"unsafe"
)

// A binary built with the embedded bundle takes it for the own build,
// whatever the cache holds, and carries its asyncified module: snapshots
// need neither the cache nor wasm-opt.
func TestEmbeddedOwnBuild(t *testing.T) {
	t.Setenv(EnvPython, "")
	if !Embedded() {
		t.Fatal("built with airlock_embed, yet Embedded() is false")
	}
	empty := t.TempDir()
	art, err := Load("", empty)
	if err != nil {
		t.Fatal(err)
	}
	if art.Build != "own" || art.Path != "" || art.Record == nil || art.Layer == nil {
		t.Fatalf("embedded build: %+v", art)
	}
	wasm, rec, err := LoadAsyncified(art, empty)
	if err != nil || rec.InputSHA256 != art.SHA256 || rec.OutputSHA256 != sha(wasm) {
		t.Fatalf("embedded asyncified module: %v, %+v", err, rec)
	}
	// Its files are the embedded bytes, not copies of them.
	base := uintptr(unsafe.Pointer(unsafe.SliceData(embeddedBundle)))
	for _, b := range [][]byte{art.Wasm, art.stdlibZip, wasm} {
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p < base || p+uintptr(len(b)) > base+uintptr(len(embeddedBundle)) {
			t.Fatal("a file of the embedded build is a copy, not the binary's own bytes")
		}
	}
	// It carries compiled code for its asyncified module (scripts/embed.sh),
	// made by a built binary: a test binary's wazero ("dev") installs none.
	if len(art.precompiled) == 0 {
		t.Fatal("the embedded build carries no compiled code")
	}
	if _, err := art.InstallPrecompiled(empty); err != nil {
		t.Fatalf("the embedded compiled code: %v", err)
	}
	again, _ := Load(SelectOwn, empty)
	if again != art {
		t.Fatal("the embedded build is checked and built again on every Load")
	}
}
