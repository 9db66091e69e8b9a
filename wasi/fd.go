package wasi

import (
	"context"
	"encoding/binary"
	"errors"
	"io"

	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Preview1 file types, rights and flags used below (wasi_snapshot_preview1.witx).
const (
	filetypeUnknown   = 0
	filetypeCharDev   = 2
	filetypeDirectory = 3
	filetypeRegular   = 4
	filetypeSymlink   = 7

	fdflagAppend = 1

	fstflagAtim    = 1
	fstflagAtimNow = 2
	fstflagMtim    = 4
	fstflagMtimNow = 8

	whenceSet = 0
	whenceCur = 1
	whenceEnd = 2

	filestatSize = 64
	direntSize   = 24
)

func filetypeOf(f *openFile) byte {
	switch f.kind {
	case kindStdin, kindStdout, kindStderr, kindDevice:
		return filetypeCharDev
	case kindDir:
		return filetypeDirectory
	case kindFile:
		return filetypeRegular
	}
	return filetypeUnknown
}

func nodeFiletype(n *memfs.Inode) byte {
	switch n.Kind() {
	case memfs.KindDir:
		return filetypeDirectory
	case memfs.KindSymlink:
		return filetypeSymlink
	}
	return filetypeRegular
}

// filetype is n's type as stat and readdir give it: a device's file is
// a character device, as its descriptors are.
func (s *State) filetype(n *memfs.Inode) byte {
	if s.deviceFor(n) != nil {
		return filetypeCharDev
	}
	return nodeFiletype(n)
}

// putFilestat writes a 64-byte filestat; n is nil for stdio.
func putFilestat(m memory, ptr uint32, n *memfs.Inode, filetype byte) errno.Errno {
	b, ok := m.slice(ptr, filestatSize)
	if !ok {
		return errno.EFAULT
	}
	clear(b)
	b[16] = filetype
	if n != nil {
		atim, mtim, ctim := n.Times()
		binary.LittleEndian.PutUint64(b[0:], 1) // dev: the one memory filesystem
		binary.LittleEndian.PutUint64(b[8:], n.Ino())
		binary.LittleEndian.PutUint64(b[24:], n.Nlink())
		binary.LittleEndian.PutUint64(b[32:], uint64(n.Size()))
		binary.LittleEndian.PutUint64(b[40:], uint64(atim))
		binary.LittleEndian.PutUint64(b[48:], uint64(mtim))
		binary.LittleEndian.PutUint64(b[56:], uint64(ctim))
	}
	return errno.ESUCCESS
}

// fdClose is fd_close(fd). Errors: EBADF.
func fdClose(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	fd := uint32(p[0])
	return s.closeFile(fd)
}

// fdSync is fd_sync(fd): nothing to flush. Errors: EBADF, ENOTCAPABLE.
func fdSync(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	return s.syncFile(uint32(p[0]), rightFdSync)
}

// fdDatasync is fd_datasync(fd): nothing to flush. Errors: EBADF, ENOTCAPABLE.
func fdDatasync(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	return s.syncFile(uint32(p[0]), rightFdDatasync)
}

func (s *State) syncFile(fd uint32, right uint64) errno.Errno {
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	return f.has(right)
}

// fdAdvise is fd_advise(fd, offset, length, advice). Errors: EBADF, EINVAL.
func fdAdvise(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	fd, offset, length, advice := uint32(p[0]), int64(p[1]), int64(p[2]), uint32(p[3])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if f.kind != kindFile {
		return errno.EBADF
	}
	if e := f.has(rightFdAdvise); e != errno.ESUCCESS {
		return e
	}
	if offset < 0 || length < 0 || advice > 5 {
		return errno.EINVAL
	}
	return errno.ESUCCESS
}

// fdAllocate is fd_allocate(fd, offset, length). Errors: EBADF (a directory too), EINVAL, ENOTCAPABLE, the filesystem's (errno.Of).
func fdAllocate(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	fd := uint32(p[0])
	f, e := s.writableFile(fd, rightFdAllocate)
	if e != errno.ESUCCESS {
		return e
	}
	off, n := int64(p[1]), int64(p[2])
	if off < 0 || n <= 0 || off+n < 0 {
		return errno.EINVAL
	}
	return errno.Of(s.fs.Allocate(f.node, off, n))
}

// fdFdstatGet is fd_fdstat_get(fd, statPtr). Errors: EBADF, EFAULT.
func fdFdstatGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, statPtr := uint32(p[0]), uint32(p[1])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	b, ok := m.slice(statPtr, 24)
	if !ok {
		return errno.EFAULT
	}
	clear(b)
	b[0] = filetypeOf(f)
	binary.LittleEndian.PutUint16(b[2:], f.fdflags)
	binary.LittleEndian.PutUint64(b[8:], f.base)
	binary.LittleEndian.PutUint64(b[16:], f.inheriting)
	return errno.ESUCCESS
}

