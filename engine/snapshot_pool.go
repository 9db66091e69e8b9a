package engine

import (
	"runtime"
	"sync"

	"github.com/airlock-sandbox/airlock/engine/internal/backend"
)

// Restoring an image into a run's memory, measured on a 2-core VM (13 MB
// image, a run touching ~300 pages, writing ~200):
//
//   - a fresh private copy-on-write mapping of the image (backing) is free
//     to create, but every page the run touches first faults, at 20-40 µs a
//     fault on such a machine: 7-14 ms of system time per run;
//   - copying the image into a fresh anonymous region faults on every page:
//     worse, ~40 ms;
//   - copying it into a region whose pages are already present costs
//     ~0.5-0.9 ms and no faults, but each pooled region then holds a whole
//     private copy of the image.
//
// So runs reuse regions from a pool. Where the image has a copy-on-write
// backing and the kernel says which pages a run wrote (/proc/self/pagemap),
// a region is the backing's mapping and is reset after its run by copying
// the image back over just the pages that are no longer the image's
// (backing.restore): a reused region stops faulting once it holds private
// copies of the pages runs commonly write, and all else stays shared with
// every other region. Elsewhere a pooled region is anonymous memory that
// gets the whole image copied in before each run, prepared in the
// background when the pool runs dry. Either way the memory a run grew past
// the image is released on reset (MADV_DONTNEED), so it reads as zeros.

// trimAbove is how many private pages of the image a region may hold
// before its reset trims it (backing.restore): 2 MiB, twice what the
// benchmark's workloads leave (a run of pass or print ~100 pages, json
// and re ~250). A variable for tests.
var trimAbove = 512

// regionPool keeps reset regions of one size for one image.
type regionPool struct {
	img  *Snapshot
	key  regionKey
	cow  bool // regions are backing mappings, reset by backing.restore
	mu   sync.Mutex
	free [][]byte
	// pending counts regions being prepared; free+pending stays <= max.
	pending int
	// growing is the goroutines preparing them, which read the image's
	// memory: close waits for them, as the image's memory may be a
	// mapping its Close unmaps.
	growing sync.WaitGroup
	max     int
	closed  bool
	used    uint64 // img.poolClock when last asked for; under img.poolMu
}

// maxPoolSizes bounds the reservation sizes (memory limits) an image keeps
// idle regions for. Each pool holds up to poolMax regions with their own
// copies of the pages runs wrote, so a client picking a new memory limit
// for every run grew the process by tens of megabytes a limit (measured:
// +1.1 GB over 40 limits); the least recently used size's pool is closed
// to make room for another.
const maxPoolSizes = 4

// poolMax bounds idle regions per image and size: enough for every core
// to start a run while the previous ones are being torn down.
func poolMax() int { return max(2*runtime.GOMAXPROCS(0), 4) }

// regionKey tells pools apart: by reservation size, and whether the
// regions go to an engine that makes the pages past a run's memory
// inaccessible (snapshotRegion), which wazero's regions must never be.
type regionKey struct {
	size    uint64
	guarded bool
}

func (img *Snapshot) poolFor(key regionKey) *regionPool {
	img.poolMu.Lock()
	if img.closed {
		img.poolMu.Unlock()
		return nil
	}
	if img.pools == nil {
		img.pools = map[regionKey]*regionPool{}
	}
	var evicted *regionPool
	p := img.pools[key]
	if p == nil {
		if len(img.pools) >= maxPoolSizes {
			for _, q := range img.pools {
				if evicted == nil || q.used < evicted.used {
					evicted = q
				}
			}
			delete(img.pools, evicted.key)
		}
		p = &regionPool{img: img, key: key, max: poolMax(), cow: img.backing != nil && canRestore()}
		img.pools[key] = p
	}
	img.poolClock++
	p.used = img.poolClock
	img.poolMu.Unlock()
	if evicted != nil {
		evicted.close() // regions out in runs are unmapped when they come back
	}
	return p
}

// get returns a region that reads as the image, or nil.
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
	if !p.cow {
		copy(buf, p.img.memory)
	}
	return buf
}

