package filehash

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlock-sandbox/airlock/internal/memfd"
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
	fd, err := memfd.FromFile("airlock-file", f, 0, size)
	if err == nil {
		data, err = memfd.View(fd, int(size))
		unix.Close(fd) // the view keeps it
	}
	if err != nil { // no memfd here, say: read instead
		data, sum, err := Read(path)
		return data, sum, func() {}, err
	}
	release = func() { _ = unix.Munmap(data) }
	return data, stampedSum(f, path, st, data), release, nil
}
