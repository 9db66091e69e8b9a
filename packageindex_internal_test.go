package airlock

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The cache of installed wheels' layers stays within its byte bound,
// dropping the least recently used.
func TestIndexLayersAreBounded(t *testing.T) {
	old := maxIndexLayerBytes
	maxIndexLayerBytes = 3000
	defer func() { maxIndexLayerBytes = old }()
	dir := t.TempDir()
	var paths []string
	for i := range 5 {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("p%d/__init__.py", i), Method: zip.Store})
		w.Write([]byte(strings.Repeat("#", 800)))
		zw.Close()
		p := filepath.Join(dir, fmt.Sprintf("p%d-1.0-py3-none-any.whl", i))
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	var c indexLayers
	for _, p := range paths[:3] {
		if _, err := c.get(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.get(paths[0]); err != nil { // used again: kept over paths[1]
		t.Fatal(err)
	}
	for _, p := range paths[3:] {
		if _, err := c.get(p); err != nil {
			t.Fatal(err)
		}
	}
	if c.size > maxIndexLayerBytes || len(c.byKey) != len(c.order) {
		t.Fatalf("size %d over %d (%d entries, %d in order)", c.size, maxIndexLayerBytes, len(c.byKey), len(c.order))
	}
	if c.byKey[paths[1]] != nil || c.byKey[paths[4]] == nil {
		t.Fatalf("kept %v", c.order)
	}
	if _, err := c.get(filepath.Join(dir, "missing.whl")); err == nil {
		t.Fatal("a missing wheel loaded")
	}
}
