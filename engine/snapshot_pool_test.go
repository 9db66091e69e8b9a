package engine

import (
	"bytes"
	"testing"
	"time"
)

// TestPooledRegionsAreReset: a region back from a run that wrote all over
// its image part and grew past it starts the next run as the image again,
// with zeros beyond.
func TestPooledRegionsAreReset(t *testing.T) {
	t.Run("copy-on-write", func(t *testing.T) {
		img := testImage()
		defer img.Close()
		if img.backing == nil || !canRestore() {
			t.Skip("no copy-on-write backing or no pagemap here")
		}
		testPoolReset(t, img, 16*65536)
		// Past keptTail, memory is released rather than cleared.
		testPoolReset(t, img, len(img.memory)+keptTail+8*65536)
	})
	t.Run("copied", func(t *testing.T) {
		img := &Snapshot{memory: testImage().memory} // no backing
		defer img.Close()
		testPoolReset(t, img, 16*65536)
	})
}

// untilPooled runs run (a run that takes a region and gives it back)
// until p keeps an idle region: the first runs map their own while the
// pool prepares one. False if none comes within 10 s.
func untilPooled(p *regionPool, run func()) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		run()
		p.mu.Lock()
		ready := len(p.free)
		p.mu.Unlock()
		if ready > 0 {
			return true
		}
	}
	return false
}

func testPoolReset(t *testing.T, img *Snapshot, size int) {
	p := img.poolFor(regionKey{size: uint64(size)})
	if !untilPooled(p, func() {
		buf, free := reserveImage(img, regionKey{size: uint64(size)})
		for i := range buf {
			buf[i] = 0xee
		}
		free(buf)
	}) {
		t.Skip("no pooled region was prepared (no mmap here?)")
	}
	for range 3 {
		buf, free := reserveImage(img, regionKey{size: uint64(size)})
		if !bytes.Equal(buf[:len(img.memory)], img.memory) {
			t.Fatal("a reused region does not start as the image")
		}
		if !bytes.Equal(buf[len(img.memory):], make([]byte, size-len(img.memory))) {
			t.Fatal("a reused region kept a previous run's memory past the image")
		}
		for i := range buf {
			buf[i] = 0xee
		}
		free(buf)
	}
}

// A client choosing a new memory limit for every run must not make the
// image keep idle regions for each: past maxPoolSizes sizes the least
// recently used pool is closed, its regions unmapped.
func TestPoolSizesAreBounded(t *testing.T) {
	img := &Snapshot{memory: testImage().memory}
	defer img.Close()
	firstKey := regionKey{size: uint64(len(img.memory)) + 65536}
	first := img.poolFor(firstKey)
	for i := range 3 * maxPoolSizes {
		size := uint64(len(img.memory)) + uint64(i+2)*65536
		buf, free := reserveImage(img, regionKey{size: size})
		free(buf)
		img.poolFor(firstKey) // first stays in use
	}
	img.poolMu.Lock()
	n := len(img.pools)
	kept := img.pools[firstKey] == first
	img.poolMu.Unlock()
	if n > maxPoolSizes || !kept {
		t.Fatalf("%d pools (at most %d), the one in use kept: %v", n, maxPoolSizes, kept)
	}
	closed := 0
	for i := range 3 * maxPoolSizes {
		size := uint64(len(img.memory)) + uint64(i+2)*65536
		img.poolMu.Lock()
		_, live := img.pools[regionKey{size: size}]
		img.poolMu.Unlock()
		if !live {
			closed++
		}
	}
	if closed < 3*maxPoolSizes-(maxPoolSizes-1) {
		t.Fatalf("only %d of %d sizes were let go", closed, 3*maxPoolSizes)
	}
}

// A region that comes back after its image was closed (Close's contract
// says not to, but a panic in the host is too high a price) is unmapped.
func TestRegionBackAfterImageClose(t *testing.T) {
	img := testImage()
	if img.backing == nil || !canRestore() {
		t.Skip("no copy-on-write backing or no pagemap here")
	}
	buf, free := reserveImage(img, regionKey{size: uint64(len(img.memory) + 4*65536)})
	img.Close()
	free(buf[:len(img.memory)])
}
