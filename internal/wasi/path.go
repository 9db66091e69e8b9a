package wasi

import (
	"context"
	gopath "path"
	"strings"

	"github.com/airlock-sandbox/airlock/internal/wasi/errno"
	"github.com/airlock-sandbox/airlock/internal/wasi/memfs"
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

// dirPath resolves a (directory fd, guest path) pair, the argument shape of
// every path_* function.
func (s *State) dirPath(m memory, fd, ptr, n uint32) (*memfs.Inode, string, errno.Errno) {
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return nil, "", e
	}
	if f.kind != kindDir {
		return nil, "", errno.ENOTDIR
	}
	if n > maxPath {
		return nil, "", errno.ENAMETOOLONG
	}
	path, ok := m.str(ptr, n)
	if !ok {
		return nil, "", errno.EFAULT
	}
	return f.node, path, errno.ESUCCESS
}

// watchPath is the path a Watcher is told: absolute from the root.
func (s *State) watchPath(dir *memfs.Inode, p string) string {
	if dir == s.fs.Root() {
		return "/" + strings.TrimLeft(p, "/")
	}
	return p
}

// hiddenDevice is the hidden device at (dir, p), if any.
func (s *State) hiddenDevice(dir *memfs.Inode, p string) Device {
	if len(s.cfg.HiddenDevices) == 0 || dir != s.fs.Root() {
		return nil
	}
	return s.cfg.HiddenDevices[gopath.Clean("/"+p)]
}

// missed tells the Watcher of a lookup that found nothing.
func (s *State) missed(dir *memfs.Inode, p string, err error) {
	if s.cfg.Watch != nil && errno.Of(err) == errno.ENOENT {
		s.cfg.Watch.Missing(s.watchPath(dir, p))
	}
}

// pathCreateDirectory is path_create_directory(dirFd, pathPtr, pathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTDIR, the filesystem's (errno.Of).
func pathCreateDirectory(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	dir, path, e := s.dirPath(m, dirFd, pathPtr, pathLen)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Mkdir(dir, path))
}

// pathFilestatGet is path_filestat_get(dirFd, lookupFlags, pathPtr, pathLen, statPtr). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTDIR, the filesystem's (errno.Of).
func pathFilestatGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen, statPtr := uint32(p[0]), uint32(p[2]), uint32(p[3]), uint32(p[4])
	dir, path, e := s.dirPath(m, dirFd, pathPtr, pathLen)
	if e != errno.ESUCCESS {
		return e
	}
	if _, ok := m.slice(statPtr, filestatSize); !ok {
		return errno.EFAULT
	}
	n, err := s.fs.Lookup(dir, path)
	if err != nil {
		s.missed(dir, path, err)
		return errno.Of(err)
	}
	return putFilestat(m, statPtr, n, nodeFiletype(n))
}

// pathFilestatSetTimes is path_filestat_set_times(dirFd, lookupFlags, pathPtr, pathLen, atim, mtim, fstFlags). Errors: EBADF, EFAULT, EINVAL, ENAMETOOLONG, ENOTDIR, EROFS, the filesystem's (errno.Of).
func pathFilestatSetTimes(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen, atim, mtim, fstFlags := uint32(p[0]), uint32(p[2]), uint32(p[3]), int64(p[4]), int64(p[5]), uint16(p[6])
	dir, path, e := s.dirPath(m, dirFd, pathPtr, pathLen)
	if e != errno.ESUCCESS {
		return e
	}
	n, err := s.fs.Lookup(dir, path)
	if err != nil {
		return errno.Of(err)
	}
	return s.setTimes(n, atim, mtim, fstFlags)
}

// pathLink is path_link(oldDirFd, oldFlags, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTDIR, the filesystem's (errno.Of).
func pathLink(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	oldDirFd, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen := uint32(p[0]), uint32(p[2]), uint32(p[3]), uint32(p[4]), uint32(p[5]), uint32(p[6])
	oldDir, oldPath, e := s.dirPath(m, oldDirFd, oldPathPtr, oldPathLen)
	if e != errno.ESUCCESS {
		return e
	}
	newDir, newPath, e := s.dirPath(m, newDirFd, newPathPtr, newPathLen)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Link(oldDir, oldPath, newDir, newPath))
}

