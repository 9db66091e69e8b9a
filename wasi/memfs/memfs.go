// Package memfs is the guest's whole filesystem: a tree of directories and
// regular files held only in Go memory.
//
// Airlock runs untrusted Python, so the guest must never reach a host file.
// Rather than filter host paths, this package has none: there is no code
// path from an operation here to the os package, and ".." at the root stays
// at the root. The host puts request files in and takes results out with
// the host-side helpers (WriteFile, ReadFile, MkdirAll, Walk) before and
// after a run.
//
// Each FS serves one run. It is not safe for concurrent use and has no
// locks: the WASI layer calls it from the single goroutine running the
// guest, and the host reads it only after the run has returned.
//
// Operations the guest can trigger return nil or an errno.Errno, never any
// other error, and do not panic on any input. Sizes and inode counts are
// limited by a Quota so the guest cannot exhaust host memory through the
// filesystem; a refusal for quota is remembered (QuotaHit) so the host can
// report why a run failed.
//
// There are no devices or permission bits: everything is a directory, a
// regular file or a symbolic link, and the guest may read and write all of
// it. A link's target is a relative path inside the same filesystem
// (absolute targets are refused); resolving it never leaves the tree, nor,
// under the Beneath rule, the directory the lookup started from.
package memfs

import (
	iofs "io/fs"
	"maps"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// maxFileSize bounds one file (1 TiB); beyond it writes fail with EFBIG
// whatever the quota, so offset arithmetic never overflows.
const maxFileSize = 1 << 40

// Kind is an inode's type. The zero Kind is not a valid inode type; it is
// what a nil *Inode reports.
type Kind uint8

const (
	KindDir Kind = iota + 1
	KindFile
	KindSymlink
)

// Quota limits a filesystem. Zero (or negative) means unlimited, which is
// only sensible for trusted content: an unlimited FS lets the guest
// allocate as much host memory as it likes.
type Quota struct {
	// MaxBytes limits the size of all live files and links together,
	// holes in sparse files included, as on a disk without sparse files:
	// whatever the guest makes can leave the sandbox whole within it.
	// Holes are still not stored (sparse.go), and spare capacity is kept
	// no larger than what is stored, so file memory stays within twice
	// MaxBytes.
	MaxBytes int64
	// MaxInodes limits files plus directories, the root included. It
	// also caps names: Link, and creating, fail once the tree holds
	// MaxInodes names, or extra names would be memory the quota never
	// sees (and a tree Load refuses).
	MaxInodes int
}

// Options configure New.
type Options struct {
	Quota Quota
	// Now returns nanoseconds since the Unix epoch for timestamps; nil
	// means time.Now. Hosts wanting reproducible runs pass a fake clock.
	Now func() int64
}

// FS is an in-memory filesystem. Create it with New.
type FS struct {
	root     *Inode
	quota    Quota
	now      func() int64
	nextIno  uint64
	bytes    int64 // sum of size over files and links not yet freed
	inodes   int   // inodes not yet freed
	entries  int   // directory entries (names) in the whole tree
	quotaHit bool
}

// Inode is a file or directory. Its pointer is its identity: hard links to
// one file share one *Inode.
type Inode struct {
	fs    *FS // owner, so handles from another FS are refused
	kind  Kind
	ino   uint64
	nlink uint64 // files: directory entries; dirs: 2 + subdirs, 0 once removed
	open  int    // Retain count (open fds)
	freed bool   // nlink and open both reached 0: released from the quota for good
	// readOnly marks what a Layer mounted: its data is shared with every
	// FS the layer is mounted in, so nothing may change it or its names.
	readOnly bool

	atim, mtim, ctim int64

	data []byte // a file's dense prefix (sparse.go); a symbolic link's target
	ext  []extent
	size int64 // files and links: the length Size reports

	// Directories. parent of the root is the root; a removed directory
	// keeps the parent it was removed from so "." and ".." still work.
	parent   *Inode
	children map[string]*Inode
	peak     int        // most children since the map was last made
	sorted   []DirEntry // ReadDir snapshot, never modified once built
	sortedOK bool       // sorted matches children
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name  string
	Inode *Inode
}

// Kind returns the inode's type, or 0 for a nil inode.
func (n *Inode) Kind() Kind {
	if n == nil {
		return 0
	}
	return n.kind
}

// SetDirReadOnly makes the directory at path (from the root) read-only to
// every operation (true), as a mounted Layer's are, or writable again
// (false): for a directory the host fills with files of its own (/dev),
// where the guest may create, remove or rename nothing. Not for a Layer's
// directories, which share their entries with every filesystem mounting
// them.
func (fs *FS) SetDirReadOnly(path string, readOnly bool) error {
	n, err := fs.Lookup(fs.root, path)
	if err != nil {
		return err
	}
	if n.kind != KindDir {
		return errno.ENOTDIR
	}
	n.readOnly = readOnly
	return nil
}

// ReadOnly tells whether n came from a mounted Layer: it cannot be
// written, truncated, renamed or removed, nor can entries be added to or
// removed from such a directory (EROFS).
func (n *Inode) ReadOnly() bool { return n != nil && n.readOnly }

// Ino returns an inode number unique within its FS and never reused.
func (n *Inode) Ino() uint64 {
	if n == nil {
		return 0
	}
	return n.ino
}

// Size returns a file's length in bytes, or a symbolic link's target's, as
// lstat(2) does. Directories report 0.
func (n *Inode) Size() int64 {
	if n == nil {
		return 0
	}
	return n.size
}

// Nlink returns the link count as POSIX defines it: a file's number of
// names, a directory's 2 plus its subdirectories, 0 once unlinked or
// removed.
func (n *Inode) Nlink() uint64 {
	if n == nil {
		return 0
	}
	return n.nlink
}

// Times returns the access, modification and status-change times in
// nanoseconds since the epoch. Reads do not update atim (as with the
// noatime mount option), which keeps reads cheap and runs reproducible.
func (n *Inode) Times() (atim, mtim, ctim int64) {
	if n == nil {
		return 0, 0, 0
	}
	return n.atim, n.mtim, n.ctim
}

// New returns an empty filesystem holding only the root directory "/".
// The root counts as one inode against the quota.
func New(opts Options) *FS {
	fs := &FS{quota: opts.Quota, now: opts.Now}
	if fs.now == nil {
		fs.now = func() int64 { return time.Now().UnixNano() }
	}
	root := fs.alloc(KindDir, fs.now())
	root.parent = root
	root.nlink = 2
	fs.root = root
	return fs
}

// Root returns the root directory.
func (fs *FS) Root() *Inode { return fs.root }

// Parent returns a directory's parent; the root's parent is the root. It
// returns nil for files (which have no single parent) and for nil or
// foreign inodes.
func (fs *FS) Parent(dir *Inode) *Inode {
	if dir == nil || dir.fs != fs || dir.kind != KindDir {
		return nil
	}
	return dir.parent
}

// Quota returns the limits fs was made with.
func (fs *FS) Quota() Quota { return fs.quota }

// QuotaHit reports whether any operation has been refused for quota.
func (fs *FS) QuotaHit() bool { return fs.quotaHit }

// Usage returns the bytes and inodes charged to the quota: every file and
// directory that still has a name or is held by Retain.
func (fs *FS) Usage() (bytes int64, inodes int) { return fs.bytes, fs.inodes }

// alloc makes an inode and charges it, without a quota check.
func (fs *FS) alloc(kind Kind, now int64) *Inode {
	fs.nextIno++
	fs.inodes++
	n := &Inode{fs: fs, kind: kind, ino: fs.nextIno, atim: now, mtim: now, ctim: now}
	if kind == KindDir {
		n.children = make(map[string]*Inode)
	}
	return n
}

// create makes a new inode named name in the live directory dir.
func (fs *FS) create(dir *Inode, name string, kind Kind) (*Inode, error) {
	// Names count too, as in Link: after links, a tree could otherwise
	// hold up to twice MaxInodes names, which Load then refuses.
	if q := fs.quota.MaxInodes; q > 0 && (fs.inodes >= q || fs.entries >= q) {
		fs.quotaHit = true
		return nil, errno.ENOSPC
	}
	now := fs.now()
	n := fs.alloc(kind, now)
	if kind == KindDir {
		n.nlink = 2
	}
	fs.attach(dir, name, n)
	dir.mtim, dir.ctim = now, now
	return n, nil
}

// attach adds the entry name -> n to dir and counts the link.
func (fs *FS) attach(dir *Inode, name string, n *Inode) {
	dir.children[name] = n
	dir.peak = max(dir.peak, len(dir.children))
	dir.sorted, dir.sortedOK = nil, false // a stale listing would keep removed inodes alive
	fs.entries++
	if n.kind == KindDir {
		n.parent = dir
		dir.nlink++ // n's ".."
	} else {
		n.nlink++
	}
}

// detach removes the entry name -> n from dir and uncounts the link. The
// caller frees n if that was its last reference.
func (fs *FS) detach(dir *Inode, name string, n *Inode) {
	delete(dir.children, name)
	dir.sorted, dir.sortedOK = nil, false
	// Go maps never shrink: a directory that once held many names would
	// keep their room, outside the quota, after they are gone.
	if dir.peak >= 64 && len(dir.children) < dir.peak/4 {
		// (maps.Clone would keep the old size.)
		smaller := make(map[string]*Inode, len(dir.children))
		maps.Copy(smaller, dir.children)
		dir.children, dir.peak = smaller, len(smaller)
	}
	fs.entries--
	if n.kind == KindDir {
		dir.nlink--
	} else {
		n.nlink--
	}
}

// maybeFree returns n's bytes and inode to the quota once nothing refers
// to it: no name and no open fd.
func (fs *FS) maybeFree(n *Inode) {
	if n.nlink != 0 || n.open != 0 || n.freed {
		return
	}
	n.freed = true
	fs.inodes--
	fs.bytes -= n.charged()
	n.data, n.ext = nil, nil
	n.sorted, n.sortedOK = nil, false
}

// Retain records that an open fd refers to n, keeping it (and its quota
// charge) alive after its last name is removed. Nil and foreign inodes
// are ignored, and an inode already freed (no name, no fd) stays freed:
// the WASI layer must Retain what Open or Lookup returned before the next
// operation can unlink it.
func (fs *FS) Retain(n *Inode) {
	if n == nil || n.fs != fs {
		return
	}
	n.open++
}

// Release undoes one Retain. When the last fd of an unlinked inode closes,
// its bytes and inode are returned to the quota. Unbalanced calls and nil
// or foreign inodes are ignored.
func (fs *FS) Release(n *Inode) {
	if n == nil || n.fs != fs || n.open == 0 {
		return
	}
	n.open--
	fs.maybeFree(n)
}

// Lookup returns the inode path names, relative to dir, or to the root if
// path starts with "/". Repeated slashes collapse, "." is the directory
// itself and ".." its parent, with the root its own parent. A trailing
// slash requires a directory. Symbolic links are followed, the last one
// too unless NoFollow; see Rule.
//
// # Errors
//
//   - ENOENT: path is empty or a component does not exist.
//   - ENOTDIR: an intermediate component, dir, or a path ending in "/" is
//     a file.
//   - EILSEQ: path contains a NUL byte.
//   - ENAMETOOLONG: path exceeds 4096 bytes or a component 255.
//   - ELOOP: more than 40 symbolic links on the way.
//   - EPERM: the path leaves dir under Beneath.
//   - EBADF: dir is nil or from another FS and path is relative.
func (fs *FS) Lookup(dir *Inode, path string, rules ...Rule) (*Inode, error) {
	r := rulesOf(rules)
	w, err := fs.resolve(dir, path, r, r&NoFollow == 0)
	if err != nil {
		return nil, err
	}
	n := w.target()
	if n == nil {
		return nil, errno.ENOENT
	}
	if w.slash && n.kind != KindDir {
		return nil, errno.ENOTDIR
	}
	return n, nil
}

// OpenFlags select Open's behaviour. The values are wasi_snapshot_preview1's
// oflags, so the WASI layer can pass them through.
type OpenFlags uint16

const (
	OCreat     OpenFlags = 1 << 0 // create a file if path does not exist
	ODirectory OpenFlags = 1 << 1 // fail unless path is a directory
	OExcl      OpenFlags = 1 << 2 // with OCreat: fail if path exists
	OTrunc     OpenFlags = 1 << 3 // truncate an existing file to 0
)

// Open resolves path like Lookup and applies flags with Linux open(2)
// semantics. It does not Retain the result; the caller does that when it
// makes an fd.
//
// # Errors
//
// Those of Lookup, and:
//   - EEXIST: OCreat|OExcl and path exists.
//   - EISDIR: path is a directory and OCreat or OTrunc is set, or OCreat
//     would create a file named with a trailing "/".
//   - ENOTDIR: ODirectory and path is a file.
//   - EINVAL: OCreat|ODirectory for a path that does not exist (as Linux),
//     or unknown flag bits.
//   - ENOENT: OCreat in a directory that has been removed.
//   - ENOSPC: creating would exceed Quota.MaxInodes.
//   - ELOOP: NoFollow and path names a symbolic link (as O_NOFOLLOW).
//
// A symbolic link in the last component is followed unless NoFollow, or
// OCreat|OExcl, which never follows one (the name exists: EEXIST). OCreat
// through a dangling link creates its target, as open(2) does.
func (fs *FS) Open(dir *Inode, path string, flags OpenFlags, rules ...Rule) (*Inode, error) {
	if flags&^(OCreat|ODirectory|OExcl|OTrunc) != 0 {
		return nil, errno.EINVAL
	}
	r := rulesOf(rules)
	w, err := fs.resolve(dir, path, r, r&NoFollow == 0 && flags&(OCreat|OExcl) != OCreat|OExcl)
	if err != nil {
		return nil, err
	}
	n := w.target()
	if n == nil {
		switch {
		case flags&OCreat == 0:
			return nil, errno.ENOENT
		case flags&ODirectory != 0:
			return nil, errno.EINVAL
		case w.slash:
			return nil, errno.EISDIR
		case w.dir.nlink == 0:
			return nil, errno.ENOENT
		case w.dir.readOnly:
			return nil, errno.EROFS
		}
		return fs.create(w.dir, w.name, KindFile)
	}
	if flags&(OCreat|OExcl) == OCreat|OExcl {
		return nil, errno.EEXIST
	}
	if n.kind == KindSymlink {
		return nil, errno.ELOOP
	}
	if n.kind == KindDir {
		if flags&(OCreat|OTrunc) != 0 {
			return nil, errno.EISDIR
		}
		return n, nil
	}
	if w.slash || flags&ODirectory != 0 {
		return nil, errno.ENOTDIR
	}
	if flags&OTrunc != 0 && n.readOnly {
		return nil, errno.EROFS
	}
	if flags&OTrunc != 0 && !n.freed {
		fs.truncate(n, 0) // shrinking cannot fail
		now := fs.now()
		n.mtim, n.ctim = now, now
	}
	return n, nil
}

// Mkdir creates a directory.
//
// # Errors
//
// Those of Lookup for the parent, and:
//   - EEXIST: path exists (including ".", ".." and "/").
//   - ENOENT: the parent has been removed.
//   - ENOSPC: Quota.MaxInodes would be exceeded.
func (fs *FS) Mkdir(dir *Inode, path string, rules ...Rule) error {
	w, err := fs.resolve(dir, path, rulesOf(rules), false)
	if err != nil {
		return err
	}
	if !normal(w.name) || w.dir.children[w.name] != nil {
		return errno.EEXIST
	}
	if w.dir.nlink == 0 {
		return errno.ENOENT
	}
	if w.dir.readOnly {
		return errno.EROFS
	}
	_, err = fs.create(w.dir, w.name, KindDir)
	return err
}

// Rmdir removes an empty directory. If it is open (Retain) it lives on,
// empty, until Release.
//
// # Errors
//
// Those of Lookup, and:
//   - ENOTDIR: path is a file.
//   - ENOTEMPTY: the directory has entries, or the last component is "..".
//   - EINVAL: the last component is ".".
//   - EBUSY: path is the root.
func (fs *FS) Rmdir(dir *Inode, path string, rules ...Rule) error {
	w, err := fs.resolve(dir, path, rulesOf(rules), false)
	if err != nil {
		return err
	}
	switch w.name {
	case "":
		return errno.EBUSY
	case ".":
		return errno.EINVAL
	case "..":
		return errno.ENOTEMPTY
	}
	n := w.dir.children[w.name]
	switch {
	case n == nil:
		return errno.ENOENT
	case n.kind != KindDir:
		return errno.ENOTDIR
	case n.readOnly || w.dir.readOnly:
		return errno.EROFS
	case len(n.children) != 0:
		return errno.ENOTEMPTY
	}
	now := fs.now()
	fs.detach(w.dir, w.name, n)
	n.nlink = 0
	n.ctim = now
	w.dir.mtim, w.dir.ctim = now, now
	fs.maybeFree(n)
	return nil
}

// Unlink removes a file's or a symbolic link's name (never the link's
// target). The file lives on while other names or open fds (Retain) refer
// to it.
//
// # Errors
//
// Those of Lookup, and:
//   - EISDIR: path is a directory (as Linux; includes ".", ".." and "/").
//   - ENOTDIR: path names a file with a trailing "/".
func (fs *FS) Unlink(dir *Inode, path string, rules ...Rule) error {
	w, err := fs.resolve(dir, path, rulesOf(rules), false)
	if err != nil {
		return err
	}
	if !normal(w.name) {
		return errno.EISDIR
	}
	n := w.dir.children[w.name]
	switch {
	case n == nil:
		return errno.ENOENT
	case n.kind == KindDir:
		return errno.EISDIR
	case w.slash:
		return errno.ENOTDIR
	case n.readOnly || w.dir.readOnly:
		return errno.EROFS
	}
	now := fs.now()
	fs.detach(w.dir, w.name, n)
	n.ctim = now
	w.dir.mtim, w.dir.ctim = now, now
	fs.maybeFree(n)
	return nil
}

// Rename moves oldPath to newPath with POSIX rename(2) semantics: an
// existing file or empty directory at newPath is replaced in one step, and
// renaming a name onto another name of the same inode does nothing.
//
// # Errors
//
// Those of Lookup for either path, and:
//   - ENOENT: oldPath does not exist, or newPath's directory was removed.
//   - EBUSY: either last component is ".", ".." or the root.
//   - EINVAL: moving a directory into itself or its own subtree.
//   - EISDIR: oldPath is a file and newPath a directory.
//   - ENOTDIR: oldPath is a directory and newPath a file, or oldPath is a
//     file and either path ends in "/".
//   - ENOTEMPTY: newPath is a non-empty directory.
func (fs *FS) Rename(oldDir *Inode, oldPath string, newDir *Inode, newPath string) error {
	return fs.RenameRules(oldDir, oldPath, 0, newDir, newPath, 0)
}

// RenameRules is Rename with each path resolved under its own rules (two
// directory descriptors need not grant the same). Symbolic links are
// renamed, not followed.
func (fs *FS) RenameRules(oldDir *Inode, oldPath string, oldRules Rule, newDir *Inode, newPath string, newRules Rule) error {
	ow, err := fs.resolve(oldDir, oldPath, oldRules, false)
	if err != nil {
		return err
	}
	nw, err := fs.resolve(newDir, newPath, newRules, false)
	if err != nil {
		return err
	}
	if !normal(ow.name) || !normal(nw.name) {
		return errno.EBUSY
	}
	src := ow.dir.children[ow.name]
	if src == nil {
		return errno.ENOENT
	}
	if src.kind != KindDir && (ow.slash || nw.slash) {
		return errno.ENOTDIR
	}
	if nw.dir.nlink == 0 {
		return errno.ENOENT
	}
	dst := nw.dir.children[nw.name]
	if dst == src {
		return nil
	}
	if src.readOnly || ow.dir.readOnly || nw.dir.readOnly || dst.ReadOnly() {
		return errno.EROFS
	}
	if src.kind == KindDir {
		// Live directories chain up to the root, whose parent is itself.
		for p := nw.dir; ; p = p.parent {
			if p == src {
				return errno.EINVAL
			}
			if p == p.parent {
				break
			}
		}
	}
	if dst != nil {
		switch {
		case src.kind == KindDir && dst.kind != KindDir:
			return errno.ENOTDIR
		case src.kind != KindDir && dst.kind == KindDir:
			return errno.EISDIR
		case dst.kind == KindDir && len(dst.children) != 0:
			return errno.ENOTEMPTY
		}
	}
	now := fs.now()
	if dst != nil {
		fs.detach(nw.dir, nw.name, dst)
		if dst.kind == KindDir {
			dst.nlink = 0
		}
		dst.ctim = now
		fs.maybeFree(dst)
	}
	fs.detach(ow.dir, ow.name, src)
	fs.attach(nw.dir, nw.name, src)
	src.ctim = now
	ow.dir.mtim, ow.dir.ctim = now, now
	nw.dir.mtim, nw.dir.ctim = now, now
	return nil
}

// Link gives the file at oldPath the additional name newPath.
//
// # Errors
//
// Those of Lookup for either path, and:
//   - EPERM: oldPath is a directory.
//   - EEXIST: newPath exists (including ".", ".." and "/").
//   - ENOENT: newPath ends in "/" or its directory was removed.
//   - ENOSPC: the tree already holds Quota.MaxInodes names.
func (fs *FS) Link(oldDir *Inode, oldPath string, newDir *Inode, newPath string) error {
	return fs.LinkRules(oldDir, oldPath, 0, newDir, newPath, 0)
}

// LinkRules is Link with each path resolved under its own rules; with
// NoFollow in oldRules a symbolic link at oldPath gets the new name
// itself, as linkat(2) without AT_SYMLINK_FOLLOW.
func (fs *FS) LinkRules(oldDir *Inode, oldPath string, oldRules Rule, newDir *Inode, newPath string, newRules Rule) error {
	src, err := fs.Lookup(oldDir, oldPath, oldRules)
	if err != nil {
		return err
	}
	if src.kind == KindDir {
		return errno.EPERM
	}
	if src.readOnly {
		return errno.EXDEV // another "mount", as link(2) says across filesystems
	}
	nw, err := fs.resolve(newDir, newPath, newRules&Beneath, false)
	if err != nil {
		return err
	}
	if !normal(nw.name) || nw.dir.children[nw.name] != nil {
		return errno.EEXIST
	}
	if nw.slash || nw.dir.nlink == 0 {
		return errno.ENOENT
	}
	if nw.dir.readOnly {
		return errno.EROFS
	}
	if q := fs.quota.MaxInodes; q > 0 && fs.entries >= q {
		fs.quotaHit = true
		return errno.ENOSPC
	}
	now := fs.now()
	fs.attach(nw.dir, nw.name, src)
	src.ctim = now
	nw.dir.mtim, nw.dir.ctim = now, now
	return nil
}

// Symlink makes path a symbolic link to target, as symlink(2). The target
// is kept as given and resolved only when a lookup meets the link.
//
// # Errors
//
// Those of Lookup for path's directory, and:
//   - EPERM: target is absolute (wasmtime's answer): a link may only lead
//     to a place relative to itself, inside the filesystem.
//   - ENOENT: target is empty (as Linux), path ends in "/" and does not
//     exist, or its directory was removed.
//   - EILSEQ, ENAMETOOLONG: target holds a NUL or is too long for a path.
//   - EEXIST: path exists (including ".", ".." and "/"), as a link too.
//   - ENOSPC: Quota.MaxInodes, or Quota.MaxBytes for the target, would be
//     exceeded.
func (fs *FS) Symlink(target string, dir *Inode, path string, rules ...Rule) error {
	if err := checkPath(target); err != nil {
		return err
	}
	if target[0] == '/' {
		return errno.EPERM
	}
	w, err := fs.resolve(dir, path, rulesOf(rules), false)
	if err != nil {
		return err
	}
	if old := w.dir.children[w.name]; old != nil && w.slash && old.kind != KindDir {
		return errno.ENOTDIR // "file/": not a directory, as wasmtime and Linux answer
	}
	if !normal(w.name) || w.dir.children[w.name] != nil {
		return errno.EEXIST
	}
	if w.slash || w.dir.nlink == 0 {
		return errno.ENOENT
	}
	if w.dir.readOnly {
		return errno.EROFS
	}
	size := int64(len(target))
	if q := fs.quota.MaxBytes; q > 0 && fs.bytes > q-size {
		fs.quotaHit = true
		return errno.ENOSPC
	}
	n, err := fs.create(w.dir, w.name, KindSymlink)
	if err != nil {
		return err
	}
	n.data = []byte(target)[:size:size]
	n.size = size
	fs.bytes += size
	return nil
}

// Readlink returns the target of the symbolic link at path, which is not
// followed (a trailing slash would follow it, leaving no link to read).
//
// # Errors
//
// Those of Lookup, and EINVAL when path is not a symbolic link.
func (fs *FS) Readlink(dir *Inode, path string, rules ...Rule) (string, error) {
	n, err := fs.Lookup(dir, path, rulesOf(rules)|NoFollow)
	if err != nil {
		return "", err
	}
	if n.kind != KindSymlink {
		return "", errno.EINVAL
	}
	return string(n.data), nil
}

// checkFile vets a file handle for I/O.
func (fs *FS) checkFile(n *Inode) error {
	if n == nil || n.fs != fs {
		return errno.EBADF
	}
	switch n.kind {
	case KindDir:
		return errno.EISDIR
	case KindSymlink:
		return errno.EINVAL
	}
	return nil
}

// ReadAt reads from a file at off like pread(2): a short count at end of
// file, and 0, nil at or past it.
//
// # Errors
//
//   - EISDIR: n is a directory.
//   - EINVAL: off is negative.
//   - EBADF: n is nil or from another FS.
func (fs *FS) ReadAt(n *Inode, p []byte, off int64) (int, error) {
	if err := fs.checkFile(n); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errno.EINVAL
	}
	if off >= n.size {
		return 0, nil
	}
	return n.readAt(p, off), nil
}

