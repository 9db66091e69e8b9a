//go:build unix

package engine

import "golang.org/x/sys/unix"

// reserve maps size bytes of private anonymous memory without reserving swap:
// untouched pages cost nothing, and munmap returns everything at once.
func reserve(size uint64) ([]byte, func([]byte)) {
	if size == 0 {
		return nil, func([]byte) {}
	}
	buf, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return reserveHeap(size)
	}
	return buf, func(b []byte) { _ = unix.Munmap(b[:cap(b)]) }
}
