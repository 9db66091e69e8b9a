package wasi

import "github.com/airlock-sandbox/airlock/wasi/errno"

// Preview1 rights (wasi_snapshot_preview1.witx, flags rights), one bit each.
const (
	rightFdDatasync           = 1 << 0
	rightFdRead               = 1 << 1
	rightFdSeek               = 1 << 2
	rightFdFdstatSetFlags     = 1 << 3
	rightFdSync               = 1 << 4
	rightFdTell               = 1 << 5
	rightFdWrite              = 1 << 6
	rightFdAdvise             = 1 << 7
	rightFdAllocate           = 1 << 8
	rightPathCreateDirectory  = 1 << 9
	rightPathCreateFile       = 1 << 10
	rightPathLinkSource       = 1 << 11
	rightPathLinkTarget       = 1 << 12
	rightPathOpen             = 1 << 13
	rightFdReaddir            = 1 << 14
	rightPathReadlink         = 1 << 15
	rightPathRenameSource     = 1 << 16
	rightPathRenameTarget     = 1 << 17
	rightPathFilestatGet      = 1 << 18
	rightPathFilestatSetSize  = 1 << 19
	rightPathFilestatSetTimes = 1 << 20
	rightFdFilestatGet        = 1 << 21
	rightFdFilestatSetSize    = 1 << 22
	rightFdFilestatSetTimes   = 1 << 23
	rightPathSymlink          = 1 << 24
	rightPathRemoveDirectory  = 1 << 25
	rightPathUnlinkFile       = 1 << 26
	rightPollFdReadwrite      = 1 << 27
	rightSockShutdown         = 1 << 28
	rightSockAccept           = 1 << 29
)

// The rights each kind of descriptor can hold at most, as wasmtime's
// preview1 and the suite's shared helpers expect. A directory has no
// FD_READ, FD_WRITE, FD_SEEK or FD_FILESTAT_SET_SIZE: a guest reopening a
// directory with the rights fd_fdstat_get gave it must not ask for what
// path_open then refuses.
//
// Nor fd_sync, fd_datasync or fd_fdstat_set_flags: wasmtime answers EBADF
// for them on a directory, as for every file operation there.
const (
	dirRights = rightPathCreateDirectory | rightPathCreateFile | rightPathLinkSource |
		rightPathLinkTarget | rightPathOpen | rightFdReaddir | rightPathReadlink |
		rightPathRenameSource | rightPathRenameTarget | rightPathFilestatGet |
		rightPathFilestatSetSize | rightPathFilestatSetTimes | rightFdFilestatGet |
		rightFdFilestatSetTimes | rightPathSymlink | rightPathRemoveDirectory |
		rightPathUnlinkFile

	fileRights = rightFdDatasync | rightFdRead | rightFdSeek | rightFdFdstatSetFlags |
		rightFdSync | rightFdTell | rightFdWrite | rightFdAdvise | rightFdAllocate |
		rightFdFilestatGet | rightFdFilestatSetSize | rightFdFilestatSetTimes |
		rightPollFdReadwrite

	// Stdio keeps FD_SEEK and FD_TELL so wasi-libc's isatty() reports
	// false: output is captured, not a terminal (seeking still answers
	// ESPIPE).
	// Syncing them has nothing to flush and succeeds, as before rights.
	stdioRights  = rightFdSeek | rightFdTell | rightFdFdstatSetFlags | rightFdFilestatGet | rightPollFdReadwrite | rightFdSync | rightFdDatasync
	stdinRights  = stdioRights | rightFdRead
	stdoutRights = stdioRights | rightFdWrite

	// rightsKnown is every bit preview1 defines.
	rightsKnown = 1<<30 - 1
)

// has answers ESUCCESS when f holds every right in want. A right its kind
// and access mode never gave it is EBADF, as wasmtime and Linux answer a
// write to a read-only descriptor or a read of a directory; one withheld
// by a directory's inheriting rights or dropped by fd_fdstat_set_rights
// is ENOTCAPABLE, the capability the guest lacks.
func (f *openFile) has(want uint64) errno.Errno {
	switch {
	case f.opened&want != want:
		return errno.EBADF
	case f.base&want != want:
		return errno.ENOTCAPABLE
	}
	return errno.ESUCCESS
}

// childRights are the rights path_open gives a descriptor opened from
// dir: opened is what was asked for within what the new descriptor's kind
// can hold (its access mode); base is that within what dir may pass on.
// Asking for more is not an error (wasi-libc asks for everything a mode
// allows); the extra bits are simply not given.
func childRights(dir *openFile, base, inheriting uint64, kind fileKind) (opened, granted, inherit uint64) {
	inheriting &= dir.inheriting
	if kind == kindDir {
		opened = base & dirRights
		return opened, opened & dir.inheriting, inheriting
	}
	opened = base & fileRights
	return opened, opened & dir.inheriting, inheriting & fileRights
}
