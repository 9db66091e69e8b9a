package engine

import "os"

// privateBytes returns, for each region, the bytes of it that the process
// holds privately: its own copies of pages (those runs wrote, and zeroed
// memory past the image kept resident), not the image's shared ones. It
// reads them page by page from /proc/self/pagemap, as a region's reset
// does (backing.restore). /proc/self/smaps says it per mapping, and a
// mapping can reach past a region (the kernel merges adjacent anonymous
// mappings), whose pages then went uncounted; it also counted the image's
// pages that one region alone had read as private. ok is false where the
// kernel does not say.
func privateBytes(regions [][]byte) (private []int64, ok bool) {
	page := os.Getpagesize()
	private = make([]int64, len(regions))
	for i, r := range regions {
		pages := 0
		if !written(r[:len(r)/page*page], page, func(int) { pages++ }) {
			return nil, false
		}
		private[i] = int64(pages) * int64(page)
	}
	return private, true
}
