// Package errno holds the one error-number type shared by the WASI layer and
// the memory filesystem. Values are wasi_snapshot_preview1's, so they pass
// straight through to the guest without a second mapping.
package errno

import "fmt"

// Errno is a wasi_snapshot_preview1 errno. Zero means success and is never
// returned as an error: functions return nil instead.
type Errno uint16

// The subset of preview1 errnos Airlock produces, numbered as in the spec
// (wasi_snapshot_preview1.witx, enum errno).
const (
	ESUCCESS     Errno = 0
	E2BIG        Errno = 1
	EACCES       Errno = 2
	EAGAIN       Errno = 6
	EBADF        Errno = 8
	EBUSY        Errno = 10
	ECHILD       Errno = 12
	EDQUOT       Errno = 19
	EEXIST       Errno = 20
	EFAULT       Errno = 21
	EFBIG        Errno = 22
	EILSEQ       Errno = 25
	EINTR        Errno = 27
	EINVAL       Errno = 28
	EIO          Errno = 29
	EISDIR       Errno = 31
	ELOOP        Errno = 32
	EMFILE       Errno = 33
	EMLINK       Errno = 34
	ENAMETOOLONG Errno = 37
	ENOENT       Errno = 44
	ENOMEM       Errno = 48
	ENOSPC       Errno = 51
	ENOSYS       Errno = 52
	ENOTDIR      Errno = 54
	ENOTEMPTY    Errno = 55
	ENOTSOCK     Errno = 57
	ENOTSUP      Errno = 58
	ENOTTY       Errno = 59
	EOVERFLOW    Errno = 61
	EPERM        Errno = 63
	EPIPE        Errno = 64
	ERANGE       Errno = 68
	EROFS        Errno = 69
	ESPIPE       Errno = 70
	EXDEV        Errno = 75
	ENOTCAPABLE  Errno = 76
)

var names = map[Errno]string{
	E2BIG: "E2BIG", EACCES: "EACCES", EAGAIN: "EAGAIN", EBADF: "EBADF", EBUSY: "EBUSY",
	ECHILD: "ECHILD", EDQUOT: "EDQUOT", EEXIST: "EEXIST", EFAULT: "EFAULT", EFBIG: "EFBIG",
	EILSEQ: "EILSEQ", EINTR: "EINTR", EINVAL: "EINVAL", EIO: "EIO", EISDIR: "EISDIR",
	ELOOP: "ELOOP", EMFILE: "EMFILE", EMLINK: "EMLINK", ENAMETOOLONG: "ENAMETOOLONG",
	ENOENT: "ENOENT", ENOMEM: "ENOMEM", ENOSPC: "ENOSPC", ENOSYS: "ENOSYS", ENOTDIR: "ENOTDIR",
	ENOTEMPTY: "ENOTEMPTY", ENOTSOCK: "ENOTSOCK", ENOTSUP: "ENOTSUP", ENOTTY: "ENOTTY",
	EOVERFLOW: "EOVERFLOW", EPERM: "EPERM", EPIPE: "EPIPE", ERANGE: "ERANGE", EROFS: "EROFS", ESPIPE: "ESPIPE",
	EXDEV: "EXDEV", ENOTCAPABLE: "ENOTCAPABLE",
}

func (e Errno) Error() string {
	if n, ok := names[e]; ok {
		return n
	}
	return fmt.Sprintf("errno %d", uint16(e))
}

// Of maps any error to an Errno: an Errno is itself, nil is ESUCCESS and
// anything else is EIO, so an unexpected host failure never reaches the
// guest as success.
func Of(err error) Errno {
	if err == nil {
		return ESUCCESS
	}
	if e, ok := err.(Errno); ok {
		return e
	}
	return EIO
}
