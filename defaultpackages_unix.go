//go:build unix

package airlock

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps a prepared zip read-only. Outside the Go heap, its
// 61 MB neither stretch the collector's pacing (a heap twice as large
// between collections made every small run slower) nor are copied per
// process: the page cache holds them once for every process on the host.
// The file is only ever replaced by a rename, never changed in place, so
// the mapping stays whole.
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 || st.Size() > 1<<31 {
		return nil, fmt.Errorf("%s: %d bytes", path, st.Size())
	}
	return syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
}

// unmapFile releases a mapping no layer uses.
func unmapFile(data []byte) { _ = syscall.Munmap(data) }
