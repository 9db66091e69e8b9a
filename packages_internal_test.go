package airlock

import (
	"os"
	"path/filepath"
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