// WriteAt writes p at off like pwrite(2). A gap it leaves reads as zeros;
// a large one is a hole, not stored. It writes all of p or nothing.
//
// # Errors
//
//   - ENOSPC: the file would grow past Quota.MaxBytes (holes count);
//     nothing is written.
//   - EFBIG: off+len(p) exceeds 1 TiB.
//   - EINVAL: off is negative.
//   - EISDIR: n is a directory.
//   - EBADF: n is nil, from another FS, or was freed (no name and no fd).
func (fs *FS) WriteAt(n *Inode, p []byte, off int64) (int, error) {
	if err := fs.checkFile(n); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errno.EINVAL
	}
	if n.freed {
		return 0, errno.EBADF
	}
	if n.readOnly {
		return 0, errno.EROFS
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > maxFileSize || off > maxFileSize-int64(len(p)) {
		return 0, errno.EFBIG
	}
	if err := fs.writeAt(n, p, off); err != nil {
		return 0, err
	}
	now := fs.now()
	n.mtim, n.ctim = now, now
	return len(p), nil
}

// Truncate sets a file's size like ftruncate(2). Growth is a hole: it
// reads as zeros and is not stored, but counts against the quota.
//
// # Errors
//
//   - ENOSPC: the growth would pass Quota.MaxBytes; nothing changes.
//   - EFBIG: size exceeds 1 TiB.
//   - EINVAL: size is negative.
//   - EISDIR: n is a directory.
//   - EBADF: n is nil, from another FS, or was freed.
func (fs *FS) Truncate(n *Inode, size int64) error {
	if err := fs.checkFile(n); err != nil {
		return err
	}
	if size < 0 {
		return errno.EINVAL
	}
	if n.freed {
		return errno.EBADF
	}
	if n.readOnly {
		return errno.EROFS
	}
	if err := fs.truncate(n, size); err != nil {
		return err
	}
	now := fs.now()
	n.mtim, n.ctim = now, now
	return nil
}

