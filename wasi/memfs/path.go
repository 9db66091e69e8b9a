package memfs

import (
	"strings"

	"github.com/airlock-sandbox/airlock/wasi/errno"
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

// Rule changes how an operation resolves its path. Operations take any
// number of them; they combine.
type Rule uint8

const (
	// Beneath confines resolution to the directory given: an absolute
	// path, or ".." above it (in the path or in a symbolic link met on the
	// way), answers EPERM, as wasmtime does. This is what a WASI directory descriptor
	// grants: what lies below it, nothing else.
	Beneath Rule = 1 << iota
	// NoFollow leaves a symbolic link in the last component unfollowed, as
	// O_NOFOLLOW and lstat do (a trailing slash still follows it, as on
	// Linux). Operations that act on a name (Unlink, Rename, Mkdir, ...)
	// never follow one there anyway.
	NoFollow
)

func rulesOf(rules []Rule) Rule {
	var r Rule
	for _, x := range rules {
		r |= x
	}
	return r
}

// maxLinks bounds the symbolic links one resolution follows, as Linux's
// MAXSYMLINKS (40): past it, ELOOP. This is what ends link loops.
const maxLinks = 40

// resolve walks p from dir (or the root when p is absolute) up to its last
// component, following every symbolic link on the way, and the last one
// too when followLast (or a trailing slash) asks for it. ".." at the root
// stays at the root: the root is the guest's whole world and there is
// nothing above it to escape to. With Beneath, ".." never rises above dir.
//
// ".." goes back to the directory the walk came from, which is always the
// physical parent: a link's target is spliced into the path and walked
// like the rest, from the link's directory, so no link can lead anywhere a
// path of plain names could not.
//
// Errors: ENOENT (empty path, missing intermediate, empty link target),
// EILSEQ (NUL), ENAMETOOLONG, ENOTDIR (intermediate or dir is a file),
// ELOOP (more than maxLinks links), EPERM (Beneath broken), EBADF
// (dir is nil or belongs to another FS and p is relative).
func (fs *FS) resolve(dir *Inode, p string, rules Rule, followLast bool) (where, error) {
	if err := checkPath(p); err != nil {
		return where{}, err
	}
	beneath := rules&Beneath != 0
	cur := dir
	if p[0] == '/' {
		if beneath {
			return where{}, errno.EPERM
		}
		cur = fs.root
	} else if err := fs.checkDir(dir); err != nil {
		return where{}, err
	}
	var up []*Inode // the directories walked down from, for ".."
	links := 0
	slash := false
	rest := p
	for {
		trimmed := strings.TrimLeft(rest, "/")
		hadSlash := len(trimmed) < len(rest)
		rest = trimmed
		comp, after := rest, ""
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			comp, after = rest[:i], rest[i:]
		}
		if strings.Trim(after, "/") == "" {
			// The last component ("" when the path was all slashes).
			slash = slash || after != "" || (comp == "" && hadSlash)
			if normal(comp) {
				if n := cur.children[comp]; n.Kind() == KindSymlink && (followLast || slash) {
					if links++; links > maxLinks {
						return where{}, errno.ELOOP
					}
					rest = string(n.data)
					continue
				}
			}
			if comp == ".." && len(up) == 0 && beneath {
				return where{}, errno.EPERM
			}
			return where{dir: cur, name: comp, slash: slash}, nil
		}
		rest = after
		switch comp {
		case ".":
		case "..":
			switch {
			case len(up) > 0:
				cur, up = up[len(up)-1], up[:len(up)-1]
			case beneath:
				return where{}, errno.EPERM
			default:
				cur = cur.parent
			}
		default:
			next := cur.children[comp]
			switch next.Kind() {
			case 0:
				return where{}, errno.ENOENT
			case KindDir:
				up = append(up, cur)
				cur = next
			case KindSymlink:
				if links++; links > maxLinks {
					return where{}, errno.ELOOP
				}
				rest = string(next.data) + "/" + rest
			default:
				return where{}, errno.ENOTDIR
			}
		}
	}
}
