package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A failed write leaves the old file and no temporary file; a good one
// replaces it whole, with the permissions asked for.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteBytes(path, 0o644, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := Write(path, 0o644, func(w io.Writer) error { w.Write([]byte("half")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed write: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("after a failed write: %q", got)
	}
	if err := WriteBytes(path, 0o600, []byte("new")); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if got, _ := os.ReadFile(path); string(got) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("after a write: %q %v", got, st.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// Create stores a new file whole, and leaves one that is there.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	put := func(s string) error {
		return Create(path, 0o644, func(w io.Writer) error { _, err := w.Write([]byte(s)); return err })
	}
	if err := put("first"); err != nil {
		t.Fatal(err)
	}
	if err := put("second"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v, want fs.ErrExist", err)
	}
	st, _ := os.Stat(path)
	if got, _ := os.ReadFile(path); string(got) != "first" || st.Mode().Perm() != 0o644 {
		t.Fatalf("after two creates: %q %v", got, st.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// A successful write removes what a killed writer of the same path left
// (older than StaleAfter), and leaves a live writer's file, other paths'
// files, and a name that only looks like a pattern match.
func TestWriteRemovesStaleLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f[1]")
	old := time.Now().Add(-StaleAfter - time.Hour)
	stale := path + ".part-111"
	live := path + ".part-222"
	otherPaths := filepath.Join(dir, "f1.part-333") // what "f[1]" would match as a pattern
	for _, p := range []string{stale, live, otherPaths} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{stale, otherPaths} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteBytes(path, 0o644, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a killed writer's leftover: %v, want removed", err)
	}
	for _, p := range []string{live, otherPaths, path} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want kept", p, err)
		}
	}
}