// resize sets len(n.data), the dense prefix, to size (at most n's size,
// which the caller has charged). It keeps cap(n.data) <= 2*len(n.data),
// so file memory is at most twice the byte quota however the guest
// mixes growth and truncation, while growth still at least doubles the
// length, making sequential appends amortised O(1) per byte.
func (fs *FS) resize(n *Inode, size int64) error {
	if size > maxFileSize || size > math.MaxInt {
		return errno.EFBIG
	}
	old := len(n.data)
	ns := int(size)
	switch c := cap(n.data); {
	case ns > c:
		nc := ns
		if old <= math.MaxInt/2 {
			nc = max(nc, 2*old)
		}
		if q := fs.quota.MaxBytes; q > 0 && int64(nc) > q {
			nc = max(ns, int(q)) // q < nc <= MaxInt, so int(q) is exact
		}
		buf := make([]byte, ns, nc)
		copy(buf, n.data)
		n.data = buf
	case ns > old:
		// Earlier truncation may have left old bytes in the capacity.
		clear(n.data[old:ns])
		n.data = n.data[:ns]
	case c > 2*ns:
		// Shrinking below half the capacity: give the memory back so
		// truncated files cannot pin more than the quota accounts for.
		buf := make([]byte, ns)
		copy(buf, n.data)
		n.data = buf
	default:
		n.data = n.data[:ns]
	}
	return nil
}

