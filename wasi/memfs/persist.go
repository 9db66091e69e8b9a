package memfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// Clone returns a deep copy of fs under quota q: what a session forks or
// what a call runs on so that a failed call leaves the original as it
// was. Files from mounted layers are shared, not copied. Inodes that have
// no name any more (unlinked, still open) are not copied: clone a
// filesystem no run is using.
func (fs *FS) Clone(q Quota) *FS {
	c := &FS{quota: q, now: fs.now, nextIno: fs.nextIno}
	copies := map[*Inode]*Inode{}
	var copyOf func(n *Inode) *Inode
	copyOf = func(n *Inode) *Inode {
		if x := copies[n]; x != nil {
			return x
		}
		x := &Inode{fs: c, kind: n.kind, ino: n.ino, nlink: n.nlink, readOnly: n.readOnly, atim: n.atim, mtim: n.mtim, ctim: n.ctim, size: n.size}
		copies[n] = x
		if !n.readOnly {
			c.inodes++
		}
		switch {
		case n.kind == KindFile && n.readOnly:
			x.data = n.data
		case n.kind == KindFile || n.kind == KindSymlink:
			x.data = bytes.Clone(n.data)
			for _, e := range n.ext {
				x.ext = append(x.ext, extent{e.off, bytes.Clone(e.b)})
			}
			c.bytes += n.charged()
		default:
			x.children = make(map[string]*Inode, len(n.children))
			for name, child := range n.children {
				x.children[name] = copyOf(child)
				if !child.readOnly {
					c.entries++
				}
			}
		}
		return x
	}
	c.root = copyOf(fs.root)
	for n, x := range copies {
		if n.kind == KindDir {
			x.parent = copies[n.parent]
		}
	}
	return c
}

// The persisted form of a filesystem's writable part (see Save). v2 adds
// symbolic links (kind 3) and keeps holes: a file is its size, its dense
// prefix and its extents. Load reads v1 too (files dense, no links).
const (
	persistMagicV1 = "airlock-memfs\x00v1\x00"
	persistMagic   = "airlock-memfs\x00v2\x00"
)

// ErrCorrupt reports a persisted filesystem that does not decode.
var ErrCorrupt = errors.New("memfs: corrupt saved filesystem")

// Save writes the writable part of fs (everything but mounted layers) in
// a form Load reads back. Names, contents, hard links, symbolic links and
// times are kept.
func (fs *FS) Save(w io.Writer) error {
	bw := bufio.NewWriter(w)
	index := map[*Inode]uint64{fs.root: 0}
	order := []*Inode{fs.root}
	type entry struct {
		parent, child uint64
		name          string
	}
	var entries []entry
	// Breadth first: a directory is listed before its entries, so Load
	// can attach each entry to a directory it already has.
	for i := 0; i < len(order); i++ {
		dir := order[i]
		if dir.kind != KindDir {
			continue
		}
		ents, _ := fs.ReadDir(dir)
		for _, e := range ents {
			if e.Inode.readOnly {
				continue
			}
			idx, seen := index[e.Inode]
			if !seen {
				idx = uint64(len(order))
				index[e.Inode] = idx
				order = append(order, e.Inode)
			}
			entries = append(entries, entry{index[dir], idx, e.Name})
		}
	}
	var buf [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(buf[:binary.PutUvarint(buf[:], v)]) }
	sv := func(v int64) { bw.Write(buf[:binary.PutVarint(buf[:], v)]) }
	bw.WriteString(persistMagic)
	uv(uint64(len(order)))
	for _, n := range order {
		bw.WriteByte(byte(n.kind))
		sv(n.atim)
		sv(n.mtim)
		sv(n.ctim)
		switch n.kind {
		case KindSymlink:
			uv(uint64(len(n.data)))
			bw.Write(n.data)
		case KindFile:
			uv(uint64(n.size))
			uv(uint64(len(n.data)))
			bw.Write(n.data)
			uv(uint64(len(n.ext)))
			for _, e := range n.ext {
				uv(uint64(e.off))
				uv(uint64(len(e.b)))
				bw.Write(e.b)
			}
		}
	}
	uv(uint64(len(entries)))
	for _, e := range entries {
		uv(e.parent)
		uv(e.child)
		uv(uint64(len(e.name)))
		bw.WriteString(e.name)
	}
	return bw.Flush()
}

// loadSparse reads a v2 file: size, prefix, extents, each extent after a
// hole wider than holeMin and inside the size, as writeAt keeps them.
func loadSparse(n *Inode, br *bufio.Reader, blob func(uint64) ([]byte, bool), charge func(int64) error) error {
	var size, plen, count uint64
	for _, p := range []*uint64{&size, &plen} {
		var err error
		if *p, err = binary.ReadUvarint(br); err != nil {
			return errors.New("size")
		}
	}
	if size > maxFileSize || plen > size {
		return errors.New("size")
	}
	if err := charge(int64(size)); err != nil { // holes count
		return err
	}
	var ok bool
	if n.data, ok = blob(plen); !ok {
		return errors.New("data")
	}
	n.size = int64(size)
	count, err := binary.ReadUvarint(br)
	if err != nil || count > size/holeMin {
		return errors.New("extent count")
	}
	last := int64(plen)
	for k := uint64(0); k < count; k++ {
		off, err1 := binary.ReadUvarint(br)
		length, err2 := binary.ReadUvarint(br)
		if err1 != nil || err2 != nil || length == 0 || off > size || length > size-off || int64(off) <= last+holeMin {
			return fmt.Errorf("extent %d", k)
		}
		b, ok := blob(length)
		if !ok {
			return fmt.Errorf("extent %d data", k)
		}
		n.ext = append(n.ext, extent{int64(off), b})
		last = int64(off + length)
	}
	return nil
}

