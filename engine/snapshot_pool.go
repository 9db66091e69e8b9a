package engine

import (
	"runtime"
	"sync"
)

// Restoring an image into a run's memory, measured on a 2-core VM (13 MB
// image, a run touching ~300 pages):
//
//   - a private copy-on-write mapping of the image (backing) costs nothing
//     to create, but every page the run touches first faults, at 20-40 µs
//     a fault on such a machine: 7-14 ms of system time per run;
//   - copying the image into a fresh anonymous region faults on every page:
//     worse, ~40 ms;
//   - copying it into a region whose pages are already present costs
//     ~0.5 ms and no faults at all.
//
// So runs take regions from a pool, each already holding private pages,
// and copy the image in. A region returns to the pool after its run with
// the memory the run grew beyond the image released (MADV_DONTNEED, which
// also makes it read as zeros again). When the pool is empty a run maps
// the image copy-on-write instead, and a region is prepared for the pool in
// the background, off every run's path. The price is private memory: each
// idle pooled region holds a copy of the image.

// regionPool keeps prepared regions of one size for one image.
type regionPool struct {
	img  *Image
	size uint64
	mu   sync.Mutex
	free [][]byte
	// pending counts regions being prepared; free+pending stays <= max.
	pending int
	max     int
	closed  bool
}

// poolMax bounds idle regions per image and size: enough for every core
// to start a run while the previous ones are being torn down.
func poolMax() int { return max(2*runtime.GOMAXPROCS(0), 4) }

func (img *Image) poolFor(size uint64) *regionPool {
	img.poolMu.Lock()
	defer img.poolMu.Unlock()
	if img.closed {
		return nil
	}
	if img.pools == nil {
		img.pools = map[uint64]*regionPool{}
	}
	p := img.pools[size]
	if p == nil {
		p = &regionPool{img: img, size: size, max: poolMax()}
		img.pools[size] = p
	}
	return p
}

// get returns a region holding a fresh copy of the image, or nil.
func (p *regionPool) get() []byte {
	p.mu.Lock()
	n := len(p.free)
	if n == 0 {
		p.mu.Unlock()
		return nil
	}
	buf := p.free[n-1]
	p.free = p.free[:n-1]
	p.mu.Unlock()
	copy(buf, p.img.Memory)
	return buf
}

// put takes back a region after its run, or unmaps it when the pool is
// full or closed.
func (p *regionPool) put(buf []byte) {
	if !resetRegion(buf, len(p.img.Memory)) {
		unreserve(buf)
		return
	}
	p.mu.Lock()
	if p.closed || len(p.free)+p.pending >= p.max {
		p.mu.Unlock()
		unreserve(buf)
		return
	}
	p.free = append(p.free, buf)
	p.mu.Unlock()
}

// grow prepares one more region in the background when the pool has room.
func (p *regionPool) grow() {
	p.mu.Lock()
	if p.closed || len(p.free)+p.pending >= p.max {
		p.mu.Unlock()
		return
	}
	p.pending++
	p.mu.Unlock()
	go func() {
		buf, ok := reservePoolable(p.size)
		p.mu.Lock()
		p.pending--
		p.mu.Unlock()
		if !ok {
			return
		}
		copy(buf, p.img.Memory) // faults every page in, here rather than in a run
		p.put(buf)
	}()
}

func (p *regionPool) close() {
	p.mu.Lock()
	p.closed = true
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, buf := range free {
		unreserve(buf)
	}
}

// reserveImage reserves size bytes that start as img.Memory, the rest
// zero: a pooled region when one is ready, else a copy-on-write mapping of
// the image's backing, else a plain copy.
func reserveImage(img *Image, size uint64) ([]byte, func([]byte)) {
	if p := img.poolFor(size); p != nil {
		if buf := p.get(); buf != nil {
			return buf, p.put
		}
		p.grow()
	}
	if img.backing != nil {
		if buf, free, ok := img.backing.reserve(size); ok {
			return buf, free
		}
	}
	buf, free := reserve(size)
	copy(buf, img.Memory)
	return buf, free
}