// SetTimes sets the access and/or modification time and stamps the
// status-change time with now, like utimensat(2). Nil, foreign and
// read-only inodes are ignored (the WASI layer answers EROFS for the last).
func (fs *FS) SetTimes(n *Inode, atim, mtim int64, setAtim, setMtim bool) {
	if n == nil || n.fs != fs || n.readOnly {
		return
	}
	if setAtim {
		n.atim = atim
	}
	if setMtim {
		n.mtim = mtim
	}
	n.ctim = fs.now()
}

// ReadDir lists a directory sorted by name, without "." and "..".
//
// The result is a snapshot shared between calls until the directory next
// changes, so paging through it by index costs O(1) per call; callers must
// not modify it. A change makes the next call rebuild the list, leaving
// earlier snapshots intact.
//
// # Errors
//
//   - ENOTDIR: dir is a file.
//   - EBADF: dir is nil or from another FS.
func (fs *FS) ReadDir(dir *Inode) ([]DirEntry, error) {
	if err := fs.checkDir(dir); err != nil {
		return nil, err
	}
	if !dir.sortedOK {
		s := make([]DirEntry, 0, len(dir.children))
		for name, n := range dir.children {
			s = append(s, DirEntry{Name: name, Inode: n})
		}
		slices.SortFunc(s, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
		dir.sorted, dir.sortedOK = s, true
	}
	return dir.sorted, nil
}

// MkdirAll creates path and any missing parents, relative to the root,
// and returns the final directory. It is a host-side helper.
//
// # Errors
//
// Those of checking a path (ENOENT, EILSEQ, ENAMETOOLONG), and:
//   - ENOTDIR: a component exists and is a file.
//   - EROFS: a missing directory would go into a layer's (read-only)
//     directory, where the guest could not make it either, and where a
//     session's Save, which keeps only what is not a layer's, would lose it.
//   - ENOSPC: Quota.MaxInodes would be exceeded; the directories made so
//     far remain.
func (fs *FS) MkdirAll(path string) (*Inode, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	cur := fs.root
	for comp := range strings.SplitSeq(path, "/") {
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = cur.parent
			continue
		}
		next := cur.children[comp]
		if next == nil {
			if cur.readOnly {
				return nil, errno.EROFS
			}
			var err error
			if next, err = fs.create(cur, comp, KindDir); err != nil {
				return nil, err
			}
		} else if next.kind != KindDir {
			return nil, errno.ENOTDIR
		}
		cur = next
	}
	return cur, nil
}

