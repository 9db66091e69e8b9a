package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/airlock-sandbox/airlock/internal/filehash"
)

func testImage() *Snapshot {
	mem := bytes.Repeat([]byte("airlock!"), 3*65536/8)
	return newSnapshot(mem, []uint64{1, 1 << 40, 0}, 65536)
}

func TestImageFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.img")
	key := ImageKey{1, 2, 3}
	img := testImage()
	defer img.Close()
	img.entry, img.fresh = 77, Range{Addr: 4096, Len: 2496}
	if err := WriteSnapshotFile(path, key, img); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapshotFile(path, key)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if !bytes.Equal(got.memory, img.memory) || got.unwindBuffer != img.unwindBuffer || len(got.globals) != 3 || got.globals[1] != 1<<40 ||
		got.entry != 77 || got.fresh != img.fresh {
		t.Fatalf("round trip changed the image")
	}
	img.fresh.Addr = uint32(len(img.memory)) - 8
	if err := WriteSnapshotFile(filepath.Join(t.TempDir(), "y.img"), key, img); err == nil {
		t.Fatal("stored an image whose fresh range is past its memory")
	}
	img.fresh.Addr = 4096
	// Read back, a fresh range past the memory is a corrupt file.
	data, _ := os.ReadFile(path)
	binary.LittleEndian.PutUint32(data[100:], uint32(len(img.memory))-8)
	bad := filepath.Join(t.TempDir(), "bad.img")
	os.WriteFile(bad, data, 0o644)
	if _, err := ReadSnapshotFile(bad, key); !errors.Is(err, ErrImageCorrupt) || !strings.Contains(err.Error(), "fresh range") {
		t.Fatalf("a fresh range past the memory: %v, want ErrImageCorrupt naming it", err)
	}
	if _, err := ReadSnapshotFile(filepath.Join(t.TempDir(), "none"), key); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v", err)
	}
	// Where a file is, CreateSnapshotFile leaves it: the first process to
	// store an image is the one every process then uses.
	other := newSnapshot(bytes.Repeat([]byte("other!!!"), 65536/8), nil, 0)
	defer other.Close()
	if err := CreateSnapshotFile(path, key, other); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateSnapshotFile over a stored image: %v, want fs.ErrExist", err)
	}
	if again, err := ReadSnapshotFile(path, key); err != nil || !bytes.Equal(again.memory, img.memory) {
		t.Fatalf("the stored image changed: %v", err)
	} else {
		again.Close()
	}
}

// A stored image verified once is not hashed again while its stamp (its
// checksum, internal/filehash) still describes the file; on Linux its
// memory is a view of the memfd the runs map, not a copy in the heap.
func TestImageFileStamped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.img")
	key := ImageKey{4}
	img := testImage()
	defer img.Close()
	if err := WriteSnapshotFile(path, key, img); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // a file is stamped once it has settled
	got, err := ReadSnapshotFile(path, key)
	if err != nil || !bytes.Equal(got.memory, img.memory) {
		t.Fatalf("ReadSnapshotFile: %v", err)
	}
	if runtime.GOOS == "linux" && (got.backing == nil || unsafe.SliceData(got.backing.view) != unsafe.SliceData(got.memory)) {
		t.Fatal("the image's memory is not the view of its memfd")
	}
	got.Close()
	head, _ := os.ReadFile(path)
	stamp, err := os.ReadFile(path + filehash.StampSuffix)
	if err != nil || !strings.Contains(string(stamp), "sha256="+hex.EncodeToString(head[64:96])) {
		t.Fatalf("stamp %q (%v), want the image's checksum", stamp, err)
	}
	// A stamp naming another sum is not trusted: the image is checked.
	os.WriteFile(path+filehash.StampSuffix, bytes.Replace(stamp, []byte(hex.EncodeToString(head[64:96])), []byte(strings.Repeat("0", 64)), 1), 0o644)
	if again, err := ReadSnapshotFile(path, key); err != nil || !bytes.Equal(again.memory, img.memory) {
		t.Fatalf("ReadSnapshotFile with a foreign stamp: %v", err)
	} else {
		again.Close()
	}
}

// TestImageFileRejected: every damaged or foreign file is refused with an
// *ImageError saying which kind.
func TestImageFileRejected(t *testing.T) {
	dir := t.TempDir()
	key := ImageKey{7}
	good := filepath.Join(dir, "good.img")
	if err := WriteSnapshotFile(good, key, testImage()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(good)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(data)) }
	cases := map[string]struct {
		data []byte
		key  ImageKey
		want error
	}{
		"other key":      {data, ImageKey{8}, ErrImageMismatch},
		"other version":  {edit(func(b []byte) []byte { b[8] = 99; return b }), key, ErrImageMismatch},
		"bad magic":      {edit(func(b []byte) []byte { b[0] = 'X'; return b }), key, ErrImageCorrupt},
		"flipped memory": {edit(func(b []byte) []byte { b[imageHeader+70000] ^= 1; return b }), key, ErrImageCorrupt},
		"flipped global": {edit(func(b []byte) []byte { b[96] ^= 1; return b }), key, ErrImageCorrupt},
		"truncated":      {data[:len(data)-1], key, ErrImageCorrupt},
		"header only":    {data[:100], key, ErrImageCorrupt},
		"empty":          {nil, key, ErrImageCorrupt},
		"grown":          {append(bytes.Clone(data), 0), key, ErrImageCorrupt},
	}
	for name, c := range cases {
		path := filepath.Join(dir, name)
		os.WriteFile(path, c.data, 0o644)
		img, err := ReadSnapshotFile(path, c.key)
		var ie *ImageError
		if img != nil || !errors.As(err, &ie) || !errors.Is(err, c.want) || ie.Path != path {
			t.Errorf("%s: img=%v err=%v, want an *ImageError wrapping %v", name, img != nil, err, c.want)
		}
	}
}

// TestCopyOnWriteReservation: a run's memory starts as the image, writes
// stay private to the run, and the rest of the reservation is zero.
func TestCopyOnWriteReservation(t *testing.T) {
	img := testImage()
	defer img.Close()
	if img.backing == nil {
		t.Skip("no copy-on-write backing on this platform")
	}
	a, freeA := reserveImage(img, regionKey{size: 8 * 65536})
	b, freeB := reserveImage(img, regionKey{size: 8 * 65536})
	defer freeA(a)
	defer freeB(b)
	if !bytes.Equal(a[:len(img.memory)], img.memory) || a[len(img.memory)] != 0 || a[len(a)-1] != 0 {
		t.Fatal("reservation does not start as the image")
	}
	a[0], a[len(a)-1] = 'X', 'Y'
	if b[0] != 'a' || img.memory[0] != 'a' || b[len(b)-1] != 0 {
		t.Fatal("a write leaked out of its reservation")
	}
	// A cap below the image cannot map it; the copy path refuses too.
	if _, _, ok := img.backing.reserve(65536); ok {
		t.Fatal("reserved less than the image")
	}
}
