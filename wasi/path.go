package wasi

import (
	"context"
	"strings"

	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

const (
	oflagCreat     = 1
	oflagDirectory = 2
	oflagExcl      = 4
	oflagTrunc     = 8

	// maxPath matches the filesystem's limit; checked here first so a huge
	// guest length is refused before any copy.
	maxPath = 4096
)

// lookupSymlinkFollow is preview1's lookupflags.symlink_follow.
const lookupSymlinkFollow = 1

// dirPath resolves a (directory fd, guest path) pair, the argument shape of
// every path_* function, checking that the descriptor holds right.
//
// A descriptor is a capability for what lies below its directory: an
// absolute path, or ".." above it, answers EPERM (rules), as wasmtime does. The
// preopened root is the guest's whole world, where "/.." is "/" as on any
// POSIX system; wasi-libc resolves every path a program names against it,
// so ".." there stays at the root rather than failing.
func (s *State) dirPath(m memory, fd, ptr, n uint32, right uint64) (*openFile, string, memfs.Rule, errno.Errno) {
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return nil, "", 0, e
	}
	if f.kind != kindDir {
		return nil, "", 0, errno.ENOTDIR
	}
	if e := f.has(right); e != errno.ESUCCESS {
		return nil, "", 0, e
	}
	if n > maxPath {
		return nil, "", 0, errno.ENAMETOOLONG
	}
	path, ok := m.str(ptr, n)
	if !ok {
		return nil, "", 0, errno.EFAULT
	}
	if strings.HasPrefix(path, "/") {
		return nil, "", 0, errno.EPERM
	}
	var rules memfs.Rule
	if f.preopen == "" || f.node != s.fs.Root() {
		rules = memfs.Beneath
	}
	return f, path, rules, errno.ESUCCESS
}

// follow is the rule lookupflags ask for the last component.
func follow(lookupflags uint64) memfs.Rule {
	if lookupflags&lookupSymlinkFollow == 0 {
		return memfs.NoFollow
	}
	return 0
}

// watchPath is the path a Watcher is told: absolute from the root.
func (s *State) watchPath(dir *memfs.Inode, p string) string {
	if dir == s.fs.Root() {
		return "/" + strings.TrimLeft(p, "/")
	}
	return p
}

// hiddenDevice is the hidden device at (dir, p), if any. Only its exact
// path from the root names it: no "..", "." or doubled slash, so no
// symbolic link (which the filesystem would resolve) can lead to it.
func (s *State) hiddenDevice(dir *memfs.Inode, p string) Device {
	if len(s.cfg.HiddenDevices) == 0 || dir != s.fs.Root() {
		return nil
	}
	return s.cfg.HiddenDevices["/"+p]
}

// missed tells the Watcher of a lookup that found nothing.
func (s *State) missed(dir *memfs.Inode, p string, err error) {
	if s.cfg.Watch != nil && errno.Of(err) == errno.ENOENT {
		s.cfg.Watch.Missing(s.watchPath(dir, p))
	}
}

// pathCreateDirectory is path_create_directory(dirFd, pathPtr, pathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathCreateDirectory(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	dir, path, rules, e := s.dirPath(m, dirFd, pathPtr, pathLen, rightPathCreateDirectory)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Mkdir(dir.node, path, rules))
}

// pathFilestatGet is path_filestat_get(dirFd, lookupFlags, pathPtr, pathLen, statPtr). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathFilestatGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, lookupFlags, pathPtr, pathLen, statPtr := uint32(p[0]), p[1], uint32(p[2]), uint32(p[3]), uint32(p[4])
	dir, path, rules, e := s.dirPath(m, dirFd, pathPtr, pathLen, rightPathFilestatGet)
	if e != errno.ESUCCESS {
		return e
	}
	if _, ok := m.slice(statPtr, filestatSize); !ok {
		return errno.EFAULT
	}
	n, err := s.fs.Lookup(dir.node, path, rules, follow(lookupFlags))
	if err != nil {
		s.missed(dir.node, path, err)
		return errno.Of(err)
	}
	return putFilestat(m, statPtr, n, s.filetype(n))
}

