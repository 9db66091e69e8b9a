//go:build linux || darwin || freebsd || netbsd

package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func settleNow(t *testing.T) {
	old := settleTime
	settleTime = 0
	t.Cleanup(func() { settleTime = old })
}

// A file read twice is hashed once: the second read takes the stamp's
// sum, which this test proves by planting a different one.
func TestStampIsUsedWhileTheFileIsUnchanged(t *testing.T) {
	settleNow(t)
	path := filepath.Join(t.TempDir(), "f.bin")
	data := []byte(strings.Repeat("airlock ", 1000))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, s, err := Read(path)
	if err != nil || string(got) != string(data) || s != hexSum(data) {
		t.Fatalf("Read = %d bytes, %s, %v; want %d bytes, %s", len(got), s, err, len(data), hexSum(data))
	}
	stamp, err := os.ReadFile(path + StampSuffix)
	if err != nil {
		t.Fatalf("no stamp after a read: %v", err)
	}
	planted := strings.Repeat("ab", sha256.Size)
	if err := os.WriteFile(path+StampSuffix, []byte(strings.Replace(string(stamp), s, planted, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, s, _ := Read(path); s != planted {
		t.Fatalf("second Read hashed again (%s), want the stamp's %s", s, planted)
	}
	if s, _ := Sum(path); s != planted {
		t.Fatalf("Sum hashed again (%s), want the stamp's %s", s, planted)
	}
}

// A file changed in place, same size, is hashed again: its times moved.
func TestChangedFileIsHashedAgain(t *testing.T) {
	settleNow(t)
	path := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(path, []byte("first version"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // past the file system's time tick
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("FIRST"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := hexSum([]byte("FIRST version"))
	if _, s, err := Read(path); err != nil || s != want {
		t.Fatalf("Read after an in-place write = %s, %v; want %s", s, err, want)
	}
	if s, err := Sum(path); err != nil || s != want {
		t.Fatalf("Sum after an in-place write = %s, %v; want %s", s, err, want)
	}
}

// A file written moments ago gets no stamp (a write later in the same
// time tick would be invisible to it); a stamp in another form, or for
// another inode, is ignored.
func TestNoStampForAFreshFileOrAForeignStamp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + StampSuffix); !os.IsNotExist(err) {
		t.Fatalf("a file changed just now was stamped (stat: %v)", err)
	}
	settleNow(t)
	bogus := "filehash-1 dev=1 ino=2 size=4 mtime=5 ctime=6 sha256=" + strings.Repeat("cd", sha256.Size) + "\n"
	for _, stamp := range []string{bogus, "garbage", ""} {
		os.WriteFile(path+StampSuffix, []byte(stamp), 0o644)
		if _, s, _ := Read(path); s != hexSum([]byte("data")) {
			t.Fatalf("stamp %q was trusted: %s", stamp, s)
		}
	}
}

// A stamp that cannot be written (here a directory stands in its place,
// as a read-only cache would refuse it, even to root) only costs hashing.
func TestUnwritableStamp(t *testing.T) {
	settleNow(t)
	path := filepath.Join(t.TempDir(), "f.bin")
	os.WriteFile(path, []byte("data"), 0o644)
	if err := os.Mkdir(path+StampSuffix, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, s, err := Read(path); err != nil || s != hexSum([]byte("data")) {
			t.Fatalf("Read with an unwritable stamp = %s, %v", s, err)
		}
	}
}

func TestMissingFile(t *testing.T) {
	if _, _, err := Read(filepath.Join(t.TempDir(), "none")); !os.IsNotExist(err) {
		t.Fatalf("Read of a missing file: %v, want not-exist", err)
	}
	if _, err := Sum(filepath.Join(t.TempDir(), "none")); !os.IsNotExist(err) {
		t.Fatalf("Sum of a missing file: %v, want not-exist", err)
	}
}

// Map gives the file's bytes and sum as Read does, through the same
// stamp; an empty file, which cannot be mapped, is read.
func TestMap(t *testing.T) {
	settleNow(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "f.zip")
	data := []byte(strings.Repeat("stdlib ", 3000))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, s, release, err := Map(path)
	if err != nil || string(got) != string(data) || s != hexSum(data) {
		t.Fatalf("Map = %d bytes, %s, %v; want %d bytes, %s", len(got), s, err, len(data), hexSum(data))
	}
	release()
	if _, err := os.Stat(path + StampSuffix); err != nil {
		t.Fatalf("no stamp after Map: %v", err)
	}
	if _, s2, err := Read(path); err != nil || s2 != s {
		t.Fatalf("Read after Map: %s, %v", s2, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, s, release, err := Map(empty); err != nil || len(got) != 0 || s != hexSum(nil) {
		t.Fatalf("Map of an empty file = %d bytes, %s, %v", len(got), s, err)
	} else {
		release()
	}
	if _, _, _, err := Map(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("Map of a missing file: %v", err)
	}
}
