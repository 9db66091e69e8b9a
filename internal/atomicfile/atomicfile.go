// Package atomicfile writes files so that a reader sees the old file or
// the whole new one: through a temporary file in the same directory,
// synced, then renamed over the target.
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// StaleAfter is how old another writer's temporary file must be before a
// successful write of the same path removes it: a process killed mid-write
// (an interrupted set-up) leaves one, up to the size of the file, that
// nothing else would ever remove. Far longer than any write here takes
// (the longest, wasm-opt's, is minutes), so a live writer is never hit.
const StaleAfter = 24 * time.Hour

// Write writes path with what write puts to its writer (buffered), with
// permissions perm. On any error the target is left as it was and the
// temporary file removed.
func Write(path string, perm os.FileMode, write func(io.Writer) error) error {
	return put(path, perm, write, os.Rename)
}

// Create is Write for a path that must not exist: where another writer
// got there first, it leaves that file and returns an error satisfying
// errors.Is(err, fs.ErrExist).
func Create(path string, perm os.FileMode, write func(io.Writer) error) error {
	return put(path, perm, write, os.Link) // a link, unlike a rename, never replaces
}

func put(path string, perm os.FileMode, write func(io.Writer) error, place func(tmp, path string) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a rename nothing to remove; after a link, the second name
	w := bufio.NewWriterSize(f, 1<<20)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync() // renamed only once on disk: a crash must not leave a named, half-written file
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), perm) // CreateTemp makes 0600
	}
	if err == nil {
		err = place(f.Name(), path)
	}
	if err == nil {
		removeStale(path)
	}
	return err
}

// removeStale removes temporary files of path that are older than
// StaleAfter; best effort, as a leftover costs only space.
func removeStale(path string) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+".part-"
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > StaleAfter {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// WriteBytes writes data to path as Write does.
func WriteBytes(path string, perm os.FileMode, data []byte) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