// WriteFile creates or replaces the contents of the file at path, relative
// to the root, creating parent directories. It is a host-side helper and
// is subject to the quota like the guest.
//
// # Errors
//
// Those of MkdirAll and Open with OCreat, and:
//   - ENOSPC: the contents exceed Quota.MaxBytes; an existing file keeps
//     its old contents, a new one is left empty.
func (fs *FS) WriteFile(path string, data []byte) error {
	if err := checkPath(path); err != nil {
		return err
	}
	body := strings.TrimRight(path, "/")
	if body == "" {
		return errno.EISDIR
	}
	if i := strings.LastIndexByte(body, '/'); i >= 0 {
		if _, err := fs.MkdirAll(body[:i+1]); err != nil {
			return err
		}
	}
	n, err := fs.Open(fs.root, path, OCreat)
	if err != nil {
		return err
	}
	if n.readOnly {
		return errno.EROFS
	}
	if err := fs.charge(int64(len(data)) - n.size); err != nil {
		return err
	}
	fs.truncate(n, 0)
	if err := fs.resize(n, int64(len(data))); err != nil {
		return err
	}
	copy(n.data, data)
	n.size = int64(len(data))
	fs.bytes += n.size
	now := fs.now()
	n.mtim, n.ctim = now, now
	return nil
}

