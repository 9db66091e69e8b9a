package engine

import (
	"context"
	"sync"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Instances made ahead. Instantiating the own build costs ~0.2 ms on
// wazero now that its function table fills on first use (2.5 ms before:
// wasmbin.LazyTable), still a quarter of a small resumed run. A pool keeps a few instances of the module made
// from one full image at one memory cap, instantiated in the background
// while other runs go, so a run takes one ready instead. Each pooled
// instance is used by one run and closed after it, as an inline one is:
// it has run nothing before, and its memory is the image's.

// instancePoolSize is how many ready instances a pool keeps: one per
// core starting a run, without holding idle regions for more.
const instancePoolSize = 2

// maxInstancePools bounds the (image, cap) pairs pooled; past it, runs
// instantiate inline. Memory caps are chosen per request, so a client
// varying them must not grow the process a pool at a time.
const maxInstancePools = 4

type poolKey struct {
	img   *Snapshot
	limit uint64
}

type pooledInstance struct {
	mod    api.Module
	limits *runLimits
}

type instancePool struct {
	code  *wzCode
	key   poolKey
	mu    sync.Mutex
	ready []pooledInstance
	// filling is set while a goroutine instantiates; fills counts it so
	// close can wait: it reads the image, which must outlive it.
	filling bool
	fills   sync.WaitGroup
	closed  bool
}

// instancePool returns the pool for img at limit, or nil when runs with
// it instantiate inline (a delta image, an image closing, too many pools).
func (c *wzCode) instancePool(img *Snapshot, limit uint64) *instancePool {
	if img == nil || img.base != nil {
		return nil
	}
	key := poolKey{img, limit}
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	if c.closed {
		return nil
	}
	if p := c.pools[key]; p != nil {
		return p
	}
	if len(c.pools) >= maxInstancePools {
		return nil
	}
	p := &instancePool{code: c, key: key}
	if !img.onClose(p.close) {
		return nil
	}
	if c.pools == nil {
		c.pools = map[poolKey]*instancePool{}
	}
	c.pools[key] = p
	return p
}

// take returns a ready instance and its limits, or a nil module when
// none is ready yet; either way it starts refilling the pool.
func (p *instancePool) take() (api.Module, *runLimits) {
	p.mu.Lock()
	var got pooledInstance
	if n := len(p.ready); n > 0 {
		got = p.ready[n-1]
		p.ready = p.ready[:n-1]
	}
	start := !p.filling && !p.closed
	if start {
		p.filling = true
		p.fills.Add(1)
	}
	p.mu.Unlock()
	if start {
		go p.fill()
	}
	return got.mod, got.limits
}

func (p *instancePool) fill() {
	defer p.fills.Done()
	for {
		p.mu.Lock()
		if p.closed || len(p.ready) >= instancePoolSize {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		limits := &runLimits{maxBytes: p.key.limit}
		ctx := experimental.WithMemoryAllocator(context.Background(), allocator{limits: limits, image: p.key.img})
		mod, err := p.code.instantiate(ctx)
		p.mu.Lock()
		if err != nil || p.closed {
			p.filling = false
			p.mu.Unlock()
			if mod != nil {
				mod.Close(context.Background())
			}
			return
		}
		p.ready = append(p.ready, pooledInstance{mod: mod, limits: limits})
		p.mu.Unlock()
	}
}

// close drops the ready instances and waits for a fill under way. It may
// be called more than once (by the image and by the code closing).
func (p *instancePool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	p.fills.Wait()
	for _, r := range ready {
		r.mod.Close(context.Background())
	}
}

// poolsOf are the pools of instances made ahead from img.
func (c *wzCode) poolsOf(img *Snapshot) []*instancePool {
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	var pools []*instancePool
	for key, p := range c.pools {
		if key.img == img {
			pools = append(pools, p)
		}
	}
	return pools
}

// dropReady closes the instances made ahead from img and says how many:
// its pools stay, and refill when a run next takes from them.
func (c *wzCode) dropReady(img *Snapshot) int {
	n := 0
	for _, p := range c.poolsOf(img) {
		p.mu.Lock()
		ready := p.ready
		p.ready = nil
		p.mu.Unlock()
		for _, r := range ready {
			r.mod.Close(context.Background())
		}
		n += len(ready)
	}
	return n
}

// closePools closes every pool, before the runtime they instantiate in.
func (c *wzCode) closePools() {
	c.poolMu.Lock()
	c.closed = true
	pools := c.pools
	c.pools = nil
	c.poolMu.Unlock()
	for _, p := range pools {
		p.close()
	}
}

// onClose registers fn to run when img closes, before its regions and
// backing go; false when img is closed already.
func (img *Snapshot) onClose(fn func()) bool {
	img.poolMu.Lock()
	defer img.poolMu.Unlock()
	if img.closed {
		return false
	}
	img.closeHooks = append(img.closeHooks, fn)
	return true
}
