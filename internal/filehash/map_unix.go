//go:build unix

package filehash

import (
	"os"

	"golang.org/x/sys/unix"
)

// Map is Read for a file kept for the life of the process: its bytes are
// mapped read-only rather than read, so the process holds only the pages
// it reads, and those are the page cache's, shared with every other
// process reading the file. release unmaps them, for a caller that does
// not keep them after all.
//
// The bytes must never be written to, and the file must not shrink while
// mapped (a read past its new end would fault the process): cache files
// are replaced by rename, never changed in place (internal/atomicfile).
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
	if size == 0 || size != int64(int(size)) || !st.Mode().IsRegular() {
		data, sum, err := Read(path)
		return data, sum, func() {}, err
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		data, sum, err := Read(path)
		return data, sum, func() {}, err
	}
	release = func() { _ = unix.Munmap(data) }
	return data, stampedSum(f, path, st, data), release, nil
}
