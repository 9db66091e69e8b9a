package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/engine"
)

// TestInstancePoolIsolation: runs resumed from one image, many at once and
// most of them on instances made ahead, each start from the image and see
// nothing another run did, pooled or not; a run at another memory cap gets
// that cap; closing the image with instances ready and a fill under way,
// then resuming a new image, neither leaks a run's state nor fails.
func TestInstancePoolIsolation(t *testing.T) {
	m := resumable(t)
	ctx := context.Background()
	img := captureLoop(t, m)
	run := func(code string, limit uint64, unpooled bool) (engine.Outcome, string, error) {
		var out bytes.Buffer
		o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte(code), &out), MemoryLimit: limit, Unpooled: unpooled})
		return o, out.String(), err
	}
	// Each run marks the interpreter and the memory; none may see a mark.
	const probe = `import sys
seen = getattr(sys, "airlock_mark", None)
sys.airlock_mark = %d
buf = bytearray(4 << 20)
print(seen, len(buf))`
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			_, out, err := run(fmt.Sprintf(probe, i), 256<<20, i%5 == 0)
			if err != nil || out != fmt.Sprintf("None %d\n", 4<<20) {
				errs <- fmt.Errorf("run %d: %v %q", i, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	o, _, err := run("b = bytearray(100 << 20)", 64<<20, false)
	if err == nil && !o.MemoryLimitHit {
		t.Fatalf("a 64 MiB cap let 100 MiB through: %+v", o)
	}
	if o, out, err := run("print('after the small cap')", 256<<20, false); err != nil || out != "after the small cap\n" || o.MemoryLimitHit {
		t.Fatalf("a run after: %v %q %+v", err, out, o)
	}
	img.Close() // instances ready in its pools, and likely a fill going
	img2 := captureLoop(t, m)
	defer img2.Close()
	var out bytes.Buffer
	if o, err := m.Resume(ctx, img2, engine.RunSpec{WASI: resumed([]byte("import sys; print(getattr(sys, 'airlock_mark', None))"), &out), MemoryLimit: 256 << 20}); err != nil || o.ExitCode != 0 || out.String() != "None\n" {
		t.Fatalf("a new image after the old one closed: %v %+v %q", err, o, out.String())
	}
}
