// Package filehash reads cache files with their sha256 and remembers the
// sum in a stamp beside the file, so a later process that finds the file
// unchanged does not hash it again.
//
// Every CLI process loads ~80 MB of build files (python.wasm, the stdlib
// zip, the prepared module, the snapshot image) and checked each against
// its recorded sum: ~150 ms of SHA-256 per process. A stamp holds the
// file's device, inode, size, modification and change times with the sum
// computed when the file had them. The change time cannot be set back by
// an unprivileged process, and every write, truncate or rename of the
// inode moves it, so an unchanged stamp means unchanged bytes short of a
// disk silently flipping them, which the hash would catch and the stamp
// does not: the trade git's index makes.
package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/airlock-sandbox/airlock/internal/atomicfile"
)

// StampSuffix ends the name of a file's stamp: a directory sweep that
// removes a cache file removes path+StampSuffix with it.
const StampSuffix = ".sha256stamp"

// stampVersion starts every stamp; a stamp in another form is ignored.
const stampVersion = "filehash-1"

// Read returns path's bytes and their sha256 in hex, from the stamp when
// it still describes the file (then the bytes are read but not hashed).
func Read(path string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, "", fmt.Errorf("read %s: %w", path, err)
	}
	return data, stampedSum(f, path, st, data), nil
}

// stampedSum is the sha256 of data, f's bytes when it had st, from the
// stamp when it still describes the file. f is stat'ed again after
// reading: a writer that changed the file meanwhile leaves other times,
// and the stamp is then neither trusted nor kept.
func stampedSum(f *os.File, path string, st os.FileInfo, data []byte) string {
	after, err := f.Stat()
	if err != nil {
		return sum(data)
	}
	id, ok := identity(st)
	if after2, ok2 := identity(after); !ok || !ok2 || id != after2 {
		return sum(data)
	}
	if s, found := readStamp(path, id); found {
		return s
	}
	s := sum(data)
	writeStamp(path, id, s)
	return s
}

// Sum returns path's sha256 in hex without keeping its bytes.
func Sum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	id, ok := identity(st)
	if ok {
		if s, found := readStamp(path, id); found {
			return s, nil
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	s := hex.EncodeToString(h.Sum(nil))
	if after, err := f.Stat(); ok && err == nil {
		if id2, ok2 := identity(after); ok2 && id2 == id {
			writeStamp(path, id, s)
		}
	}
	return s, nil
}

// Identity names path's current content as far as its metadata tells:
// device, inode, size, modification and change times (which a write
// moves and nothing without privileges sets back). It is what a stamp
// holds, for callers that only need to know a file is unchanged.
func Identity(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	id, ok := identity(st)
	if !ok {
		return "", fmt.Errorf("%s: no file identity on this system, or not a regular file", path)
	}
	return id, nil
}

// Forget removes path's stamp, as a sweep removing path must.
func Forget(path string) { os.Remove(path + StampSuffix) }

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func readStamp(path, id string) (string, bool) {
	b, err := os.ReadFile(path + StampSuffix)
	if err != nil {
		return "", false
	}
	head, s, ok := strings.Cut(strings.TrimSpace(string(b)), " sha256=")
	if !ok || head != stampVersion+" "+id || len(s) != 2*sha256.Size {
		return "", false
	}
	if _, err := hex.DecodeString(s); err != nil {
		return "", false
	}
	return s, true
}

// writeStamp records the sum; a directory it cannot write in (a
// read-only cache) only means the next process hashes again. A file
// changed in the last seconds is not stamped: file times are kept in
// coarse ticks, and a write later in the same tick would leave them as
// the stamp has them (git's "racily clean" entries).
func writeStamp(path, id, s string) {
	if !settled(path) {
		return
	}
	_ = atomicfile.WriteBytes(path+StampSuffix, 0o644, []byte(stampVersion+" "+id+" sha256="+s+"\n"))
}

// Stamped returns the sum path's stamp holds while the stamp still
// describes the file as st (from the caller's open file) does, without
// reading it. With Remember, it serves files whose own check is not
// their sha256 (an image's checksum covers parts of the file only).
func Stamped(path string, st os.FileInfo) (string, bool) {
	id, ok := identity(st)
	if !ok {
		return "", false
	}
	return readStamp(path, id)
}

// Remember stamps path with sum, a sha256 in hex the caller computed
// over f's bytes while f had st (f.Stat before reading), unless f has
// changed since.
func Remember(f *os.File, path string, st os.FileInfo, sum string) {
	after, err := f.Stat()
	if err != nil {
		return
	}
	id, ok := identity(st)
	if after2, ok2 := identity(after); ok && ok2 && id == after2 {
		writeStamp(path, id, sum)
	}
}
