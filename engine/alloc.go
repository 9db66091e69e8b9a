package engine

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory backs one instance's memory with a region reserved once at
// the run's cap, so growth never copies and never exceeds the cap. The
// reservation costs address space only: pages are committed when touched.
type linearMemory struct {
	buf   []byte // the whole reservation; len = cap
	size  uint64
	limit *runLimits
	free  func([]byte)
}

// runLimits is shared by the allocator and the run that reads it afterwards.
type runLimits struct {
	maxBytes uint64
	peak     atomic.Uint64
	hit      atomic.Bool
	// region is the reservation Allocate made for the instance, for
	// idleRegions to measure an instance made ahead.
	region []byte
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		m.limit.hit.Store(true)
		return nil
	}
	m.size = size
	if size > m.limit.peak.Load() {
		m.limit.peak.Store(size)
	}
	return m.buf[:size:size]
}

func (m *linearMemory) Free() {
	if m.buf != nil {
		// The length tells a pooled region how much the run used (see
		// resetRegion); the capacity is the whole reservation.
		m.free(m.buf[:m.size])
		m.buf = nil
	}
}

// allocator hands out linearMemory reservations capped at limits.maxBytes.
// With an image, the reservation starts as the image's memory (see
// snapshotRegion).
type allocator struct {
	limits *runLimits
	image  *Snapshot
}

func (a allocator) Allocate(_, max uint64) experimental.LinearMemory {
	size := min(a.limits.maxBytes, max)
	var buf []byte
	var free func([]byte)
	if a.image != nil {
		buf, free = snapshotRegion(a.image, size, false)
	} else {
		buf, free = reserve(size)
	}
	a.limits.region = buf
	return &linearMemory{buf: buf, limit: a.limits, free: free}
}

// reserveHeap is the portable fallback: a Go slice of the full cap. The Go
// runtime maps large allocations lazily on most systems, so untouched pages
// still cost little.
func reserveHeap(size uint64) ([]byte, func([]byte)) {
	return make([]byte, size), func([]byte) {}
}
