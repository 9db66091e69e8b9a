package engine

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlock-sandbox/airlock/internal/memfd"
)

// mapImageFile copies a stored image's memory (the size bytes after f's
// header) into a sealed memfd inside the kernel, checks it with verify
// through a read-only view of the memfd, and returns an Snapshot whose
// Memory is that view and whose backing is the memfd: the process holds
// only the image pages it reads, where reading the file held them all
// twice (a heap copy and the memfd's). The caller sets the globals.
//
// It returns ErrImageCorrupt when verify refuses the memory, and a nil
// Snapshot (with the error, if any) when the image cannot be mapped; the
// caller then reads it.
func mapImageFile(f *os.File, size uint64, verify func([]byte) bool) (*Snapshot, error) {
	if size == 0 || size > 1<<32 {
		return nil, nil
	}
	fd, err := memfd.FromFile("airlock-image", f, imageHeader, int64(size))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	view, err := memfd.View(fd, int(size))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("engine: %w", err)
	}
	if !verify(view) {
		_ = unix.Munmap(view)
		unix.Close(fd)
		return nil, ErrImageCorrupt
	}
	return &Snapshot{memory: view, backing: &backing{fd: fd, size: int(size), view: view}}, nil
}
