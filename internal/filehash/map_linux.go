package filehash

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Map is Read for a file kept for the life of the process: the bytes are
// copied into a sealed memfd inside the kernel (sendfile) and mapped
// read-only from there, so they are in no heap and the process's
// resident memory counts only the pages it reads. The file itself is not
// mapped: cut short by another process, it would fault this one on the
// next read. release unmaps the bytes, for a caller that does not keep
// them after all.
func Map(path string) (data []byte, sum string, release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", nil, err
	}
	size := st.Size()
	if size == 0 || size > 1<<40 || !st.Mode().IsRegular() {
		data, sum, err := Read(path)
		return data, sum, func() {}, err
	}
	data, err = copyToMemfd(f, size)
	if err != nil { // no memfd here, say: read instead
		data, sum, err := Read(path)
		return data, sum, func() {}, err
	}
	release = func() { _ = unix.Munmap(data) }
	return data, stampedSum(f, path, st, data), release, nil
}

// copyToMemfd copies f's size bytes into a sealed memfd and maps it
// read-only; the mapping keeps the memfd alive.
func copyToMemfd(f *os.File, size int64) ([]byte, error) {
	fd, err := unix.MemfdCreate("airlock-file", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd)
	var off int64
	for off < size {
		n, err := unix.Sendfile(fd, int(f.Fd()), &off, int(min(size-off, 1<<30)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", f.Name(), err)
		}
		if n == 0 {
			return nil, fmt.Errorf("copy %s: %w", f.Name(), io.ErrUnexpectedEOF)
		}
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return nil, fmt.Errorf("seal memfd: %w", err)
	}
	return unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}