// fdFdstatSetFlags is fd_fdstat_set_flags(fd, fdflags). Errors: EBADF, EINVAL, ENOTCAPABLE.
func fdFdstatSetFlags(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	fd := uint32(p[0])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if e := f.has(rightFdFdstatSetFlags); e != errno.ESUCCESS {
		return e
	}
	flags := uint16(p[1])
	if flags >= 1<<5 {
		return errno.EINVAL
	}
	f.fdflags = flags
	return errno.ESUCCESS
}

// fdFdstatSetRights is fd_fdstat_set_rights(fd, rightsBase, rightsInheriting).
//
// fdFdstatSetRights can only drop rights: asking for one the descriptor
// lacks changes nothing and answers ENOTCAPABLE.
//
// Errors: EBADF, ENOTCAPABLE.
func fdFdstatSetRights(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	fd, rightsBase, rightsInheriting := uint32(p[0]), p[1], p[2]
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if rightsBase&^f.base != 0 || rightsInheriting&^f.inheriting != 0 {
		return errno.ENOTCAPABLE
	}
	f.base, f.inheriting = rightsBase, rightsInheriting
	return errno.ESUCCESS
}

// fdFilestatGet is fd_filestat_get(fd, statPtr). Errors: EBADF, EFAULT, ENOTCAPABLE.
func fdFilestatGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, statPtr := uint32(p[0]), uint32(p[1])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if e := f.has(rightFdFilestatGet); e != errno.ESUCCESS {
		return e
	}
	return putFilestat(m, statPtr, f.node, filetypeOf(f))
}

// writableFile checks fd for a change of size: a regular file holding
// right.
func (s *State) writableFile(fd uint32, right uint64) (*openFile, errno.Errno) {
	f, e := s.file(fd)
	switch {
	case e != errno.ESUCCESS:
		return nil, e
	case f.kind != kindFile: // a directory too, as wasmtime answers
		return nil, errno.EBADF
	}
	if e := f.has(right); e != errno.ESUCCESS {
		return nil, e
	}
	return f, errno.ESUCCESS
}

// fdFilestatSetSize is fd_filestat_set_size(fd, size). Errors: EBADF (a directory too), EINVAL (a read-only file too), ENOTCAPABLE, the filesystem's (errno.Of).
func fdFilestatSetSize(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	fd, size := uint32(p[0]), int64(p[1])
	f, e := s.writableFile(fd, rightFdFilestatSetSize)
	if e == errno.EBADF && f == nil {
		// ftruncate of a read-only file is EINVAL, on Linux and wasmtime.
		if g, ge := s.file(fd); ge == errno.ESUCCESS && g.kind == kindFile {
			e = errno.EINVAL
		}
	}
	if e != errno.ESUCCESS {
		return e
	}
	if size < 0 {
		return errno.EINVAL
	}
	return errno.Of(s.fs.Truncate(f.node, size))
}

// setTimes applies fst_flags to n: each of atim and mtim is set to the
// given value, to now, or left alone.
func (s *State) setTimes(n *memfs.Inode, atim, mtim int64, flags uint16) errno.Errno {
	if flags >= 1<<4 || flags&(fstflagAtim|fstflagAtimNow) == fstflagAtim|fstflagAtimNow ||
		flags&(fstflagMtim|fstflagMtimNow) == fstflagMtim|fstflagMtimNow {
		return errno.EINVAL
	}
	if n.ReadOnly() {
		return errno.EROFS
	}
	now := s.clock.Realtime()
	if flags&fstflagAtimNow != 0 {
		atim = now
	}
	if flags&fstflagMtimNow != 0 {
		mtim = now
	}
	s.fs.SetTimes(n, atim, mtim, flags&(fstflagAtim|fstflagAtimNow) != 0, flags&(fstflagMtim|fstflagMtimNow) != 0)
	return errno.ESUCCESS
}

// fdFilestatSetTimes is fd_filestat_set_times(fd, atim, mtim, fstFlags). Errors: EBADF, EINVAL, ENOTCAPABLE, EROFS.
func fdFilestatSetTimes(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	fd, atim, mtim, fstFlags := uint32(p[0]), int64(p[1]), int64(p[2]), uint16(p[3])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if f.node == nil {
		return errno.EBADF
	}
	if e := f.has(rightFdFilestatSetTimes); e != errno.ESUCCESS {
		return e
	}
	return s.setTimes(f.node, atim, mtim, fstFlags)
}