// ReadFile returns a copy of the contents of the file at path, relative to
// the root, holes as zeros. It is a host-side helper.
//
// # Errors
//
// Those of Lookup, EISDIR if path is a directory, and EFBIG for a sparse
// file larger than 2 GiB in a filesystem without a byte quota: its holes
// would be host memory nothing bounds. Under a quota every file reads.
func (fs *FS) ReadFile(path string) ([]byte, error) {
	n, err := fs.Lookup(fs.root, path)
	if err != nil {
		return nil, err
	}
	if n.kind == KindDir {
		return nil, errno.EISDIR
	}
	b, err := fs.contents(n)
	if err != nil || !n.dense() {
		return b, err
	}
	return append([]byte{}, b...), nil
}

// View returns the contents of the file at path without copying them (a
// sparse file's are copied, holes as zeros): the caller must not change
// them, and they are valid until the file next changes. It is a host-side
// helper for comparing files.
//
// # Errors
// Those of ReadFile.
func (fs *FS) View(path string) ([]byte, error) {
	n, err := fs.Lookup(fs.root, path)
	if err != nil {
		return nil, err
	}
	if n.kind == KindDir {
		return nil, errno.EISDIR
	}
	return fs.contents(n)
}

// WalkFunc is called by Walk for each file and directory with its absolute
// path. Returning fs.SkipDir from a directory skips its contents (from a
// file, the rest of its directory); fs.SkipAll stops the walk cleanly; any
// other error stops the walk and is returned.
type WalkFunc func(path string, n *Inode) error

