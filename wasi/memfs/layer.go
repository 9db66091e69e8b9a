package memfs

import (
	"crypto/sha256"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// Layer is a set of read-only files shared by many filesystems: the
// interpreter's standard library, packages. Mount puts its files into an
// FS without copying their bytes, so a layer costs its size once per
// process, not once per run.
//
// Build a layer with AddFile, then share it: after the first Mount it must
// not change (Mount only reads it, so concurrent Mounts are safe).
type Layer struct {
	files []layerFile
	paths map[string]bool // files
	dirs  map[string]bool // their ancestors
	size  int64

	digestOnce sync.Once
	digest     [32]byte
}

type layerFile struct {
	path string // clean, absolute
	data []byte
	sum  *[32]byte // data's sha256, when the caller knew it (AddFileSum)
}

// NewLayer returns an empty layer.
func NewLayer() *Layer { return &Layer{paths: map[string]bool{}, dirs: map[string]bool{}} }

// AddFile adds a file at p (an absolute path). The layer keeps data, which the
// caller must not change afterwards.
//
// # Errors
// A path that is not absolute, not clean, is the root, or is already in
// the layer (as a file, or as a directory holding other files).
func (l *Layer) AddFile(p string, data []byte) error { return l.add(layerFile{path: p, data: data}) }

// AddFileSum is AddFile of data whose sha256 the caller has checked (a
// build's stdlib against its record): Digest then takes the sum instead of
// hashing the data again, in every process.
func (l *Layer) AddFileSum(p string, data []byte, sha256 [32]byte) error {
	return l.add(layerFile{path: p, data: data, sum: &sha256})
}

func (l *Layer) add(f layerFile) error {
	p, data := f.path, f.data
	if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
		return fmt.Errorf("memfs: layer path %q must be absolute and clean", p)
	}
	if err := checkPath(p); err != nil {
		return fmt.Errorf("memfs: layer path %q: %w", p, err)
	}
	if l.paths[p] || l.dirs[p] {
		return fmt.Errorf("memfs: layer path %q added twice", p)
	}
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if l.paths[d] {
			return fmt.Errorf("memfs: layer path %q is below the file %q", p, d)
		}
	}
	for d := path.Dir(p); d != "/" && !l.dirs[d]; d = path.Dir(d) {
		l.dirs[d] = true
	}
	l.paths[p] = true
	l.files = append(l.files, f)
	l.size += int64(len(data))
	return nil
}

// Size is the sum of the layer's file sizes.
func (l *Layer) Size() int64 { return l.size }

// Len is the number of files in the layer.
func (l *Layer) Len() int { return len(l.files) }

// Mount adds the layer's files to fs, read-only. Directories the layer
// needs that fs lacks are created read-only too; existing directories
// (such as "/" or another layer's) are shared. Nothing mounted counts
// against the quota: the host chose it, and its bytes are not the run's.
//
// # Errors
// EEXIST when a layer file's path exists in fs; ENOTDIR when a directory
// the layer needs is a file. Files mounted before the error remain.
func (fs *FS) Mount(l *Layer) error {
	if l == nil {
		return nil
	}
	now := fs.now()
	for _, f := range l.files {
		dir := fs.root
		parts := strings.Split(f.path[1:], "/")
		for _, name := range parts[:len(parts)-1] {
			next := dir.children[name]
			if next == nil {
				next = fs.allocUncharged(KindDir, now)
				next.nlink = 2
				next.readOnly = true
				fs.attach(dir, name, next)
			} else if next.kind != KindDir {
				return fmt.Errorf("memfs: mount %s: %w", f.path, errno.ENOTDIR)
			}
			dir = next
		}
		name := parts[len(parts)-1]
		if dir.children[name] != nil {
			return fmt.Errorf("memfs: mount %s: %w", f.path, errno.EEXIST)
		}
		n := fs.allocUncharged(KindFile, now)
		n.readOnly = true
		n.data = f.data[:len(f.data):len(f.data)]
		n.size = int64(len(f.data))
		fs.attach(dir, name, n)
	}
	return nil
}

// allocUncharged makes an inode that the quota never sees. Its entry in
// a directory is not counted either, so that mounting a layer leaves
// Usage and the guest's room untouched.
func (fs *FS) allocUncharged(kind Kind, now int64) *Inode {
	n := fs.alloc(kind, now)
	fs.inodes--
	fs.entries-- // attach counts it back
	return n
}

// Digest is a sha256 of the layer's paths and contents, for keys of
// whatever depends on it (a snapshot image, say). It freezes the layer.
func (l *Layer) Digest() [32]byte {
	l.digestOnce.Do(func() {
		files := slices.Clone(l.files)
		slices.SortFunc(files, func(a, b layerFile) int { return strings.Compare(a.path, b.path) })
		h := sha256.New()
		for _, f := range files {
			if f.sum != nil {
				// Not the form below, so no file's bytes can pose as a sum.
				fmt.Fprintf(h, "%d %s %d sha256\x00", len(f.path), f.path, len(f.data))
				h.Write(f.sum[:])
				continue
			}
			fmt.Fprintf(h, "%d %s %d\x00", len(f.path), f.path, len(f.data))
			h.Write(f.data)
		}
		h.Sum(l.digest[:0])
	})
	return l.digest
}
