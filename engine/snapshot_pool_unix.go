//go:build unix

package engine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// reservePoolable maps a region the pool can reset and unmap.
func reservePoolable(size uint64) ([]byte, bool) {
	if size == 0 {
		return nil, false
	}
	base, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, false
	}
	return unsafe.Slice((*byte)(base), size), true
}

// A pooled anonymous region gets the image copied in by get; put only
// needs the part past the image reset.

// resetRegion releases everything past the image's length, which then
// reads as zeros; the image part is overwritten by the next get.
func resetRegion(buf []byte, imageLen int) bool {
	if len(buf) <= imageLen {
		return true
	}
	return unix.Madvise(buf[imageLen:], unix.MADV_DONTNEED) == nil
}

func unreserve(buf []byte) {
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(buf)), uintptr(len(buf)))
}
