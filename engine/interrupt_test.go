package engine_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/enginetest"
	"github.com/airlock-sandbox/airlock/python"
)

// busyRecursion repeats without end through calls alone: no backward jump.
const busyRecursion = "def f(n):\n    return f(n - 1) + f(n - 1) if n else 0\nf(200)"

// TestPythonLoopsStopAtTheDeadline: python.wasm takes the loop-check
// rewrite (so wazero's slower close-on-context-done is off), and a busy
// loop still ends at the deadline, fresh and resumed from a snapshot,
// with the next run unaffected: loops in Python and in C, and programs
// that repeat through calls (recursion without a backward jump),
// generators, yield from and exceptions.
func TestPythonLoopsStopAtTheDeadline(t *testing.T) {
	m := resumable(t)
	if !engine.LoopChecked(m) {
		t.Fatalf("the asyncified python.wasm did not take the loop-check rewrite (%s)", engine.RewriteRefusals(m))
	}
	cache, _ := python.CacheDir()
	wasm, err := enginetest.Artifact().Module()
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := engine.Load(context.Background(), wasm, engine.Options{CacheDir: filepath.Join(cache, "compiled")})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(context.Background())
	if !engine.LoopChecked(fresh) {
		t.Fatal("python.wasm did not take the loop-check rewrite")
	}
	img := captureLoop(t, m)
	var out bytes.Buffer
	for _, busy := range []string{"while True: pass", "x = 0\nwhile True:\n    x += 1", "sum(range(10**12))", "sorted(range(10**8))",
		busyRecursion,
		"def g():\n    while True:\n        yield 1\nfor _ in g(): pass",
		"import collections, itertools\ndef g():\n    yield from itertools.count()\ncollections.deque(g(), maxlen=0)",
		"while True:\n    try:\n        raise ValueError\n    except ValueError:\n        pass",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		_, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte(busy), &out), MemoryLimit: 1 << 30})
		cancel()
		if !errors.Is(err, engine.ErrInterrupted) || time.Since(start) > 5*time.Second {
			t.Fatalf("%q resumed: %v after %v, want ErrInterrupted soon after 300ms", busy, err, time.Since(start))
		}
		ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
		start = time.Now()
		_, err = fresh.Run(ctx, engine.RunSpec{WASI: state(busy, nil, &out), MemoryLimit: 1 << 30})
		cancel()
		if !errors.Is(err, engine.ErrInterrupted) || time.Since(start) > 10*time.Second {
			t.Fatalf("%q fresh: %v after %v, want ErrInterrupted", busy, err, time.Since(start))
		}
		o, err := m.Resume(context.Background(), img, engine.RunSpec{WASI: resumed([]byte("print(6 * 7)"), &out), MemoryLimit: 1 << 30})
		if err != nil || o.ExitCode != 0 {
			t.Fatalf("run after an interrupted one: %v %+v", err, o)
		}
	}
}

// TestSpinningGuestLetsTheGCRun: a guest that never calls the host by
// itself still lets the Go runtime stop the world (through the loop
// budget's sched_yield), so a collection started meanwhile finishes long
// before the guest's deadline rather than waiting for it. (A guest that
// never yields blocks runtime.GC for good, as it blocks every goroutine:
// then the test binary's timeout ends this test.)
func TestSpinningGuestLetsTheGCRun(t *testing.T) {
	m := resumable(t)
	img := captureLoop(t, m)
	for _, busy := range []string{"while True: pass", busyRecursion} {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		done := make(chan error, 1)
		var out bytes.Buffer
		go func() {
			_, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte(busy), &out), MemoryLimit: 1 << 30})
			done <- err
		}()
		time.Sleep(300 * time.Millisecond) // the guest is spinning by now
		start := time.Now()
		runtime.GC()
		took := time.Since(start)
		cancel()
		if err := <-done; !errors.Is(err, engine.ErrInterrupted) {
			t.Fatalf("%q: %v, want ErrInterrupted (it should have been spinning)", busy, err)
		}
		if took > 2*time.Second {
			t.Errorf("%q: a GC took %v while the guest spun, want well under its 6s deadline", busy, took)
		}
	}
}
