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

// keptTail is how much memory past the image a pooled region keeps
// resident, zeroed, after a run: the next run that grows there (a session
// call restoring its state, say) then does not fault on each page, at
// 20-40 µs a fault on these VMs. Beyond it, memory goes back to the system.
const keptTail = 32 << 20

// resetRegion makes everything past the image's length read as zeros:
// cleared in place up to keptTail past the image, released beyond. buf's
// length is what the run used, its capacity the whole region; the image
// part is overwritten by the next get (or restored by the pool).
func resetRegion(buf []byte, imageLen int) bool {
	full := buf[:cap(buf)]
	if len(full) <= imageLen {
		return true
	}
	keep := min(max(len(buf), imageLen), imageLen+keptTail)
	clear(full[imageLen:keep])
	if keep == len(full) {
		return true
	}
	return unix.Madvise(full[keep:], unix.MADV_DONTNEED) == nil
}

func unreserve(buf []byte) {
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(buf)), uintptr(cap(buf)))
}

// openRegion makes buf readable and writable again: a guarded region
// (package wasmtime's) comes back from a run with the pages past that run's
// memory inaccessible.
func openRegion(buf []byte) bool {
	return unix.Mprotect(buf, unix.PROT_READ|unix.PROT_WRITE) == nil
}