// fdPrestatGet is fd_prestat_get(fd, prestatPtr). Errors: EBADF, EFAULT.
func fdPrestatGet(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, prestatPtr := uint32(p[0]), uint32(p[1])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if f.preopen == "" {
		return errno.EBADF
	}
	b, ok := m.slice(prestatPtr, 8)
	if !ok {
		return errno.EFAULT
	}
	clear(b)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(f.preopen)))
	return errno.ESUCCESS
}

// fdPrestatDirName is fd_prestat_dir_name(fd, pathPtr, pathLen). Errors: EBADF, EFAULT, ENAMETOOLONG.
func fdPrestatDirName(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, pathPtr, pathLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if f.preopen == "" {
		return errno.EBADF
	}
	if pathLen < uint32(len(f.preopen)) {
		return errno.ENAMETOOLONG
	}
	b, ok := m.slice(pathPtr, uint32(len(f.preopen)))
	if !ok {
		return errno.EFAULT
	}
	copy(b, f.preopen)
	return errno.ESUCCESS
}

// readable checks fd for reading and resolves the iovecs and result pointer
// before anything moves.
func (s *State) ioArgs(m memory, fd, iovs, count, resultPtr uint32) (*openFile, [][]byte, errno.Errno) {
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return nil, nil, e
	}
	if _, ok := m.slice(resultPtr, 4); !ok {
		return nil, nil, errno.EFAULT
	}
	bufs, e := m.iovecs(iovs, count, s.iov)
	s.iov = bufs
	return f, bufs, e
}

// fdRead is fd_read(fd, iovsPtr, iovsLen, nreadPtr). Errors: EBADF (a directory, or the wrong access mode), EFAULT, EINVAL, EIO, ENOTCAPABLE, the filesystem's (errno.Of).
func fdRead(ctx context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, iovsPtr, iovsLen, nreadPtr := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[3])
	f, bufs, e := s.ioArgs(m, fd, iovsPtr, iovsLen, nreadPtr)
	if e != errno.ESUCCESS {
		return e
	}
	if e := f.has(rightFdRead); e != errno.ESUCCESS {
		return e
	}
	var total int
	switch {
	case f.kind == kindStdin:
		total, e = readStream(s.cfg.Stdin, bufs)
	case f.kind == kindDevice:
		total, e = s.deviceIO(ctx, f.dev.Read, bufs)
	case f.kind != kindFile:
		return errno.EBADF
	default:
		total, e = s.readFile(f.node, bufs, f.offset)
		f.offset += int64(total)
	}
	if e != errno.ESUCCESS {
		return e
	}
	m.putU32(nreadPtr, uint32(total))
	return errno.ESUCCESS
}

// readStream fills bufs from r, stopping at the first short read so the
// guest is never made to wait for data that is not there.
func readStream(r io.Reader, bufs [][]byte) (int, errno.Errno) {
	total := 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		n, err := r.Read(b)
		total += n
		if err != nil && !errors.Is(err, io.EOF) {
			if total > 0 {
				return total, errno.ESUCCESS
			}
			return 0, errno.EIO
		}
		if n < len(b) {
			break
		}
	}
	return total, errno.ESUCCESS
}

func (s *State) readFile(n *memfs.Inode, bufs [][]byte, off int64) (int, errno.Errno) {
	total := 0
	for _, b := range bufs {
		k, err := s.fs.ReadAt(n, b, off+int64(total))
		total += k
		if err != nil {
			return total, errno.Of(err)
		}
		if k < len(b) {
			break
		}
	}
	return total, errno.ESUCCESS
}

func (s *State) writeFile(n *memfs.Inode, bufs [][]byte, off int64) (int, errno.Errno) {
	total := 0
	for _, b := range bufs {
		k, err := s.fs.WriteAt(n, b, off+int64(total))
		total += k
		if err != nil {
			if total > 0 {
				return total, errno.ESUCCESS
			}
			return 0, errno.Of(err)
		}
	}
	return total, errno.ESUCCESS
}