// pathFilestatSetTimes is path_filestat_set_times(dirFd, lookupFlags, pathPtr, pathLen, atim, mtim, fstFlags). Errors: EBADF, EFAULT, EINVAL, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), EROFS, the filesystem's (errno.Of).
func pathFilestatSetTimes(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, lookupFlags, pathPtr, pathLen, atim, mtim, fstFlags := uint32(p[0]), p[1], uint32(p[2]), uint32(p[3]), int64(p[4]), int64(p[5]), uint16(p[6])
	dir, path, rules, e := s.dirPath(m, dirFd, pathPtr, pathLen, rightPathFilestatSetTimes)
	if e != errno.ESUCCESS {
		return e
	}
	n, err := s.fs.Lookup(dir.node, path, rules, follow(lookupFlags))
	if err != nil {
		return errno.Of(err)
	}
	return s.setTimes(n, atim, mtim, fstFlags)
}

// pathLink is path_link(oldDirFd, oldFlags, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathLink(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	oldDirFd, oldFlags, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen := uint32(p[0]), p[1], uint32(p[2]), uint32(p[3]), uint32(p[4]), uint32(p[5]), uint32(p[6])
	oldDir, oldPath, oldRules, e := s.dirPath(m, oldDirFd, oldPathPtr, oldPathLen, rightPathLinkSource)
	if e != errno.ESUCCESS {
		return e
	}
	newDir, newPath, newRules, e := s.dirPath(m, newDirFd, newPathPtr, newPathLen, rightPathLinkTarget)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.LinkRules(oldDir.node, oldPath, oldRules|follow(oldFlags), newDir.node, newPath, newRules))
}

// pathOpen is path_open(dirFd, dirflags, pathPtr, pathLen, oflags, rightsBase, rightsInheriting, fdflags, fdPtr).
//
// pathOpen gives the new descriptor the rights asked for that dirFd may
// pass on and its kind can hold (childRights). dirFd needs PATH_OPEN, and
// PATH_CREATE_FILE to create, PATH_FILESTAT_SET_SIZE to truncate.
//
// Errors: EBADF, EEXIST, EFAULT, EINVAL, EISDIR, EMFILE, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), EROFS, the filesystem's (errno.Of).
func pathOpen(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, dirflags, pathPtr, pathLen := uint32(p[0]), p[1], uint32(p[2]), uint32(p[3])
	oflags, rightsBase, rightsInheriting, fdflags, resultPtr := uint16(p[4]), p[5], p[6], uint16(p[7]), uint32(p[8])
	need := uint64(rightPathOpen)
	if oflags&oflagCreat != 0 {
		need |= rightPathCreateFile
	}
	if oflags&oflagTrunc != 0 {
		need |= rightPathFilestatSetSize
	}
	dirf, path, rules, e := s.dirPath(m, dirFd, pathPtr, pathLen, need)
	if e != errno.ESUCCESS {
		return e
	}
	dir := dirf.node
	if _, ok := m.slice(resultPtr, 4); !ok {
		return errno.EFAULT
	}
	if oflags >= 1<<4 || fdflags >= 1<<5 {
		return errno.EINVAL
	}
	if dev := s.hiddenDevice(dir, path); dev != nil {
		if s.open >= s.maxFDs {
			return errno.EMFILE
		}
		opened, base, inheriting := childRights(dirf, rightsBase, rightsInheriting, kindDevice)
		fd, e := s.addFile(&openFile{kind: kindDevice, dev: dev, fdflags: fdflags, opened: opened, base: base, inheriting: inheriting})
		if e != errno.ESUCCESS {
			return e
		}
		m.putU32(resultPtr, fd)
		return errno.ESUCCESS
	}
	flags := memfs.OpenFlags(oflags) // the same bits (memfs.OpenFlags)
	rules |= follow(dirflags)
	// Refuse at the descriptor limit before anything is created or
	// truncated, as open(2) does.
	if s.open >= s.maxFDs {
		return errno.EMFILE
	}
	write := rightsBase&dirf.inheriting&rightFdWrite != 0 || oflags&oflagTrunc != 0
	// Refuse a directory opened for writing before anything is created or
	// truncated, as open(2) does; an existing name with O_CREAT|O_EXCL is
	// EEXIST whatever it is (tempfile retries on EEXIST only).
	if n, err := s.fs.Lookup(dir, path, rules); err == nil && write && oflags&(oflagCreat|oflagExcl) != oflagCreat|oflagExcl {
		if n.Kind() == memfs.KindDir {
			return errno.EISDIR
		}
		if n.ReadOnly() {
			return errno.EROFS
		}
	}
	n, err := s.fs.Open(dir, path, flags, rules)
	if err != nil {
		s.missed(dir, path, err)
		return errno.Of(err)
	}
	if s.cfg.Watch != nil {
		s.cfg.Watch.Opened(s.watchPath(dir, path), n, write)
	}
	f := &openFile{node: n, kind: kindFile, fdflags: fdflags}
	if n.Kind() == memfs.KindDir {
		f.kind = kindDir
	} else if dev := s.deviceFor(n); dev != nil {
		f.kind, f.dev = kindDevice, dev
	}
	f.opened, f.base, f.inheriting = childRights(dirf, rightsBase, rightsInheriting, f.kind)
	fd, e := s.addFile(f)
	if e != errno.ESUCCESS {
		return e
	}
	m.putU32(resultPtr, fd)
	return errno.ESUCCESS
}

