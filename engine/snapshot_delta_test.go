package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// TestDeltaImageRoundTrip: a delta image reads back exactly as the memory
// it was made from, holds only the pages that differ (zeros past the base
// are left out), and restores through a pooled region of its base.
func TestDeltaImageRoundTrip(t *testing.T) {
	base := testImage()
	defer base.Close()
	page := os.Getpagesize()
	rng := rand.New(rand.NewPCG(1, 2))
	mem := append(bytes.Clone(base.memory), make([]byte, 2*65536)...)
	changed := map[int]bool{}
	for range 20 {
		off := rng.IntN(len(mem))
		mem[off] ^= 0x5a
		changed[off/page] = true
	}
	img := newDeltaImage(base, mem, []uint64{7}, 65536)
	defer img.Close()
	if !bytes.Equal(img.Bytes(), mem) || img.Len() != len(mem) {
		t.Fatal("delta image does not read back as its memory")
	}
	if img.DeltaPages() != len(changed) {
		t.Errorf("delta holds %d pages, %d differ", img.DeltaPages(), len(changed))
	}
	// Restoring: the base's region with the delta applied, as Allocate does.
	for range 3 {
		buf, free := reserveImage(base, regionKey{size: uint64(len(mem) + 65536)})
		img.applyDelta(buf)
		if !bytes.Equal(buf[:len(mem)], mem) {
			t.Fatal("restored region differs from the delta image")
		}
		free(buf[:len(mem)])
	}
	// A memory smaller than the base is not a delta of it: a full copy.
	small := newDeltaImage(base, mem[:65536], nil, 0)
	if small.base != nil || !bytes.Equal(small.Bytes(), mem[:65536]) {
		t.Error("memory smaller than the base was not kept whole")
	}
}

// TestCaptureDeltaSharesUnchangedPages: capturing a region resumed from a
// delta image keeps the previous delta's unchanged pages without copies.
func TestCaptureDeltaSharesUnchangedPages(t *testing.T) {
	base := testImage()
	defer base.Close()
	if base.backing == nil || !canRestore() {
		t.Skip("no copy-on-write backing or no pagemap here")
	}
	page := os.Getpagesize()
	mem := append(bytes.Clone(base.memory), make([]byte, 65536)...)
	for i := range 4 {
		mem[len(base.memory)+i*page] = 1 // past the base
	}
	mem[3] ^= 1 // inside it
	prev := newDeltaImage(base, mem, nil, 0)
	buf, free := reserveImage(base, regionKey{size: uint64(len(mem))})
	defer free(buf[:len(mem)])
	prev.applyDelta(buf)
	buf[len(base.memory)] = 2 // the run changes one page
	next, ok := captureDelta(base, prev, buf[:len(mem)], nil, 0)
	if !ok {
		t.Fatal("captureDelta found no pagemap")
	}
	want := bytes.Clone(mem)
	want[len(base.memory)] = 2
	if !bytes.Equal(next.Bytes(), want) {
		t.Fatal("captured delta does not read back as the region")
	}
	shared := 0
	for _, p := range next.pages {
		for _, q := range prev.pages {
			if p.off == q.off && &p.data[0] == &q.data[0] {
				shared++
			}
		}
	}
	if next.DeltaPages() != 5 || shared != 4 {
		t.Errorf("delta has %d pages, %d shared with the previous; want 5 and 4", next.DeltaPages(), shared)
	}
}

// TestDeltaRecord: a delta record reads back as the image it was written
// from, holds only the pages that differ, and every cut or damaged field
// is refused with a typed error rather than a panic or a huge allocation.
func TestDeltaRecord(t *testing.T) {
	base := testImage()
	defer base.Close()
	mem := append(bytes.Clone(base.memory), make([]byte, 65536)...)
	mem[70000] ^= 1
	mem[len(mem)-1] = 9
	globals := []uint64{4, 5, 6}
	img := newDeltaImage(base, mem, globals, 65536)
	defer img.Close()
	rec := img.AppendDelta([]byte("prefix"), base)[len("prefix"):]
	if want := 8 + 1 + 2*PageSize + 4 + 3*8 + 4; len(rec) != want {
		t.Fatalf("record is %d bytes, want %d (two changed pages)", len(rec), want)
	}
	got, n, err := ReadDelta(append(bytes.Clone(rec), "rest"...), base, 1<<30)
	if err != nil || n != len(rec) {
		t.Fatalf("ReadDelta: n %d of %d, %v", n, len(rec), err)
	}
	defer got.Close()
	if !bytes.Equal(got.Bytes(), mem) || !slices.Equal(got.globals, globals) || got.unwindBuffer != 65536 {
		t.Fatal("the record does not read back as its image")
	}
	if _, _, err := ReadDelta(rec, base, uint64(len(mem)-PageSize)); !errors.Is(err, ErrImageOverLimit) {
		t.Fatalf("over the memory cap: %v", err)
	}
	for cut := range len(rec) {
		if _, _, err := ReadDelta(rec[:cut], base, 1<<30); !errors.Is(err, ErrImageCorrupt) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<32)
	for name, bad := range map[string][]byte{
		"size not in pages":   binary.LittleEndian.AppendUint64(nil, uint64(len(mem)+1)),
		"size below the base": binary.LittleEndian.AppendUint64(nil, PageSize),
		"4 GiB in 8 bytes":    huge,
	} {
		if _, _, err := ReadDelta(bad, base, 1<<40); !errors.Is(err, ErrImageCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	wrongGlobals := bytes.Clone(rec)
	binary.LittleEndian.PutUint32(wrongGlobals[len(rec)-4-3*8-4:], 2)
	if _, _, err := ReadDelta(wrongGlobals, base, 1<<30); !errors.Is(err, ErrImageCorrupt) {
		t.Errorf("a global count other than the base's: %v", err)
	}
	badUnwind := bytes.Clone(rec)
	binary.LittleEndian.PutUint32(badUnwind[len(rec)-4:], uint32(len(mem)))
	if _, _, err := ReadDelta(badUnwind, base, 1<<30); !errors.Is(err, ErrImageCorrupt) {
		t.Errorf("an unwind buffer past the memory: %v", err)
	}
}

// TestWriteDeltaRecord: the streamed record is byte for byte the appended
// one, for a delta image (pages changed within and past the base, its
// pages out of order), a full image, and against another base or none.
func TestWriteDeltaRecord(t *testing.T) {
	base := testImage()
	defer base.Close()
	mem := append(bytes.Clone(base.memory), make([]byte, 3*65536)...)
	for _, off := range []int{5, 70000, 65536*2 + 4095, len(mem) - 1, len(base.memory) + 100} {
		mem[off] ^= 0x5a
	}
	delta := newDeltaImage(base, mem, []uint64{1, 2}, 7)
	defer delta.Close()
	shuffled := newDeltaImage(base, mem, []uint64{1, 2}, 7)
	slices.Reverse(shuffled.pages)
	full := newSnapshot(bytes.Clone(mem), []uint64{3}, 9)
	defer full.Close()
	for _, c := range []struct {
		name      string
		img, base *Snapshot
	}{{"delta", delta, base}, {"delta, pages out of order", shuffled, base}, {"delta, no base", delta, nil},
		{"full", full, base}, {"full, no base", full, nil}} {
		var buf bytes.Buffer
		if err := c.img.WriteDelta(&buf, c.base); err != nil {
			t.Fatal(err)
		}
		if want := c.img.AppendDelta(nil, c.base); !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: WriteDelta's %d bytes differ from AppendDelta's %d", c.name, buf.Len(), len(want))
		}
	}
}