// fdWrite is fd_write(fd, iovsPtr, iovsLen, nwrittenPtr). Errors: EBADF (a directory, or the wrong access mode), EFAULT, EINVAL, EIO, ENOTCAPABLE, the filesystem's (errno.Of).
func fdWrite(ctx context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, iovsPtr, iovsLen, nwrittenPtr := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[3])
	f, bufs, e := s.ioArgs(m, fd, iovsPtr, iovsLen, nwrittenPtr)
	if e != errno.ESUCCESS {
		return e
	}
	if e := f.has(rightFdWrite); e != errno.ESUCCESS {
		return e
	}
	var total int
	switch {
	case f.kind == kindStdout || f.kind == kindStderr:
		w := s.cfg.Stdout
		if f.kind == kindStderr {
			w = s.cfg.Stderr
		}
		for _, b := range bufs {
			n, err := w.Write(b)
			total += n
			if err != nil {
				s.trap = err
				return errno.EIO
			}
		}
	case f.kind == kindDevice:
		if total, e = s.deviceIO(ctx, f.deviceWrite(m), bufs); e != errno.ESUCCESS {
			return e
		}
	case f.kind != kindFile:
		return errno.EBADF
	default:
		if f.fdflags&fdflagAppend != 0 {
			f.offset = f.node.Size()
		}
		total, e = s.writeFile(f.node, bufs, f.offset)
		f.offset += int64(total)
		if e != errno.ESUCCESS {
			return e
		}
	}
	m.putU32(nwrittenPtr, uint32(total))
	return errno.ESUCCESS
}

// positioned checks fd for pread/pwrite: a regular file holding right and
// FD_SEEK (as the spec has them), at a valid offset.
func (s *State) positioned(m memory, p []uint64, right uint64) (*openFile, [][]byte, int64, errno.Errno) {
	fd, iovsPtr, iovsLen, nPtr := uint32(p[0]), uint32(p[1]), uint32(p[2]), uint32(p[4])
	f, bufs, e := s.ioArgs(m, fd, iovsPtr, iovsLen, nPtr)
	if e != errno.ESUCCESS {
		return nil, nil, 0, e
	}
	switch {
	case f.kind == kindDir:
		return nil, nil, 0, errno.EBADF
	case f.positionless():
	case f.kind == kindStdin, f.kind == kindStdout, f.kind == kindStderr, f.kind == kindDevice:
		return nil, nil, 0, errno.ESPIPE
	}
	if e := f.has(right | rightFdSeek); e != errno.ESUCCESS {
		return nil, nil, 0, e
	}
	off := int64(p[3])
	if off < 0 {
		return nil, nil, 0, errno.EINVAL
	}
	return f, bufs, off, errno.ESUCCESS
}

// fdPread is fd_pread(fd, iovsPtr, iovsLen, offset, nreadPtr). Errors: EBADF (a directory, or the wrong access mode), EFAULT, EINVAL, ENOTCAPABLE, ESPIPE, the filesystem's (errno.Of).
func fdPread(ctx context.Context, s *State, m memory, p []uint64) errno.Errno {
	nreadPtr := uint32(p[4])
	f, bufs, off, e := s.positioned(m, p, rightFdRead)
	if e != errno.ESUCCESS {
		return e
	}
	var total int
	if f.kind == kindDevice {
		total, e = s.deviceIO(ctx, f.dev.Read, bufs)
	} else {
		total, e = s.readFile(f.node, bufs, off)
	}
	if e != errno.ESUCCESS {
		return e
	}
	m.putU32(nreadPtr, uint32(total))
	return errno.ESUCCESS
}

// fdPwrite is fd_pwrite(fd, iovsPtr, iovsLen, offset, nwrittenPtr). Errors: EBADF (a directory, or the wrong access mode), EFAULT, EINVAL, ENOTCAPABLE, ESPIPE, the filesystem's (errno.Of).
func fdPwrite(ctx context.Context, s *State, m memory, p []uint64) errno.Errno {
	nwrittenPtr := uint32(p[4])
	f, bufs, off, e := s.positioned(m, p, rightFdWrite)
	if e != errno.ESUCCESS {
		return e
	}
	var total int
	if f.kind == kindDevice {
		total, e = s.deviceIO(ctx, f.deviceWrite(m), bufs)
	} else {
		total, e = s.writeFile(f.node, bufs, off)
	}
	if e != errno.ESUCCESS {
		return e
	}
	m.putU32(nwrittenPtr, uint32(total))
	return errno.ESUCCESS
}

// seekable checks fd for fd_seek and fd_tell, which agree: a directory
// answers EBADF (as wasmtime's preview1 does for both), a stream ESPIPE.
func (s *State) seekable(fd uint32) (*openFile, errno.Errno) {
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return nil, e
	}
	switch {
	case f.kind == kindDir:
		return nil, errno.EBADF
	case f.positionless():
	case f.kind == kindStdin, f.kind == kindStdout, f.kind == kindStderr, f.kind == kindDevice:
		return nil, errno.ESPIPE
	}
	return f, errno.ESUCCESS
}

