package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withoutWasmOpt leaves no wasm-opt on $PATH nor in $AIRLOCK_WASM_OPT, as
// on a host that imports a bundle instead of asyncifying.
func withoutWasmOpt(t *testing.T) {
	t.Helper()
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "wasm-opt")); err != nil {
			keep = append(keep, d)
		}
	}
	t.Setenv("PATH", strings.Join(keep, string(filepath.ListSeparator)))
	t.Setenv("AIRLOCK_WASM_OPT", filepath.Join(t.TempDir(), "no-wasm-opt"))
}

// setup --export writes a bundle (gzipped for .tar.gz); setup --import
// installs it into an empty cache without wasm-opt and prepares it, so a
// run there resumes from a snapshot; a damaged bundle is refused, naming
// the file, with nothing installed.
func TestSetupExportImport(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "airlock-bundle.tar.gz")
	code, stdout, stderr := cli(t, "", "setup", "--export", bundle)
	if code != 0 || !strings.Contains(stdout, "exported "+bundle) {
		t.Fatalf("setup --export: exit %d\n%s\n%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(bundle)
	if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Fatalf("%s is not gzipped: %v", bundle, err)
	}

	withoutWasmOpt(t)
	cache := t.TempDir()
	code, stdout, stderr = cli(t, "", "setup", "--import", bundle, "--cache-dir", cache)
	if code != 0 || !strings.Contains(stdout, "imported "+bundle) || !strings.Contains(stdout, "(snapshots: true)") {
		t.Fatalf("setup --import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = cli(t, "", "version", "--cache-dir", cache)
	if code != 0 || !strings.Contains(stdout, "own build, checked against its build.json") {
		t.Fatalf("version after import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = cli(t, "", "run", "--cache-dir", cache, "--json", "-c", "print(6 * 7)")
	if code != 0 || !strings.Contains(stdout, `"stdout": "42\n"`) {
		t.Fatalf("run after import: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// Set-up there again needs no wasm-opt either, and exports the same bundle.
	again := filepath.Join(t.TempDir(), "again.tar")
	code, stdout, stderr = cli(t, "", "setup", "--cache-dir", cache, "--export", again)
	if code != 0 {
		t.Fatalf("setup --export on the importing host: exit %d\n%s\n%s", code, stdout, stderr)
	}
	plain, err := gunzip(data)
	if err != nil {
		t.Fatal(err)
	}
	reexported, _ := os.ReadFile(again)
	if !bytes.Equal(plain, reexported) {
		t.Fatal("the importing host exports another bundle than the one it imported")
	}

	// One byte of the stdlib zip flipped: refused, naming the file; the
	// cache it was to go into stays empty.
	bad := filepath.Join(t.TempDir(), "bad.tar")
	off := entryOffset(t, reexported, "python313.zip")
	reexported[off+1000] ^= 1
	os.WriteFile(bad, reexported, 0o644)
	empty := t.TempDir()
	code, _, stderr = cli(t, "", "setup", "--import", bad, "--cache-dir", empty)
	if code != exitAirlock || !strings.Contains(stderr, `entry "python313.zip": checksum mismatch`) {
		t.Fatalf("setup --import of a damaged bundle: exit %d\n%s", code, stderr)
	}
	if left, _ := os.ReadDir(empty); len(left) != 0 {
		t.Fatalf("a refused import left %v in the cache", left)
	}

	for _, args := range [][]string{
		{"setup", "--export", bundle, "--import", bundle},
		{"setup", "--import", bundle, "--python", "npm"},
		{"setup", "--export", bundle, "--snapshots=false"},
	} {
		if code, _, stderr := cli(t, "", args...); code != exitUsage {
			t.Fatalf("%q: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// entryOffset is where name's bytes start in the tar b.
func entryOffset(t *testing.T, b []byte, name string) int {
	t.Helper()
	r := bytes.NewReader(b)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the bundle: %v", name, err)
		}
		if h.Name == name {
			return len(b) - r.Len()
		}
	}
}