// pathOpen is path_open(dirFd, dirflags, pathPtr, pathLen, oflags, rightsBase, rightsInheriting, fdflags, fdPtr). Errors: EBADF, EFAULT, EINVAL, EISDIR, EMFILE, ENAMETOOLONG, ENOTDIR, EROFS, the filesystem's (errno.Of).
func pathOpen(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[2]), uint32(p[3])
	dir, path, e := s.dirPath(m, dirFd, pathPtr, pathLen)
	if e != errno.ESUCCESS {
		return e
	}
	oflags, rights, fdflags, resultPtr := uint16(p[4]), p[5], uint16(p[7]), uint32(p[8])
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
		fd, e := s.addFile(&openFile{kind: kindDevice, dev: dev, fdflags: fdflags,
			read: rights&rightFdRead != 0, write: rights&rightFdWrite != 0})
		if e != errno.ESUCCESS {
			return e
		}
		m.putU32(resultPtr, fd)
		return errno.ESUCCESS
	}
	var flags memfs.OpenFlags
	if oflags&oflagCreat != 0 {
		flags |= memfs.OCreat
	}
	if oflags&oflagExcl != 0 {
		flags |= memfs.OExcl
	}
	if oflags&oflagTrunc != 0 {
		flags |= memfs.OTrunc
	}
	if oflags&oflagDirectory != 0 {
		flags |= memfs.ODirectory
	}
	// Refuse at the descriptor limit before anything is created or
	// truncated, as open(2) does.
	if s.open >= s.maxFDs {
		return errno.EMFILE
	}
	write := rights&rightFdWrite != 0 || oflags&oflagTrunc != 0
	// Refuse a directory opened for writing before anything is created or
	// truncated, as open(2) does.
	if n, err := s.fs.Lookup(dir, path); err == nil && write {
		if n.Kind() == memfs.KindDir {
			return errno.EISDIR
		}
		if n.ReadOnly() {
			return errno.EROFS
		}
	}
	n, err := s.fs.Open(dir, path, flags)
	if err != nil {
		s.missed(dir, path, err)
		return errno.Of(err)
	}
	if s.cfg.Watch != nil {
		s.cfg.Watch.Opened(s.watchPath(dir, path), n, write)
	}
	f := &openFile{node: n, kind: kindFile, fdflags: fdflags, read: rights&rightFdRead != 0, write: write}
	if n.Kind() == memfs.KindDir {
		f.kind, f.read = kindDir, true
	} else if dev := s.deviceFor(n); dev != nil {
		f.kind, f.dev = kindDevice, dev
	}
	fd, e := s.addFile(f)
	if e != errno.ESUCCESS {
		return e
	}
	m.putU32(resultPtr, fd)
	return errno.ESUCCESS
}

// pathReadlink is path_readlink(dirFd, pathPtr, pathLen, bufPtr, bufLen, bufusedPtr).
//
// pathReadlink: the filesystem has no symbolic links, so an existing path
// is never one (EINVAL, as readlink(2) says of a non-link).
//
// Errors: EBADF, EFAULT, EINVAL, ENAMETOOLONG, ENOTDIR, the filesystem's (errno.Of).
func pathReadlink(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	dir, path, e := s.dirPath(m, dirFd, pathPtr, pathLen)
	if e != errno.ESUCCESS {
		return e
	}
	if _, err := s.fs.Lookup(dir, path); err != nil {
		s.missed(dir, path, err)
		return errno.Of(err)
	}
	return errno.EINVAL
}

// pathRemoveDirectory is path_remove_directory(dirFd, pathPtr, pathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTDIR, the filesystem's (errno.Of).
func pathRemoveDirectory(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	dir, path, e := s.dirPath(m, dirFd, pathPtr, pathLen)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Rmdir(dir, path))
}

// pathRename is path_rename(oldDirFd, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTDIR, the filesystem's (errno.Of).
func pathRename(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	oldDirFd, oldPathPtr, oldPathLen, newDirFd, newPathPtr, newPathLen := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[3]), uint32(p[4]), uint32(p[5])
	oldDir, oldPath, e := s.dirPath(m, oldDirFd, oldPathPtr, oldPathLen)
	if e != errno.ESUCCESS {
		return e
	}
	newDir, newPath, e := s.dirPath(m, newDirFd, newPathPtr, newPathLen)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Rename(oldDir, oldPath, newDir, newPath))
}

// pathSymlink is path_symlink(oldPathPtr, oldPathLen, dirFd, newPathPtr, newPathLen).
//
// pathSymlink refuses: links could only point inside the same memory
// filesystem, and leaving them out keeps path resolution loop-free.
//
// Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTDIR, ENOTSUP.
func pathSymlink(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, newPathPtr, newPathLen := uint32(p[2]), uint32(p[3]), uint32(p[4])
	if _, _, e := s.dirPath(m, dirFd, newPathPtr, newPathLen); e != errno.ESUCCESS {
		return e
	}
	return errno.ENOTSUP
}

// pathUnlinkFile is path_unlink_file(dirFd, pathPtr, pathLen). Errors: EBADF, EFAULT, ENAMETOOLONG, ENOTDIR, the filesystem's (errno.Of).
func pathUnlinkFile(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	dirFd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	dir, path, e := s.dirPath(m, dirFd, pathPtr, pathLen)
	if e != errno.ESUCCESS {
		return e
	}
	return errno.Of(s.fs.Unlink(dir, path))
}