// fdSeek is fd_seek(fd, offset, whence, newOffsetPtr). Errors: EBADF, EFAULT, EINVAL, ENOTCAPABLE, ESPIPE.
//
// fdSeek needs FD_SEEK, except that asking where the offset is (0 from
// the current position) is what FD_TELL grants.
func fdSeek(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd := uint32(p[0])
	f, e := s.seekable(fd)
	if e != errno.ESUCCESS {
		return e
	}
	delta, whence, resultPtr := int64(p[1]), uint32(p[2]), uint32(p[3])
	if e := f.has(rightFdSeek); e != errno.ESUCCESS && (delta != 0 || whence != whenceCur || f.has(rightFdTell) != errno.ESUCCESS) {
		return e
	}
	if _, ok := m.slice(resultPtr, 8); !ok {
		return errno.EFAULT
	}
	if f.kind == kindDevice { // positionless: every offset is 0
		if whence > whenceEnd {
			return errno.EINVAL
		}
		m.putU64(resultPtr, 0)
		return errno.ESUCCESS
	}
	var base int64
	switch whence {
	case whenceSet:
	case whenceCur:
		base = f.offset
	case whenceEnd:
		base = f.node.Size()
	default:
		return errno.EINVAL
	}
	off := base + delta
	if (delta > 0 && off < base) || off < 0 {
		return errno.EINVAL
	}
	f.offset = off
	m.putU64(resultPtr, uint64(off))
	return errno.ESUCCESS
}

// fdTell is fd_tell(fd, offsetPtr). Errors: EBADF, EFAULT, ENOTCAPABLE, ESPIPE.
func fdTell(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, offsetPtr := uint32(p[0]), uint32(p[1])
	f, e := s.seekable(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if e := f.has(rightFdTell); e != errno.ESUCCESS {
		return e
	}
	if !m.putU64(offsetPtr, uint64(f.offset)) {
		return errno.EFAULT
	}
	return errno.ESUCCESS
}

// fdRenumber is fd_renumber(fd, to). Errors: EBADF.
func fdRenumber(_ context.Context, s *State, _ memory, p []uint64) errno.Errno {
	from, to := uint32(p[0]), uint32(p[1])
	f, e := s.file(from)
	if e != errno.ESUCCESS {
		return e
	}
	if _, e := s.file(to); e != errno.ESUCCESS {
		return e
	}
	if from == to {
		return errno.ESUCCESS
	}
	s.closeFile(to)
	s.files[to] = f
	s.files[from] = nil
	return errno.ESUCCESS
}

// fdReaddir is fd_readdir(fd, bufPtr, bufLen, cookie, bufusedPtr).
//
// fdReaddir writes dirents starting at cookie; "." and ".." are entries 0
// and 1. A full buffer (bufused == len) tells the guest to call again.
//
// Errors: EBADF (not a directory too), EFAULT, ENOTCAPABLE, the filesystem's (errno.Of).
func fdReaddir(_ context.Context, s *State, m memory, p []uint64) errno.Errno {
	fd, bufPtr, bufLen := uint32(p[0]), uint32(p[1]), uint32(p[2])
	f, e := s.file(fd)
	if e != errno.ESUCCESS {
		return e
	}
	if f.kind != kindDir {
		return errno.EBADF // as wasmtime answers; Linux says ENOTDIR
	}
	if e := f.has(rightFdReaddir); e != errno.ESUCCESS {
		return e
	}
	buf, ok := m.slice(bufPtr, bufLen)
	if !ok {
		return errno.EFAULT
	}
	cookie, usedPtr := p[3], uint32(p[4])
	if _, ok := m.slice(usedPtr, 4); !ok {
		return errno.EFAULT
	}
	if cookie == 0 || f.dirents == nil {
		list, err := s.fs.ReadDir(f.node)
		if err != nil {
			return errno.Of(err)
		}
		s.hold(f, list)
	}
	total := uint64(len(f.dirents)) + 2
	used := 0
	var head [direntSize]byte
	for i := cookie; i < total && used < len(buf); i++ {
		var name string
		var n *memfs.Inode
		switch i {
		case 0:
			name, n = ".", f.node
		case 1:
			name, n = "..", s.fs.Parent(f.node)
		default:
			d := f.dirents[i-2]
			name, n = d.Name, d.Inode
		}
		binary.LittleEndian.PutUint64(head[0:], i+1)
		binary.LittleEndian.PutUint64(head[8:], n.Ino())
		binary.LittleEndian.PutUint32(head[16:], uint32(len(name)))
		head[20] = s.filetype(n)
		used += copy(buf[used:], head[:])
		used += copy(buf[used:], name)
	}
	m.putU32(usedPtr, uint32(used))
	return errno.ESUCCESS
}