// pathReadlink is path_readlink(dirFd, pathPtr, pathLen, bufPtr, bufLen, bufusedPtr).
//
// pathReadlink writes as much of the link's target as fits, without a NUL,
// as readlink(2) does.
//
// Errors: EBADF, EFAULT, EINVAL (not a link), ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathReadlink(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen, bufPtr, bufLen, bufusedPtr := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[3]), uint32(p[4]), uint32(p[5])
	dir, path, rules, e := s.dirPath(m, dirFd, pathPtr, pathLen, rightPathReadlink)
	if e != errno.ESUCCESS {
		return e
	}
	buf, ok := m.slice(bufPtr, bufLen)
	if !ok {
		return errno.EFAULT
	}
	if _, ok := m.slice(bufusedPtr, 4); !ok {
		return errno.EFAULT
	}
	target, err := s.fs.Readlink(dir.node, path, rules)
	if err != nil {
		s.missed(dir.node, path, err)
		return errno.Of(err)
	}
	m.putU32(bufusedPtr, uint32(copy(buf, target)))
	return errno.ESUCCESS
}

// pathRemoveDirectory is path_remove_directory(dirFd, pathPtr, pathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathRemoveDirectory(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	dir, path, rules, e := s.dirPath(m, dirFd, pathPtr, pathLen, rightPathRemoveDirectory)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Rmdir(dir.node, path, rules))
}

// pathRename is path_rename(oldDirFd, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathRename(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	oldDirFd, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[3]), uint32(p[4]), uint32(p[5])
	oldDir, oldPath, oldRules, e := s.dirPath(m, oldDirFd, oldPathPtr, oldPathLen, rightPathRenameSource)
	if e != errno.ESUCCESS {
		return e
	}
	newDir, newPath, newRules, e := s.dirPath(m, newDirFd, newPathPtr, newPathLen, rightPathRenameTarget)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.RenameRules(oldDir.node, oldPath, oldRules, newDir.node, newPath, newRules))
}

// pathSymlink is path_symlink(oldPathPtr, oldPathLen, dirFd, newPathPtr, newPathLen).
//
// pathSymlink makes a link inside the memory filesystem. Its target is
// kept as given but must be relative (an absolute one answers EPERM,
// as wasmtime does): it is resolved from the link's directory, within what the
// looking descriptor reaches, so it can never lead outside.
//
// Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathSymlink(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	oldPathPtr, oldPathLen, dirFd, newPathPtr, newPathLen := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[3]), uint32(p[4])
	dir, path, rules, e := s.dirPath(m, dirFd, newPathPtr, newPathLen, rightPathSymlink)
	if e != errno.ESUCCESS {
		return e
	}
	if oldPathLen > maxPath {
		return errno.ENAMETOOLONG
	}
	target, ok := m.str(oldPathPtr, oldPathLen)
	if !ok {
		return errno.EFAULT
	}
	return errno.Of(s.fs.Symlink(target, dir.node, path, rules))
}

// pathUnlinkFile is path_unlink_file(dirFd, pathPtr, pathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTCAPABLE, ENOTDIR, EPERM (out of the descriptor), the filesystem's (errno.Of).
func pathUnlinkFile(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	dir, path, rules, e := s.dirPath(m, dirFd, pathPtr, pathLen, rightPathUnlinkFile)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Unlink(dir.node, path, rules))
}
