package memfs

import (
	"strings"

	"github.com/airlock-sandbox/airlock/internal/wasi/errno"
)

// Linux's limits, so guest code sees the errors it would see natively.
const (
	MaxPath    = 4096 // bytes in a whole path an operation accepts
	maxNameLen = 255  // bytes in one component
)

// checkPath rejects paths no operation may see: empty, NUL-carrying (a C
// string would end there, so the guest and host would disagree on the name)
// and over-long ones.
func checkPath(p string) error {
	if p == "" {
		return errno.ENOENT
	}
	if strings.IndexByte(p, 0) >= 0 {
		return errno.EILSEQ
	}
	if len(p) > MaxPath {
		return errno.ENAMETOOLONG
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if i-start > maxNameLen {
				return errno.ENAMETOOLONG
			}
			start = i + 1
		}
	}
	return nil
}

// where is a path resolved up to, but not including, its last component.
// Mutating operations need the parent and the name rather than the inode.
type where struct {
	dir   *Inode // live or removed directory holding the last component
	name  string // last component: "" (path was all slashes), ".", ".." or a real name
	slash bool   // path ended in '/', so the result must be a directory
}

// normal reports whether name is an ordinary entry name, one that can be
// created, removed or renamed (not "", "." or "..").
func normal(name string) bool {
	return name != "" && name != "." && name != ".."
}

// target is the inode the last component names, or nil if there is none.
func (w where) target() *Inode {
	switch w.name {
	case "", ".":
		return w.dir
	case "..":
		return w.dir.parent
	}
	return w.dir.children[w.name]
}

// checkDir vets a directory handle passed in by the caller.
func (fs *FS) checkDir(dir *Inode) error {
	if dir == nil || dir.fs != fs {
		return errno.EBADF
	}
	if dir.kind != KindDir {
		return errno.ENOTDIR
	}
	return nil
}

// resolve walks every component of p but the last, starting at dir (or the
// root when p is absolute). ".." at the root stays at the root: the root is
// the guest's whole world and there is nothing above it to escape to.
//
// Errors: ENOENT (empty path, missing intermediate), EILSEQ (NUL),
// ENAMETOOLONG, ENOTDIR (intermediate or dir is a file), EBADF (dir is nil
// or belongs to another FS and p is relative).
func (fs *FS) resolve(dir *Inode, p string) (where, error) {
	if err := checkPath(p); err != nil {
		return where{}, err
	}
	cur := dir
	if p[0] == '/' {
		cur = fs.root
	} else if err := fs.checkDir(dir); err != nil {
		return where{}, err
	}
	end := len(p)
	for end > 0 && p[end-1] == '/' {
		end--
	}
	slash := end < len(p)
	body := p[:end]
	last := body
	if i := strings.LastIndexByte(body, '/'); i >= 0 {
		last = body[i+1:]
		body = body[:i]
	} else {
		body = ""
	}
	for body != "" {
		var comp string
		comp, body, _ = strings.Cut(body, "/")
		if cur.kind != KindDir {
			return where{}, errno.ENOTDIR
		}
		switch comp {
		case "", ".":
		case "..":
			cur = cur.parent
		default:
			next := cur.children[comp]
			if next == nil {
				return where{}, errno.ENOENT
			}
			cur = next
		}
	}
	if cur.kind != KindDir {
		return where{}, errno.ENOTDIR
	}
	return where{dir: cur, name: last, slash: slash}, nil
}
