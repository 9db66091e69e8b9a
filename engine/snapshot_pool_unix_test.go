//go:build unix

package engine

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// A guarded region (package wasmtime's) comes back from a run on the base
// image with the pages past that run's memory inaccessible; a session's
// delta image, longer than its base, must still get a region from the
// base's pool with its own pages written there. Writing them into the
// closed pages once killed the process with SIGSEGV (serve on wasmtime).
func TestGuardedRegionTakesALongerDelta(t *testing.T) {
	base := &Snapshot{memory: testImage().memory} // no backing: the pool's own regions
	defer base.Close()
	n := len(base.memory)
	size := uint64(n + 16*PageSize)
	runOnBase := func() {
		t.Helper()
		buf, free := snapshotRegion(base, size, true)
		if buf == nil {
			t.Skip("no region could be mapped here")
		}
		// What package wasmtime's offerRegion does: close the pages past
		// the memory; the run then ends without growing.
		if err := unix.Mprotect(buf[n:], unix.PROT_NONE); err != nil {
			t.Fatal(err)
		}
		free(buf[:n])
	}
	// Until a run has given a pooled region back, its tail closed.
	if !untilPooled(base.poolFor(regionKey{size, true}), runOnBase) {
		t.Fatal("no pooled region was prepared")
	}

	longer := bytes.Clone(base.memory)
	longer = append(longer, make([]byte, 4*PageSize)...)
	copy(longer[n+2*PageSize:], "past the base")
	delta := newDeltaImage(base, longer, nil, 0)
	defer delta.Close()
	if delta.DeltaPages() == 0 || delta.Len() <= n {
		t.Fatalf("not a longer delta image: %d pages, %d bytes", delta.DeltaPages(), delta.Len())
	}
	buf, free := snapshotRegion(delta, size, true)
	if buf == nil {
		t.Fatal("no region for the delta image")
	}
	defer free(buf[:delta.Len()])
	if !bytes.Equal(buf[:delta.Len()], longer) {
		t.Fatal("the region does not read as the delta image")
	}
}
