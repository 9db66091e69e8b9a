//go:build linux

// Package memfd makes sealed memory files: bytes the process can map
// (copy-on-write or read-only) that nothing can change, grow or shrink
// once sealed, unlike a file on disk another process may cut short.
package memfd

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// FromBytes returns a sealed memfd holding b.
func FromBytes(name string, b []byte) (int, error) {
	return sealed(name, func(fd int) error {
		for off := 0; off < len(b); {
			n, err := unix.Pwrite(fd, b[off:], int64(off))
			if err != nil {
				return fmt.Errorf("write %s to memfd: %w", name, err)
			}
			off += n
		}
		return nil
	})
}

// FromFile returns a sealed memfd holding the size bytes of f from off,
// copied inside the kernel (sendfile): they never pass through the
// process.
func FromFile(name string, f *os.File, off, size int64) (int, error) {
	return sealed(name, func(fd int) error {
		for end := off + size; off < end; {
			n, err := unix.Sendfile(fd, int(f.Fd()), &off, int(min(end-off, 1<<30)))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fmt.Errorf("copy %s to memfd: %w", name, err)
			}
			if n == 0 {
				return fmt.Errorf("copy %s to memfd: %w", name, io.ErrUnexpectedEOF)
			}
		}
		return nil
	})
}

// sealed creates a memfd, fills it with fill and seals it.
func sealed(name string, fill func(fd int) error) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	if err := fill(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seal memfd %s: %w", name, err)
	}
	return fd, nil
}

// View maps size bytes of fd read-only and shared.
func View(fd int, size int) ([]byte, error) {
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map memfd: %w", err)
	}
	return b, nil
}
