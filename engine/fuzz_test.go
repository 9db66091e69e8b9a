package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The image file is the host's own, but the cache directory it sits in
// is shared and survives crashes: whatever bytes it holds, ReadSnapshotFile
// answers with an image that is what its header says, or an *ImageError.
// The fuzzer writes the header (the memory is zeros of the pages it
// names); with fix set, the harness writes a right checksum and key, so
// that mutations get past them to the fields after.
func FuzzReadImageFile(f *testing.F) {
	key := ImageKey{7, 7, 7}
	img := testImage()
	img.entry, img.fresh = 77, Range{Addr: 4096, Len: 2496}
	dir := f.TempDir()
	good := filepath.Join(dir, "good.img")
	if err := WriteSnapshotFile(good, key, img); err != nil {
		f.Fatal(err)
	}
	img.Close()
	data, err := os.ReadFile(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[:imageHeader], uint8(3), true)
	f.Add(data[:imageHeader], uint8(3), false)
	f.Add(data[:200], uint8(2), true)
	f.Add([]byte("ALKIMAGE"), uint8(0), false)
	f.Fuzz(func(t *testing.T, head []byte, pages uint8, fix bool) {
		pages %= 8 // the memory is not what is fuzzed: a few pages suffice
		file := make([]byte, imageHeader+int(pages)*PageSize)
		copy(file, head)
		if fix && len(file) >= globalsAt {
			copy(file[16:48], key[:])
			if n := binary.LittleEndian.Uint32(file[60:]); n <= maxGlobals {
				sum := imageChecksum(file[:imageHeader], file[imageHeader:])
				copy(file[64:96], sum[:])
			}
		}
		path := filepath.Join(t.TempDir(), "x.img")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSnapshotFile(path, key)
		if err != nil {
			var ie *ImageError
			if !errors.As(err, &ie) || !(errors.Is(err, ErrImageCorrupt) || errors.Is(err, ErrImageMismatch)) {
				t.Fatalf("error %v (%T), want an *ImageError", err, err)
			}
			return
		}
		defer got.Close()
		if !bytes.Equal(got.memory, file[imageHeader:]) || uint64(got.unwindBuffer)+unwindPages*PageSize > uint64(len(got.memory)) ||
			!got.fresh.within(len(got.memory)) || len(got.globals) > maxGlobals {
			t.Fatalf("accepted an image unlike its file: %d bytes, unwind %#x, fresh %+v, %d globals", len(got.memory), got.unwindBuffer, got.fresh, len(got.globals))
		}
	})
}

// A session blob's image is a delta record over the Sandbox's base image
// (ReadDelta): whatever the bytes, it answers with an image within
// the memory cap or an error wrapping ErrImageCorrupt or
// ErrImageOverLimit, and reads no further than the record.
func FuzzReadDeltaRecord(f *testing.F) {
	base := testImage()
	defer base.Close()
	// Seeds without changed pages: a page's 64 KiB would make each
	// mutation's minimizing slow, and the page copy is not what is fuzzed.
	grown := newDeltaImage(base, append(bytes.Clone(base.memory), make([]byte, PageSize)...), []uint64{4, 5, 6}, 65536)
	f.Add(grown.AppendDelta(nil, base))
	grown.Close()
	same := newDeltaImage(base, bytes.Clone(base.memory), []uint64{1, 1 << 40, 0}, 65536)
	f.Add(same.AppendDelta(nil, base))
	same.Close()
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<32))
	const maxMemory = 8 * PageSize
	f.Fuzz(func(t *testing.T, data []byte) {
		got, n, err := ReadDelta(data, base, maxMemory)
		if err != nil {
			if !errors.Is(err, ErrImageCorrupt) && !errors.Is(err, ErrImageOverLimit) {
				t.Fatalf("error %v, want ErrImageCorrupt or ErrImageOverLimit", err)
			}
			return
		}
		defer got.Close()
		if size := got.Len(); n > len(data) || size > maxMemory || size < len(base.memory) ||
			len(got.globals) != len(base.globals) || int(got.unwindBuffer) >= size {
			t.Fatalf("accepted %d of %d bytes as an image of %d bytes, %d globals, unwind %#x", n, len(data), size, len(got.globals), got.unwindBuffer)
		}
	})
}
