package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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

// OwnBytes is the memory the image holds that its base does not: a delta
// image's changed pages, a full image's whole memory.
func (img *Snapshot) OwnBytes() int64 {
	if img.base == nil {
		return int64(len(img.memory))
	}
	var n int64
	for _, p := range img.pages {
		n += int64(len(p.data))
	}
	return n
}

// Len is the size of the image's linear memory in bytes.
func (img *Snapshot) Len() int {
	if img.base != nil {
		return img.size
	}
	return len(img.memory)
}

// CopyTo writes the image's memory into dst, which must hold Len bytes and
// read as zeros beyond the base's length (delta images) or be overwritten
// entirely (full images).
func (img *Snapshot) CopyTo(dst []byte) {
	if img.base == nil {
		copy(dst, img.memory)
		return
	}
	img.base.CopyTo(dst)
	img.applyDelta(dst)
}

// Bytes returns a copy of the image's whole memory.
func (img *Snapshot) Bytes() []byte {
	out := make([]byte, img.Len())
	img.CopyTo(out)
	return out
}

// u32 reads the little-endian word at off in the image's memory.
func (img *Snapshot) u32(off int) (uint32, bool) {
	if img.base == nil {
		return u32At(img.memory, off)
	}
	for _, p := range img.pages {
		if off >= p.off && off+4 <= p.off+len(p.data) {
			return u32At(p.data, off-p.off)
		}
	}
	if off+4 > img.size {
		return 0, false
	}
	if off+4 > len(img.base.memory) {
		return 0, true // beyond the base: zeros
	}
	return img.base.u32(off)
}

// DeltaPages is how many OS pages a delta image holds (0 for a full one).
func (img *Snapshot) DeltaPages() int { return len(img.pages) }

// applyDelta copies a delta image's pages over a region that reads as its
// base.
func (img *Snapshot) applyDelta(dst []byte) {
	for _, p := range img.pages {
		copy(dst[p.off:], p.data)
	}
}

// newDeltaImage makes an image of memory as a delta over base (a full
// image), keeping only the pages that differ from it; the image keeps
// base's pooled regions in use, so base must outlive it. memory is not
// kept.
func newDeltaImage(base *Snapshot, memory []byte, globals []uint64, unwindBuffer uint32) *Snapshot {
	if base == nil || base.base != nil || len(memory) < len(base.memory) {
		img := newSnapshot(bytes.Clone(memory), globals, unwindBuffer)
		if base != nil {
			img.entry = base.entry
		}
		return img
	}
	page := os.Getpagesize()
	img := &Snapshot{globals: globals, unwindBuffer: unwindBuffer, entry: base.entry, base: base, size: len(memory)}
	for off := 0; off < len(memory); off += page {
		img.keepIfChanged(memory, off, page, nil)
	}
	return img
}

// keepIfChanged adds memory's page at off to the delta when it differs
// from the base (beyond the base: when it is not all zeros). A page equal
// to prev's (the previous delta's page at off, if any) is shared, not
// copied: a session's state mostly outlives the call that made it.
func (img *Snapshot) keepIfChanged(memory []byte, off, page int, prev []byte) {
	img.keepPage(memory[off:min(off+page, len(memory))], off, prev)
}

