//go:build linux

package memfd

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Both ways in hold the bytes asked for, and the memfd is sealed: it can
// be neither written nor cut short.
func TestSealedCopies(t *testing.T) {
	data := bytes.Repeat([]byte("memfd!"), 100000)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, append([]byte("head"), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fromFile, err := FromFile("test", f, 4, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	fromBytes, err := FromBytes("test", data)
	if err != nil {
		t.Fatal(err)
	}
	for name, fd := range map[string]int{"FromFile": fromFile, "FromBytes": fromBytes} {
		view, err := View(fd, len(data))
		if err != nil || !bytes.Equal(view, data) {
			t.Fatalf("%s: view differs (%v)", name, err)
		}
		unix.Munmap(view)
		if _, err := unix.Pwrite(fd, []byte("x"), 0); err == nil {
			t.Errorf("%s: a sealed memfd took a write", name)
		}
		if err := unix.Ftruncate(fd, 1); err == nil {
			t.Errorf("%s: a sealed memfd was cut short", name)
		}
		unix.Close(fd)
	}
	if _, err := FromFile("test", f, 4, int64(len(data))+1); err == nil {
		t.Fatal("FromFile past the end of the file succeeded")
	}
}
