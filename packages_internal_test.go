package airlock

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The cache hands out the same layer, bytes and all, until the package's
// fingerprint changes: repeated requests neither re-read nor copy it.
func TestPackageCacheSharesLayer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mod")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "m.py")
	if err := os.WriteFile(file, []byte("X = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c pkgCache
	first, err := c.get(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The same path spelled differently is the same entry.
	again, err := c.get(dir + "/./")
	if err != nil || again != first || again.layer != first.layer {
		t.Fatalf("second get: %p (err %v), want the cached %p", again, err, first)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	changed, err := c.get(dir)
	if err != nil || changed == first {
		t.Fatalf("after a change: %p (err %v), want a new load", changed, err)
	}
	if len(c.entries) != 1 {
		t.Fatalf("%d cache entries, want 1 per path", len(c.entries))
	}
}

// checkZip's cap on decompression cannot be dodged by a declared size
// that wraps the running total (1 + 2^64-1 = 0), and a zip's entry count
// is capped like a directory's files, before its central directory is
// parsed into memory.
func TestCheckZipLimits(t *testing.T) {
	build := func(entries func(zw *zip.Writer)) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		entries(zw)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	wrapping := build(func(zw *zip.Writer) {
		for _, size := range []uint64{1, ^uint64(0)} {
			w, err := zw.CreateRaw(&zip.FileHeader{Name: fmt.Sprintf("m%d.py", size%7), Method: zip.Store, UncompressedSize64: size, CompressedSize64: 1})
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("x"))
		}
	})
	if err := checkZip(wrapping); err == nil || !strings.Contains(err.Error(), "decompress to more than") {
		t.Errorf("sizes that wrap the total: %v", err)
	}
	many := build(func(zw *zip.Writer) {
		for i := range maxPackageFiles + 1 {
			if _, err := zw.CreateRaw(&zip.FileHeader{Name: fmt.Sprintf("m%06d.py", i), Method: zip.Store}); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := checkZip(many); err == nil || !strings.Contains(err.Error(), "more than 100000 entries") {
		t.Errorf("%d entries: %v", maxPackageFiles+1, err)
	}
}
