package engine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapInto maps img's memfd copy-on-write over the start of mem, a run's
// memory already grown to the image's size: the run then reads the
// image's pages from the page cache, shared with other runs, instead of
// copying ~13 MB it mostly never touches. It reports false when the image
// has no memfd or the mapping fails; mem is unchanged then.
func (img *Snapshot) mapInto(mem []byte) bool {
	b := img.backing
	if b == nil || len(mem) < b.size || b.size != len(img.memory) {
		return false
	}
	_, err := unix.MmapPtr(b.fd, 0, unsafe.Pointer(unsafe.SliceData(mem)), uintptr(b.size),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED|unix.MAP_NORESERVE)
	return err == nil
}
