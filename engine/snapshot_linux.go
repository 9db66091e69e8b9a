//go:build linux

package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlock-sandbox/airlock/internal/memfd"
)

// backing is an image's memory in a sealed memfd. Each run maps it
// MAP_PRIVATE at the start of its reservation: the run reads the image's
// pages from the page cache, shared with every other run, and gets a
// private copy of a page only when it writes to it.
type backing struct {
	fd   int
	size int
	view []byte // a read-only mapping of the memfd that is the Snapshot's Memory, or nil
}

// newBacking copies mem into a sealed memfd.
func newBacking(mem []byte) (*backing, error) {
	fd, err := memfd.FromBytes("airlock-image", mem)
	if err != nil {
		return nil, fmt.Errorf("engine: image backing: %w", err)
	}
	return &backing{fd: fd, size: len(mem)}, nil
}

func (b *backing) close() {
	if b.view != nil {
		_ = unix.Munmap(b.view)
	}
	unix.Close(b.fd)
}

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
	return unsafe.Slice((*byte)(base), size), unreserve, true
}

// restore makes a region made by reserve read as the image again, keeping
// the pages it shares with the image mapped: it reads which pages of the
// image part are no longer the image's (anonymous copies a run wrote, or
// pages swapped out) from /proc/self/pagemap and copies the image back
// over those only. A region reused this way stops faulting once it holds
// private copies of the pages runs commonly write; the rest stays shared.
//
// Copying back costs every later run of the region as much as the most
// any run wrote, so a region holding more than trimAbove private pages
// is trimmed: a page the run just ended did not change goes back to the
// image's shared page (MADV_DONTNEED) instead, and the region keeps
// what its last run wrote.
//
// It reports false when pagemap cannot be read or a page cannot be
// dropped; the region must then be unmapped.
func (b *backing) restore(buf, image []byte) bool {
	buf = buf[:cap(buf)]
	if len(image) != b.size || len(buf) < b.size {
		return false
	}
	page := os.Getpagesize()
	held := pageLists.Get().(*[]int)
	defer pageLists.Put(held)
	*held = (*held)[:0]
	if !written(buf[:b.size], page, func(i int) { *held = append(*held, i) }) {
		return false
	}
	trim := len(*held) > trimAbove
	start, end := -1, -1 // the run of pages being dropped: [start, end)
	drop := func() bool {
		if start < 0 {
			return true
		}
		err := unix.Madvise(buf[start*page:end*page], unix.MADV_DONTNEED)
		start, end = -1, -1
		return err == nil
	}
	for _, i := range *held {
		mine, theirs := buf[i*page:(i+1)*page], image[i*page:(i+1)*page]
		if trim && bytes.Equal(mine, theirs) {
			if i != end && !drop() {
				return false
			}
			if start < 0 {
				start = i
			}
			end = i + 1
			continue
		}
		copy(mine, theirs)
	}
	return drop()
}

var pageLists = sync.Pool{New: func() any { return new([]int) }}

// written calls fn with the index of each page of mem (page bytes each)
// that the kernel holds neither as its file mapping nor as never touched:
// anonymous pages (written, or copied in) and swapped ones. Any other page
// reads as its mapping's file (an image backing) or as zeros. It reports
// false when pagemap cannot be read.
func written(mem []byte, page int, fn func(i int)) bool {
	fd := pagemapFD()
	if fd < 0 || len(mem)%page != 0 {
		return false
	}
	n := len(mem) / page
	entries := pagemapBufs.Get().(*[]byte)
	defer pagemapBufs.Put(entries)
	if cap(*entries) < n*8 {
		*entries = make([]byte, n*8)
	}
	e := (*entries)[:n*8]
	off := int64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))) / uintptr(page) * 8)
	for done := 0; done < len(e); {
		k, err := unix.Pread(fd, e[done:], off+int64(done))
		if err != nil || k <= 0 {
			return false
		}
		done += k
	}
	for i := range n {
		v := binary.LittleEndian.Uint64(e[i*8:])
		present, swapped, filePage := v&(1<<63) != 0, v&(1<<62) != 0, v&(1<<61) != 0
		if swapped || present && !filePage {
			fn(i)
		}
	}
	return true
}

var (
	pagemapOnce sync.Once
	pagemap     = -1
	pagemapBufs = sync.Pool{New: func() any { return new([]byte) }}
)

func pagemapFD() int {
	pagemapOnce.Do(func() {
		if fd, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			pagemap = fd
		}
	})
	return pagemap
}

// canRestore tells whether backing.restore can work here.
func canRestore() bool { return pagemapFD() >= 0 }

// writtenPages lists the pages written reports.
func writtenPages(mem []byte, page int) (pages []int, ok bool) {
	ok = written(mem, page, func(i int) { pages = append(pages, i) })
	return pages, ok
}