// Load reads a filesystem written by Save (r holds exactly that) into a new FS with opts, after
// mounting layers (which Save left out).
//
// # Errors
// ErrCorrupt (wrapped, with what was wrong) for input that does not
// decode to a tree; ENOSPC (wrapped) when it exceeds opts.Quota; those of
// Mount.
func Load(r io.Reader, opts Options, layers ...*Layer) (*FS, error) {
	fs := New(opts)
	for _, l := range layers {
		if err := fs.Mount(l); err != nil {
			return nil, err
		}
	}
	br := bufio.NewReader(r)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	magic := make([]byte, len(persistMagic))
	if _, err := io.ReadFull(br, magic); err != nil || (string(magic) != persistMagic && string(magic) != persistMagicV1) {
		return nil, bad("not a saved filesystem")
	}
	v1 := string(magic) == persistMagicV1
	// blob reads n bytes without allocating before they are there: a
	// lying length must not cost memory.
	blob := func(n uint64) ([]byte, bool) {
		var data bytes.Buffer
		if _, err := io.CopyN(&data, br, int64(n)); err != nil {
			return nil, false
		}
		return data.Bytes()[:n:n], true
	}
	charge := func(n int64) error {
		if q := opts.Quota.MaxBytes; q > 0 && fs.bytes+n > q {
			return fmt.Errorf("memfs: load: files over the quota of %d bytes: %w", q, errno.ENOSPC)
		}
		fs.bytes += n
		return nil
	}
	count, err := binary.ReadUvarint(br)
	// Every inode takes at least 4 bytes, and the quota bounds them too.
	if err != nil || count == 0 || count > 1<<24 {
		return nil, bad("inode count")
	}
	if q := opts.Quota.MaxInodes; q > 0 && count > uint64(q) {
		return nil, fmt.Errorf("memfs: load: %d inodes over the quota of %d: %w", count, q, errno.ENOSPC)
	}
	nodes := make([]*Inode, 0, min(count, 4096))
	for i := uint64(0); i < count; i++ {
		kind, err := br.ReadByte()
		if err != nil || (Kind(kind) != KindDir && Kind(kind) != KindFile && (v1 || Kind(kind) != KindSymlink)) || (i == 0 && Kind(kind) != KindDir) {
			return nil, bad("inode %d kind", i)
		}
		var times [3]int64
		for t := range times {
			if times[t], err = binary.ReadVarint(br); err != nil {
				return nil, bad("inode %d times", i)
			}
		}
		n := fs.root
		if i > 0 {
			n = fs.alloc(Kind(kind), 0)
			if n.kind == KindDir {
				n.nlink = 2
			}
		}
		n.atim, n.mtim, n.ctim = times[0], times[1], times[2]
		switch {
		case n.kind == KindSymlink || (v1 && n.kind == KindFile):
			size, err := binary.ReadUvarint(br)
			if err != nil || size > maxFileSize {
				return nil, bad("inode %d size", i)
			}
			if err := charge(int64(size)); err != nil {
				return nil, err
			}
			var ok bool
			if n.data, ok = blob(size); !ok {
				return nil, bad("inode %d data", i)
			}
			n.size = int64(size)
			// A link's target is checked as Symlink checks it: a saved
			// absolute or malformed one would otherwise be resolved.
			if n.kind == KindSymlink && (checkPath(string(n.data)) != nil || n.data[0] == '/') {
				return nil, bad("inode %d: link target %q", i, n.data)
			}
		case n.kind == KindFile:
			if err := loadSparse(n, br, blob, charge); err != nil {
				if errors.Is(err, errno.ENOSPC) {
					return nil, err
				}
				return nil, bad("inode %d: %v", i, err)
			}
		}
		nodes = append(nodes, n)
	}
	ents, err := binary.ReadUvarint(br)
	if err != nil || ents > 1<<24 {
		return nil, bad("entry count")
	}
	attached := make([]bool, len(nodes))
	attached[0] = true
	for i := uint64(0); i < ents; i++ {
		var parent, child, size uint64
		for _, p := range []*uint64{&parent, &child, &size} {
			if *p, err = binary.ReadUvarint(br); err != nil {
				return nil, bad("entry %d", i)
			}
		}
		if parent >= count || child >= count || size == 0 || size > 255 {
			return nil, bad("entry %d", i)
		}
		name := make([]byte, size)
		if _, err := io.ReadFull(br, name); err != nil {
			return nil, bad("entry %d name", i)
		}
		dir, n := nodes[parent], nodes[child]
		switch {
		case dir.kind != KindDir || !attached[parent]:
			return nil, bad("entry %d: parent is not a directory listed before it", i)
		case !normal(string(name)) || strings.ContainsAny(string(name), "/\x00"):
			return nil, bad("entry %d: name %q", i, name)
		case dir.children[string(name)] != nil:
			return nil, bad("entry %d: %q listed twice or over a layer", i, name)
		case n.kind == KindDir && attached[child]:
			return nil, bad("entry %d: a directory with two names", i)
		case dir.readOnly:
			return nil, bad("entry %d: inside a layer", i)
		}
		if q := opts.Quota.MaxInodes; q > 0 && fs.entries >= q {
			return nil, fmt.Errorf("memfs: load: names over the quota of %d: %w", q, errno.ENOSPC)
		}
		fs.attach(dir, string(name), n)
		attached[child] = true
	}
	for i, ok := range attached {
		if !ok {
			return nil, bad("inode %d has no name", i)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, bad("trailing bytes")
	}
	return fs, nil
}