// Walk calls fn for root and everything below it, depth first, each
// directory's entries in name order, parents before children. Paths are
// absolute and clean; they can exceed 4096 bytes in trees built through
// directory handles or by renaming directories into each other. Walk is
// iterative, so depth is limited only by the inode quota, and its paths
// share one buffer, so the memory it holds grows with the longest path,
// not with depth times length (a chain of 255-byte names 10000 deep would
// otherwise pin gigabytes). Each call of fn still gets a string of its
// own: a caller that cannot afford long ones returns fs.SkipDir for a
// directory whose path is too long. fn may change the tree: each
// directory is listed just after fn visits it. It is a host-side helper.
//
// # Errors
//
// Those of Lookup for root, and whatever fn returns other than fs.SkipDir
// and fs.SkipAll.
func (fs *FS) Walk(root string, fn WalkFunc) error {
	n, err := fs.Lookup(fs.root, root)
	if err != nil {
		return err
	}
	// Each frame is one directory's remaining entries; its path is
	// buf[:pathLen].
	type frame struct {
		pathLen int
		ents    []DirEntry
	}
	visit := func(p string, n *Inode) (descend bool, err error) {
		err = fn(p, n)
		if err == iofs.SkipDir && n.kind == KindDir {
			return false, nil
		}
		return err == nil && n.kind == KindDir, err
	}
	buf := []byte(path.Clean("/" + root))
	descend, err := visit(string(buf), n)
	if err != nil {
		if err == iofs.SkipAll || err == iofs.SkipDir {
			return nil
		}
		return err
	}
	if !descend {
		return nil
	}
	if len(buf) == 1 {
		buf = buf[:0] // the root: children are "/" + name
	}
	ents, _ := fs.ReadDir(n)
	stack := []frame{{len(buf), ents}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if len(top.ents) == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		e := top.ents[0]
		top.ents = top.ents[1:]
		buf = append(append(buf[:top.pathLen], '/'), e.Name...)
		descend, err := visit(string(buf), e.Inode)
		switch {
		case err == iofs.SkipAll:
			return nil
		case err == iofs.SkipDir:
			top.ents = nil // from a file: skip the rest of this directory
			continue
		case err != nil:
			return err
		}
		if descend {
			ents, _ := fs.ReadDir(e.Inode)
			stack = append(stack, frame{len(buf), ents})
		}
	}
	return nil
}
