package engine

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// mapImageFile copies a stored image's memory (size bytes after the
// header of f) into a sealed memfd inside the kernel (sendfile), checks
// it with verify through a read-only view of the memfd, and returns an
// Image whose Memory is that view and whose backing is the memfd. The
// process then holds only the image pages it reads, where reading the
// file held all of them twice over (its heap copy and the memfd's). The
// caller sets the Image's globals. It returns a nil Image, and an error
// wrapping ErrImageCorrupt when verify refused the memory, when the
// image cannot be mapped (the caller then reads it).
func mapImageFile(f *os.File, size uint64, verify func([]byte) bool) (*Image, error) {
	if size == 0 || size > 1<<32 {
		return nil, nil
	}
	fd, err := unix.MemfdCreate("airlock-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("engine: memfd_create: %w", err)
	}
	kept := false
	defer func() {
		if !kept {
			unix.Close(fd)
		}
	}()
	off := int64(imageHeader)
	for done := uint64(0); done < size; {
		n, err := unix.Sendfile(fd, int(f.Fd()), &off, int(min(size-done, 1<<30)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("engine: copy image to memfd: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("engine: copy image to memfd: %w", io.ErrUnexpectedEOF)
		}
		done += uint64(n)
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return nil, fmt.Errorf("engine: seal memfd: %w", err)
	}
	view, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("engine: map image: %w", err)
	}
	if !verify(view) {
		_ = unix.Munmap(view)
		return nil, ErrImageCorrupt
	}
	kept = true
	return &Image{Memory: view, backing: &backing{fd: fd, size: int(size), view: view}}, nil
}