// put resets a region after its run and keeps it, or unmaps it when it
// cannot be reset or the pool is full or closed.
func (p *regionPool) put(buf []byte) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed { // the image may be closed too, its backing gone
		unreserve(buf)
		return
	}
	n := len(p.img.memory)
	ok := resetRegion(buf, n)
	if ok && p.cow {
		ok = p.img.backing.restore(buf, p.img.memory)
	}
	p.mu.Lock()
	if !ok || p.closed || len(p.free)+p.pending >= p.max {
		p.mu.Unlock()
		unreserve(buf)
		return
	}
	p.free = append(p.free, buf[:cap(buf)])
	p.mu.Unlock()
}

// grow prepares an anonymous region in the background when the pool has
// room: the copy faults every page in there rather than in a run.
func (p *regionPool) grow() {
	p.mu.Lock()
	if p.closed || len(p.free)+p.pending >= p.max {
		p.mu.Unlock()
		return
	}
	p.pending++
	p.growing.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.growing.Done()
		buf, ok := reservePoolable(p.key.size)
		p.mu.Lock()
		p.pending--
		p.mu.Unlock()
		if ok {
			copy(buf, p.img.memory)        // fault the pages in
			p.put(buf[:len(p.img.memory)]) // nothing past the image to clear
		}
	}()
}

func (p *regionPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.growing.Wait() // each puts its region, which closed unmaps
	p.drop()
}

// drop unmaps the pool's idle regions and says how many there were.
func (p *regionPool) drop() int {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, buf := range free {
		unreserve(buf)
	}
	return len(free)
}

// snapshotRegion reserves size bytes that read as img's memory (a delta
// image: its base's with pages replaced), the rest zeros, for an instance
// whose memory the host supplies: wazero's allocator, or package
// wasmtime's memory creator, which asks for guarded ones: it makes the
// pages past the run's memory inaccessible, so its regions are pooled
// apart from wazero's, which must be readable throughout. free takes the
// region back once no instance uses it, sliced to the length its run
// used; the pages up to that length must be readable and writable. A
// guarded region is always mapped memory, never the Go heap; buf is nil
// when none can be mapped.
func snapshotRegion(img *Snapshot, size uint64, guarded bool) (buf []byte, free func([]byte)) {
	if img.base != nil {
		buf, free = reserveImage(img.base, regionKey{size, guarded})
		if buf == nil {
			return nil, nil
		}
		// A guarded region's last run may have left the pages past its
		// own length inaccessible, and a delta image can be longer than
		// its base: open them before the delta's pages are written there.
		if guarded && !openRegion(buf[:img.size]) {
			free(buf[:len(img.base.memory)]) // readable after any run on the base
			return nil, nil
		}
		img.applyDelta(buf)
		return buf, free
	}
	return reserveImage(img, regionKey{size, guarded})
}

// reserveImage reserves key.size bytes that start as img.Memory, the rest
// zero: a pooled region when one is ready, else a new copy-on-write
// mapping of the image's backing (which joins the pool after its run),
// else a plain copy.
func reserveImage(img *Snapshot, key regionKey) ([]byte, func([]byte)) {
	size := key.size
	p := img.poolFor(key)
	if p != nil {
		if buf := p.get(); buf != nil {
			return buf, p.put
		}
		// A region closing in the background (close_later.go) is back
		// within ~0.1 ms; a new mapping faults in every page its run
		// touches, milliseconds.
		for img.closes.awaitOne() {
			if buf := p.get(); buf != nil {
				return buf, p.put
			}
		}
	}
	if img.backing != nil {
		if buf, free, ok := img.backing.reserve(size); ok {
			if p != nil && p.cow {
				return buf, p.put
			}
			return buf, free
		}
	}
	if p != nil {
		p.grow()
	}
	var buf []byte
	var free func([]byte)
	if key.guarded {
		// Never reserve's fallback to the Go heap: a guarded region's
		// pages are made inaccessible.
		var ok bool
		if buf, ok = reservePoolable(size); !ok {
			return nil, nil
		}
		free = unreserve
	} else {
		buf, free = reserve(size)
	}
	copy(buf, img.memory)
	return buf, free
}

func init() {
	backend.Region = func(img backend.Image, size uint64, guarded bool) ([]byte, func([]byte)) {
		return snapshotRegion(img.(*Snapshot), size, guarded)
	}
	backend.Fill = func(img backend.Image, mem []byte) { img.(*Snapshot).fill(mem) }
	backend.NewImage = func(memory []byte) backend.Image { return newSnapshot(memory, nil, 0) }
}
