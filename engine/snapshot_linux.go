//go:build linux

package engine

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// backing is an image's memory in a sealed memfd. Each run maps it
// MAP_PRIVATE at the start of its reservation: the run reads the image's
// pages from the page cache, shared with every other run, and copies only
// the pages it writes.
type backing struct {
	fd   int
	size int
}

// newBacking copies mem into a sealed memfd.
func newBacking(mem []byte) (*backing, error) {
	fd, err := unix.MemfdCreate("airlock-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("engine: memfd_create: %w", err)
	}
	for off := 0; off < len(mem); {
		n, err := unix.Pwrite(fd, mem[off:], int64(off))
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("engine: write image to memfd: %w", err)
		}
		off += n
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("engine: seal memfd: %w", err)
	}
	return &backing{fd: fd, size: len(mem)}, nil
}

func (b *backing) close() { unix.Close(b.fd) }

// reserve maps size bytes: the image copy-on-write, then anonymous memory.
func (b *backing) reserve(size uint64) ([]byte, func([]byte), bool) {
	if size < uint64(b.size) {
		return nil, nil, false
	}
	base, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, false
	}
	if _, err := unix.MmapPtr(b.fd, 0, base, uintptr(b.size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_FIXED|unix.MAP_NORESERVE); err != nil {
		_ = unix.MunmapPtr(base, uintptr(size))
		return nil, nil, false
	}
	buf := unsafe.Slice((*byte)(base), size)
	return buf, func(buf []byte) { _ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(buf)), uintptr(len(buf))) }, true
}
