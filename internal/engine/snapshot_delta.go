package engine

import (
	"bytes"
	"os"
)

// Delta images. A session pauses after every call, and most of its memory
// is still the Sandbox's image: the interpreter, the warm-up imports.
// Capturing and restoring all of it per call (~20 MB copied, and every
// page faulted into a fresh mapping at 20-40 µs a fault here) would cost
// tens of milliseconds. A delta image is instead its base image plus the
// OS pages that differ: a run resumed from it gets a pooled region of the
// base (reset, fault-free) with those pages copied over, and capturing one
// reads which pages the run wrote from /proc/self/pagemap and keeps those
// that differ from the base.

// deltaPage is one OS page of a delta image that differs from its base.
type deltaPage struct {
	off  int
	data []byte
}

// Len is the size of the image's linear memory in bytes.
func (img *Image) Len() int {
	if img.base != nil {
		return img.size
	}
	return len(img.Memory)
}

// CopyTo writes the image's memory into dst, which must hold Len bytes and
// read as zeros beyond the base's length (delta images) or be overwritten
// entirely (full images).
func (img *Image) CopyTo(dst []byte) {
	if img.base == nil {
		copy(dst, img.Memory)
		return
	}
	img.base.CopyTo(dst)
	img.applyDelta(dst)
}

// Bytes returns a copy of the image's whole memory.
func (img *Image) Bytes() []byte {
	out := make([]byte, img.Len())
	img.CopyTo(out)
	return out
}

// u32 reads the little-endian word at off in the image's memory.
func (img *Image) u32(off int) (uint32, bool) {
	if img.base == nil {
		return u32At(img.Memory, off)
	}
	for _, p := range img.pages {
		if off >= p.off && off+4 <= p.off+len(p.data) {
			return u32At(p.data, off-p.off)
		}
	}
	if off+4 > img.size {
		return 0, false
	}
	if off+4 > len(img.base.Memory) {
		return 0, true // beyond the base: zeros
	}
	return img.base.u32(off)
}

// DeltaPages is how many OS pages a delta image holds (0 for a full one).
func (img *Image) DeltaPages() int { return len(img.pages) }

// applyDelta copies a delta image's pages over a region that reads as its
// base.
func (img *Image) applyDelta(dst []byte) {
	for _, p := range img.pages {
		copy(dst[p.off:], p.data)
	}
}

// NewDeltaImage makes an image of memory as a delta over base (a full
// image), keeping only the pages that differ from it; the image keeps
// base's pooled regions in use, so base must outlive it. memory is not
// kept.
func NewDeltaImage(base *Image, memory []byte, globals []uint64, unwindBuffer uint32) *Image {
	if base == nil || base.base != nil || len(memory) < len(base.Memory) {
		return NewImage(bytes.Clone(memory), globals, unwindBuffer)
	}
	page := os.Getpagesize()
	img := &Image{Globals: globals, UnwindBuffer: unwindBuffer, base: base, size: len(memory)}
	for off := 0; off < len(memory); off += page {
		img.keepIfChanged(memory, off, page, nil)
	}
	return img
}

// keepIfChanged adds memory's page at off to the delta when it differs
// from the base (beyond the base: when it is not all zeros). A page equal
// to prev's (the previous delta's page at off, if any) is shared, not
// copied: a session's state mostly outlives the call that made it.
func (img *Image) keepIfChanged(memory []byte, off, page int, prev []byte) {
	end := min(off+page, len(memory))
	cur := memory[off:end]
	if prev != nil && bytes.Equal(cur, prev) {
		img.pages = append(img.pages, deltaPage{off: off, data: prev})
		return
	}
	if off < len(img.base.Memory) {
		if bytes.Equal(cur, img.base.Memory[off:min(end, len(img.base.Memory))]) {
			return
		}
	} else if allZero(cur) {
		return
	}
	img.pages = append(img.pages, deltaPage{off: off, data: bytes.Clone(cur)})
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// captureDelta takes a paused instance's memory as a delta over base,
// looking only at pages the kernel says are not the base's mapping (see
// writtenPages), and sharing pages unchanged since from (the image the
// run resumed, a delta over base or base itself). ok is false where
// pagemap is unavailable.
func captureDelta(base, from *Image, memory []byte, globals []uint64, unwindBuffer uint32) (*Image, bool) {
	if base == nil || len(memory) < len(base.Memory) {
		return nil, false
	}
	var prev []deltaPage
	if from != nil && from.base == base {
		prev = from.pages
	}
	page := os.Getpagesize()
	candidates, ok := writtenPages(memory, page)
	if !ok {
		return nil, false
	}
	img := &Image{Globals: globals, UnwindBuffer: unwindBuffer, base: base, size: len(memory)}
	for _, i := range candidates {
		off := i * page
		for len(prev) > 0 && prev[0].off < off {
			prev = prev[1:]
		}
		var was []byte
		if len(prev) > 0 && prev[0].off == off {
			was = prev[0].data
		}
		img.keepIfChanged(memory, off, page, was)
	}
	return img, true
}
