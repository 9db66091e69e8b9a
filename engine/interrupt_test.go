package engine_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/python"
)

// TestPythonLoopsStopAtTheDeadline: python.wasm takes the loop-check
// rewrite (so wazero's slower close-on-context-done is off), and a busy
// loop still ends at the deadline, fresh and resumed from a snapshot,
// with the next run unaffected.
func TestPythonLoopsStopAtTheDeadline(t *testing.T) {
	m := resumable(t)
	if !engine.LoopChecked(m) {
		t.Fatal("the asyncified python.wasm did not take the loop-check rewrite")
	}
	cache, _ := python.CacheDir()
	fresh, err := engine.Load(context.Background(), testArt.Wasm, engine.Options{CacheDir: filepath.Join(cache, "compiled")})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(context.Background())
	if !engine.LoopChecked(fresh) {
		t.Fatal("python.wasm did not take the loop-check rewrite")
	}
	img := captureLoop(t, m)
	var out bytes.Buffer
	for _, busy := range []string{"while True: pass", "x = 0\nwhile True:\n    x += 1", "sum(range(10**12))", "sorted(range(10**8))"} {
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
