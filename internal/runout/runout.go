// Package runout is what a Python run (package airlock) and a module run
// (package engine) both do with a run's output: cap its streams, list the
// files it changed, seed its deterministic random source.
package runout

import (
	"bytes"
	"errors"
	iofs "io/fs"

	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// ErrOutputLimit is the trap a CapWriter raises when a stream overflows.
var ErrOutputLimit = errors.New("output limit reached")

// CapWriter keeps up to Limit bytes and fails the write that would pass
// it, which ends the run at once.
type CapWriter struct {
	Buf       bytes.Buffer
	Limit     int64
	Truncated bool
	OnWrite   func(p []byte) // the request's OnOutput, given what was kept
}

func (w *CapWriter) Write(p []byte) (int, error) {
	room := w.Limit - int64(w.Buf.Len())
	if int64(len(p)) <= room {
		if w.OnWrite != nil && len(p) > 0 {
			w.OnWrite(p)
		}
		return w.Buf.Write(p)
	}
	if w.OnWrite != nil && room > 0 {
		w.OnWrite(p[:room])
	}
	w.Buf.Write(p[:max(room, 0)])
	w.Truncated = true
	return int(max(room, 0)), ErrOutputLimit
}

// SeedBytes spreads a request's 64-bit seed over a ChaCha8 key.
func SeedBytes(seed uint64) (b [32]byte) {
	for i := range 4 {
		for j := range 8 {
			b[i*8+j] = byte(seed >> (8 * j))
		}
		seed = seed*6364136223846793005 + 1442695040888963407
	}
	return b
}

// ChangedFiles calls add, in path order, with each regular file under
// root (/home/user for Python runs, "/" for modules) that is new or whose
// content differs from before the run: the request's files, or (in a
// session) the files the session had; data is the caller's own copy. A
// file with several names (hard links) is listed once, under the first
// name that is new or changed, so the data returned never passes the
// filesystem's byte quota however many links the guest made. Files under
// a name longer than a guest path may be (4096 bytes, reachable only
// through directory handles or by renaming directories into each other)
// are not listed, as no caller could name them and their paths would cost
// memory without bound: they are counted in omitted instead, so that none
// is dropped unsaid.
func ChangedFiles(fs *memfs.FS, root string, before func(path string) ([]byte, bool), add func(path string, data []byte)) (omitted int) {
	listed := map[*memfs.Inode]bool{}
	_ = fs.Walk(root, func(p string, n *memfs.Inode) error {
		if len(p) > memfs.MaxPath {
			omitted += filesBelow(fs, n, listed)
			if n.Kind() == memfs.KindDir {
				return iofs.SkipDir
			}
			return nil
		}
		if n.Kind() != memfs.KindFile || listed[n] {
			return nil
		}
		data, err := fs.View(p)
		if err != nil {
			// Under a byte quota every file reads (memfs counts holes);
			// should one not, it is counted, not dropped unsaid.
			listed[n] = true
			omitted++
			return nil
		}
		if old, ok := before(p); ok && bytes.Equal(old, data) {
			return nil
		}
		listed[n] = true
		add(p, append([]byte{}, data...))
		return nil
	})
	return omitted
}

// filesBelow counts the regular files at or below n not yet in listed,
// and adds them, without building their paths.
func filesBelow(fs *memfs.FS, n *memfs.Inode, listed map[*memfs.Inode]bool) int {
	count := 0
	stack := []*memfs.Inode{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch n.Kind() {
		case memfs.KindDir:
			ents, _ := fs.ReadDir(n)
			for _, e := range ents {
				stack = append(stack, e.Inode)
			}
		case memfs.KindFile:
			if !listed[n] {
				listed[n] = true
				count++
			}
		}
	}
	return count
}
