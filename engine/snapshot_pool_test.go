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
		testPoolReset(t, img, len(img.Memory)+keptTail+8*65536)
	})
	t.Run("copied", func(t *testing.T) {
		img := &Image{Memory: testImage().Memory} // no backing
		defer img.Close()
		testPoolReset(t, img, 16*65536)
	})
}

func testPoolReset(t *testing.T, img *Image, size int) {
	p := img.poolFor(uint64(size))
	for deadline := time.Now().Add(10 * time.Second); ; {
		buf, free := reserveImage(img, uint64(size))
		for i := range buf {
			buf[i] = 0xee
		}
		free(buf)
		p.mu.Lock()
		ready := len(p.free)
		p.mu.Unlock()
		if ready > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Skip("no pooled region was prepared (no mmap here?)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		buf, free := reserveImage(img, uint64(size))
		if !bytes.Equal(buf[:len(img.Memory)], img.Memory) {
			t.Fatal("a reused region does not start as the image")
		}
		if !bytes.Equal(buf[len(img.Memory):], make([]byte, size-len(img.Memory))) {
			t.Fatal("a reused region kept a previous run's memory past the image")
		}
		for i := range buf {
			buf[i] = 0xee
		}
		free(buf)
	}
}
