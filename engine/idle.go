package engine

// idleRegions returns the memory regions kept between runs resumed from
// img: its pools' reset regions and, on wazero, the memories of instances
// made ahead from it. Each is a whole reservation (length = capacity);
// they share the image's unchanged pages, and privateBytes tells what each
// holds of its own.
func (m *Compiled) idleRegions(img *Snapshot) [][]byte {
	img.closes.wait() // the regions runs just ended give back
	var out [][]byte
	img.poolMu.Lock()
	pools := make([]*regionPool, 0, len(img.pools))
	for _, p := range img.pools {
		pools = append(pools, p)
	}
	img.poolMu.Unlock()
	for _, p := range pools {
		p.mu.Lock()
		for _, buf := range p.free {
			out = append(out, buf[:cap(buf)])
		}
		p.mu.Unlock()
	}
	if c, ok := m.code.(*wzCode); ok {
		out = append(out, c.readyMemories(img)...)
	}
	return out
}

// readyMemories are the linear memories of the instances made ahead from img.
func (c *wzCode) readyMemories(img *Snapshot) [][]byte {
	var out [][]byte
	for _, p := range c.poolsOf(img) {
		p.mu.Lock()
		for _, r := range p.ready {
			if buf := r.limits.region; buf != nil {
				out = append(out, buf[:cap(buf)])
			}
		}
		p.mu.Unlock()
	}
	return out
}

// DropIdleRegions unmaps the reset regions img's pools keep for the next
// runs, for a process near its memory budget: a region is cheaper to make
// again (its first run faults its pages in, milliseconds) than a session
// is to move to disk and back. The pools stay, empty, and refill as runs
// end. It returns how many regions were dropped.
func (img *Snapshot) DropIdleRegions() int {
	img.poolMu.Lock()
	pools := make([]*regionPool, 0, len(img.pools))
	for _, p := range img.pools {
		pools = append(pools, p)
	}
	img.poolMu.Unlock()
	n := 0
	for _, p := range pools {
		n += p.drop()
	}
	return n
}

// DropIdleMemory gives back what is kept between runs resumed from img
// (idleRegions) for a process near its memory budget: on wazero the
// instances made ahead from it, whose regions their closes reset into
// img's pools, and then those pools' regions. The instances are made
// ahead again as runs start (Resume takes one and the pool refills) and
// the regions as runs end. It returns how many regions were dropped, an
// instance's counted once.
func (m *Compiled) DropIdleMemory(img *Snapshot) int {
	pooled := img.DropIdleRegions()
	instances := 0
	if c, ok := m.code.(*wzCode); ok {
		instances = c.dropReady(img)
	}
	img.DropIdleRegions() // the instances' regions, reset into the pools
	return pooled + instances
}

// IdleMemory reports the memory regions kept between runs resumed from img
// (idleRegions): how many, and the bytes each holds of its own rather than
// shares with the snapshot, or nil where the kernel does not say.
func (m *Compiled) IdleMemory(img *Snapshot) (regions int, private []int64) {
	idle := m.idleRegions(img)
	private, _ = privateBytes(idle)
	return len(idle), private
}
