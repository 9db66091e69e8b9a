package memfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/airlock-sandbox/airlock/internal/wasi/errno"
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
		x := &Inode{fs: c, kind: n.kind, ino: n.ino, nlink: n.nlink, readOnly: n.readOnly, atim: n.atim, mtim: n.mtim, ctim: n.ctim}
		copies[n] = x
		if !n.readOnly {
			c.inodes++
		}
		switch {
		case n.kind == KindFile && n.readOnly:
			x.data = n.data
		case n.kind == KindFile || n.kind == KindSymlink:
			x.data = bytes.Clone(n.data)
			c.bytes += int64(len(n.data))
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

// The persisted form of a filesystem's writable part (see Save).
const persistMagic = "airlock-memfs\x00v1\x00"

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
		if n.kind == KindFile || n.kind == KindSymlink {
			uv(uint64(len(n.data)))
			bw.Write(n.data)
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
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != persistMagic {
		return nil, bad("not a saved filesystem")
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
		if err != nil || (Kind(kind) != KindDir && Kind(kind) != KindFile && Kind(kind) != KindSymlink) || (i == 0 && Kind(kind) != KindDir) {
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
		if n.kind == KindFile || n.kind == KindSymlink {
			size, err := binary.ReadUvarint(br)
			if err != nil || size > maxFileSize {
				return nil, bad("inode %d size", i)
			}
			if q := opts.Quota.MaxBytes; q > 0 && fs.bytes+int64(size) > q {
				return nil, fmt.Errorf("memfs: load: files over the quota of %d bytes: %w", q, errno.ENOSPC)
			}
			// Read in chunks: a lying size must not allocate before the
			// bytes are really there.
			var data bytes.Buffer
			if _, err := io.CopyN(&data, br, int64(size)); err != nil {
				return nil, bad("inode %d data", i)
			}
			n.data = data.Bytes()[:size:size]
			fs.bytes += int64(size)
			// A link's target is checked as Symlink checks it: a saved
			// absolute or malformed one would otherwise be resolved.
			if n.kind == KindSymlink && (checkPath(string(n.data)) != nil || n.data[0] == '/') {
				return nil, bad("inode %d: link target %q", i, n.data)
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
