package memfs

import (
	"math"
	"slices"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// A file is sparse: its bytes are a dense prefix (data, from offset 0)
// and extents past it, each after a hole of more than holeMin bytes that
// reads as zeros and is not stored. A seek far past the end and a write
// allocate only what is written; the quota counts the file's size, holes
// included, so what a file stores (the prefix, the extents and
// extentCost for each extent's bookkeeping) is always within its charge:
// each extent follows a hole wider than its bookkeeping.
const (
	// holeMin: a gap up to this size is stored as zeros, so ordinary
	// files stay one dense slice and extents stay few.
	holeMin = 1 << 20
	// extentCost is what an extent costs the quota beyond its bytes, so
	// a guest writing a byte every holeMin bytes cannot hold host memory
	// in bookkeeping that the quota does not see.
	extentCost = 64
)

// extent is a run of a file's stored bytes past its prefix.
type extent struct {
	off int64
	b   []byte
}

func (e extent) end() int64 { return e.off + int64(len(e.b)) }

// Stored is the bytes n holds in memory: less than Size for a sparse
// file, whose holes are not stored.
func (n *Inode) Stored() int64 {
	if n == nil {
		return 0
	}
	return n.stored()
}

// Charged is what n costs the quota in bytes: a file's or link's size,
// holes included; nothing for a directory.
func (n *Inode) Charged() int64 {
	if n == nil {
		return 0
	}
	return n.charged()
}

func (n *Inode) charged() int64 {
	if n.kind == KindDir {
		return 0
	}
	return n.size
}

// stored is the bytes n holds in memory, at most n.charged().
func (n *Inode) stored() int64 {
	s := int64(len(n.data))
	for _, e := range n.ext {
		s += int64(len(e.b)) + extentCost
	}
	return s
}

// dense reports whether n's contents are exactly n.data.
func (n *Inode) dense() bool { return len(n.ext) == 0 && int64(len(n.data)) == n.size }

// charge checks a growth of delta bytes of size against the quota.
func (fs *FS) charge(delta int64) error {
	if q := fs.quota.MaxBytes; delta > 0 && q > 0 && fs.bytes > q-delta {
		fs.quotaHit = true
		return errno.ENOSPC
	}
	return nil
}

// readAt fills p from off, holes as zeros; off < n.size.
func (n *Inode) readAt(p []byte, off int64) int {
	p = p[:min(int64(len(p)), n.size-off)]
	c := 0
	if off < int64(len(n.data)) {
		c = copy(p, n.data[off:])
	}
	clear(p[c:])
	end := off + int64(len(p))
	for _, e := range n.ext {
		if e.end() <= off {
			continue
		}
		if e.off >= end {
			break
		}
		if e.off >= off {
			copy(p[e.off-off:], e.b)
		} else {
			copy(p, e.b[off-e.off:])
		}
	}
	return len(p)
}

// writeAt stores p at off (0 < len(p), off+len(p) <= maxFileSize), all or
// nothing.
func (fs *FS) writeAt(n *Inode, p []byte, off int64) error {
	b, err := fs.store(n, off, off+int64(len(p)))
	if err == nil {
		copy(b, p)
	}
	return err
}

// store makes [off, end) of n stored (off < end <= maxFileSize), keeping
// what is there and zeros in what was a hole, and returns that storage.
// It changes nothing when the quota refuses the growth in size.
func (fs *FS) store(n *Inode, off, end int64) ([]byte, error) {
	if err := fs.charge(end - n.size); err != nil {
		return nil, err
	}
	fs.bytes += max(end-n.size, 0)
	prefix := int64(len(n.data))
	if off <= prefix+holeMin {
		// Into the prefix, which grows over a small gap and absorbs the
		// extents it then reaches.
		grown := max(prefix, end)
		k := 0
		for ; k < len(n.ext) && n.ext[k].off <= grown+holeMin; k++ {
			grown = max(grown, n.ext[k].end())
		}
		if err := fs.resize(n, grown); err != nil { // cannot fail: grown <= maxFileSize
			return nil, err
		}
		for _, e := range n.ext[:k] {
			copy(n.data[e.off:], e.b)
		}
		n.ext = slices.Delete(n.ext, 0, k)
		n.size = max(n.size, end)
		return n.data[off:end], nil
	}
	// Past a hole: merge with the extents within holeMin of it.
	i := 0
	for i < len(n.ext) && n.ext[i].end()+holeMin < off {
		i++
	}
	j := i
	start, stop := off, end
	for ; j < len(n.ext) && n.ext[j].off <= stop+holeMin; j++ {
		start, stop = min(start, n.ext[j].off), max(stop, n.ext[j].end())
	}
	var b []byte
	if j == i+1 && n.ext[i].off == start {
		// Growing one extent (appends after a far seek): amortised.
		b = n.ext[i].b
		if need := int(stop - start); need > len(b) {
			b = append(b, make([]byte, need-len(b))...)
		}
	} else {
		b = make([]byte, stop-start)
		for _, e := range n.ext[i:j] {
			copy(b[e.off-start:], e.b)
		}
	}
	n.ext = slices.Replace(n.ext, i, j, extent{start, b})
	n.size = max(n.size, end)
	return b[off-start : end-start], nil
}

// Allocate makes [off, off+length) of a file stored, as posix_fallocate:
// holes there become zeros that count against the quota, so later writes
// there cannot fail for space; the file grows to off+length if shorter.
//
// # Errors
//
//   - ENOSPC: the file would grow past Quota.MaxBytes; nothing changes.
//   - EFBIG, EINVAL, EISDIR, EROFS, EBADF: as WriteAt.
func (fs *FS) Allocate(n *Inode, off, length int64) error {
	if err := fs.checkFile(n); err != nil {
		return err
	}
	if off < 0 || length <= 0 {
		return errno.EINVAL
	}
	if n.freed {
		return errno.EBADF
	}
	if n.readOnly {
		return errno.EROFS
	}
	if length > maxFileSize || off > maxFileSize-length {
		return errno.EFBIG
	}
	if _, err := fs.store(n, off, off+length); err != nil {
		return err
	}
	now := fs.now()
	n.mtim, n.ctim = now, now
	return nil
}

// truncate sets n's size; growth is a hole, not stored but charged.
func (fs *FS) truncate(n *Inode, size int64) error {
	if size > maxFileSize || size > math.MaxInt {
		return errno.EFBIG
	}
	if err := fs.charge(size - n.size); err != nil {
		return err
	}
	fs.bytes += size - n.size
	if size < int64(len(n.data)) {
		fs.resize(n, size) // shrinking cannot fail
	}
	for k := len(n.ext) - 1; k >= 0 && n.ext[k].end() > size; k-- {
		e := &n.ext[k]
		if e.off >= size {
			n.ext = n.ext[:k]
			continue
		}
		keep := size - e.off
		if int64(cap(e.b)) > 2*keep {
			e.b = slices.Clone(e.b[:keep]) // do not pin what was cut
		} else {
			e.b = e.b[:keep]
		}
	}
	n.size = size
	return nil
}

// contents returns n's bytes as one slice: n.data itself when dense.
// Under a byte quota, which counts holes, every file fits in it; without
// one, a sparse file past 2 GiB is refused (EFBIG) rather than
// materialised on the host.
func (fs *FS) contents(n *Inode) ([]byte, error) {
	if n.dense() {
		return n.data, nil
	}
	if fs.quota.MaxBytes <= 0 && n.size > math.MaxInt32 {
		return nil, errno.EFBIG
	}
	b := make([]byte, n.size)
	if n.size > 0 {
		n.readAt(b, 0)
	}
	return b, nil
}