// keepPage is keepIfChanged for the page cur, at off in the memory.
func (img *Snapshot) keepPage(cur []byte, off int, prev []byte) {
	end := off + len(cur)
	if prev != nil && bytes.Equal(cur, prev) {
		img.pages = append(img.pages, deltaPage{off: off, data: prev})
		return
	}
	if off < len(img.base.memory) {
		if bytes.Equal(cur, img.base.memory[off:min(end, len(img.base.memory))]) {
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
func captureDelta(base, from *Snapshot, memory []byte, globals []uint64, unwindBuffer uint32) (*Snapshot, bool) {
	if base == nil || len(memory) < len(base.memory) {
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
	img := &Snapshot{globals: globals, unwindBuffer: unwindBuffer, base: base, size: len(memory)}
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

// The delta record: an image as the WebAssembly pages that differ from a
// base image's memory, as a saved session holds it. All integers
// little-endian.
//
//	8           memory size in bytes (a multiple of PageSize, at least the base's)
//	(pages+7)/8 bitmap: bit p set when page p differs from the base
//	PageSize    each page whose bit is set, in order
//	4           number of globals, n (the base's)
//	8n          globals
//	4           unwind buffer address (below the memory size)

// ErrImageOverLimit: a delta record's memory is larger than its reader
// allows.
var ErrImageOverLimit = errors.New("engine: image memory over the limit")

// AppendDelta appends img as a delta record over base's memory.
func (img *Snapshot) AppendDelta(out []byte, base *Snapshot) []byte {
	mem := img.Bytes()
	var baseMem []byte
	if base != nil {
		baseMem = base.memory
	}
	pages := len(mem) / PageSize
	out = binary.LittleEndian.AppendUint64(out, uint64(len(mem)))
	bitmap := len(out)
	out = append(out, make([]byte, (pages+7)/8)...)
	for p := range pages {
		page := mem[p*PageSize : (p+1)*PageSize]
		if (p+1)*PageSize <= len(baseMem) && bytes.Equal(page, baseMem[p*PageSize:(p+1)*PageSize]) {
			continue
		}
		out[bitmap+p/8] |= 1 << (p % 8)
		out = append(out, page...)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(img.globals)))
	for _, g := range img.globals {
		out = binary.LittleEndian.AppendUint64(out, g)
	}
	return binary.LittleEndian.AppendUint32(out, img.unwindBuffer)
}

// WriteDelta writes to w what AppendDelta appends, without a
// copy of the whole memory: a spilled or saved session of 80 MiB made
// 80 MiB of its memory, 80 MiB of record and the buffer's growth besides,
// and a server saving sessions to stay within its memory budget held
// several times that budget in garbage. It holds one page and the bitmap.
func (img *Snapshot) WriteDelta(w io.Writer, base *Snapshot) error {
	var baseMem []byte
	if base != nil {
		baseMem = base.memory
	}
	size := img.Len()
	pages := size / PageSize
	page := pageReader(img)
	head := binary.LittleEndian.AppendUint64(nil, uint64(size))
	bitmap := make([]byte, (pages+7)/8)
	for p := range pages {
		cur := page(p)
		if (p+1)*PageSize <= len(baseMem) && bytes.Equal(cur, baseMem[p*PageSize:(p+1)*PageSize]) {
			continue
		}
		bitmap[p/8] |= 1 << (p % 8)
	}
	if _, err := w.Write(append(head, bitmap...)); err != nil {
		return err
	}
	for p := range pages {
		if bitmap[p/8]&(1<<(p%8)) != 0 {
			if _, err := w.Write(page(p)); err != nil {
				return err
			}
		}
	}
	tail := binary.LittleEndian.AppendUint32(nil, uint32(len(img.globals)))
	for _, g := range img.globals {
		tail = binary.LittleEndian.AppendUint64(tail, g)
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(tail, img.unwindBuffer))
	return err
}

// pageReader returns a function that gives the image's memory page p
// (PageSize bytes); the slice it returns is valid until its next call.
func pageReader(img *Snapshot) func(p int) []byte {
	if img.base == nil {
		return func(p int) []byte { return img.memory[p*PageSize : (p+1)*PageSize] }
	}
	// The delta's pages in address order, to find those within a page.
	delta := slices.Clone(img.pages)
	slices.SortFunc(delta, func(a, b deltaPage) int { return a.off - b.off })
	scratch := make([]byte, PageSize)
	baseMem := img.base.memory
	return func(p int) []byte {
		lo, hi := p*PageSize, (p+1)*PageSize
		clear(scratch)
		if lo < len(baseMem) {
			copy(scratch, baseMem[lo:min(hi, len(baseMem))])
		}
		i, _ := slices.BinarySearchFunc(delta, lo, func(d deltaPage, off int) int {
			if d.off+len(d.data) <= off {
				return -1
			}
			if d.off > off {
				return 1
			}
			return 0
		})
		for ; i < len(delta) && delta[i].off < hi; i++ {
			d := delta[i]
			start := max(d.off, lo)
			end := min(d.off+len(d.data), hi)
			if start < end {
				copy(scratch[start-lo:end-lo], d.data[start-d.off:end-d.off])
			}
		}
		return scratch
	}
}

// ReadDelta decodes the delta record at the start of data over base
// (a full image) and says how many bytes it took. A memory larger than
// maxMemory is refused before memory of that size is made: a few bytes
// could otherwise declare 4 GiB.
//
// # Errors
// ErrImageOverLimit; ErrImageCorrupt naming the field that does not decode.
func ReadDelta(data []byte, base *Snapshot, maxMemory uint64) (*Snapshot, int, error) {
	r := &reader{b: data}
	corrupt := func(field string) (*Snapshot, int, error) {
		return nil, 0, fmt.Errorf("%w: %s", ErrImageCorrupt, field)
	}
	size := r.u64()
	if r.err != nil || size%PageSize != 0 || size > 1<<32 || size < uint64(len(base.memory)) {
		return corrupt("memory size")
	}
	if size > maxMemory {
		return nil, 0, fmt.Errorf("%w: its memory is %d bytes, over the %d-byte limit", ErrImageOverLimit, size, maxMemory)
	}
	pages := int(size / PageSize)
	bitmap := r.take((pages + 7) / 8)
	if r.err != nil {
		return corrupt("truncated")
	}
	changed := 0
	for p := range pages {
		if bitmap[p/8]&(1<<(p%8)) != 0 {
			changed++
		}
	}
	if uint64(changed)*PageSize > uint64(len(r.b)-r.off) {
		return corrupt("pages")
	}
	// The changed pages are kept straight from the record, without the
	// whole memory made first (a spilled session's load made its memory,
	// then its pages, beside the record).
	delta := &Snapshot{entry: base.entry, base: base, size: int(size)}
	var mem []byte // only for a base that is itself a delta (NewDeltaImage's copy)
	if base.base != nil {
		mem = make([]byte, size)
		base.CopyTo(mem)
	}
	osPage := os.Getpagesize()
	for p := range pages {
		if bitmap[p/8]&(1<<(p%8)) == 0 {
			continue
		}
		data := r.take(PageSize)
		if mem != nil {
			copy(mem[p*PageSize:], data)
			continue
		}
		for k := 0; k < PageSize; k += osPage {
			delta.keepPage(data[k:min(k+osPage, PageSize)], p*PageSize+k, nil)
		}
	}
	n := r.u32()
	if r.err != nil || uint64(n)*8 > uint64(len(r.b)-r.off) || int(n) != len(base.globals) {
		return corrupt("globals")
	}
	globals := make([]uint64, n)
	for i := range globals {
		globals[i] = r.u64()
	}
	unwind := r.u32()
	if r.err != nil || uint64(unwind) >= size {
		return corrupt("unwind buffer")
	}
	if mem != nil {
		return newDeltaImage(base, mem, globals, unwind), r.off, nil
	}
	delta.globals, delta.unwindBuffer = globals, unwind
	return delta, r.off, nil
}

// reader takes little-endian fields off a byte slice; the first short
// read sticks in err and later reads return zeros.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.off {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	out := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return out
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// Digest is the SHA-256 of the snapshot's whole memory: what a saved
// session names the snapshot it is a delta over by.
func (img *Snapshot) Digest() [32]byte {
	if img.base == nil {
		return sha256.Sum256(img.memory)
	}
	return sha256.Sum256(img.Bytes())
}

// SetEntry sets the snapshot's entry point (Entry) and the range a resume
// from it fills with random bytes (Fresh). The caller of Capture sets
// them before the snapshot is shared.
func (img *Snapshot) SetEntry(entry uint32, fresh Range) { img.entry, img.fresh = entry, fresh }

// Entry is the guest's entry point, 0 for none: a resume calls the
// module's entry functions (Options.Entry) with it on an empty stack
// instead of rewinding into the read the snapshot paused in.
func (img *Snapshot) Entry() uint32 { return img.entry }

// Fresh is the range of memory a resume from this very snapshot fills
// from the run's random source before the guest runs (Len 0: none).
func (img *Snapshot) Fresh() Range { return img.fresh }
