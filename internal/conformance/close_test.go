package airlock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// privateCache is a cache dir of links to the real one: a Sandbox on it
// compiles nothing but shares its modules with no other Sandbox.
func privateCache(t *testing.T) string {
	t.Helper()
	real, err := python.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(real)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(real, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Close while runs are going stops them and waits for them before it
// frees their compiled code: freeing it under a guest writing a file
// crashed the process (SIGSEGV). Runs after Close get ErrClosed.
func TestCloseStopsAndWaitsForRuns(t *testing.T) {
	ctx := context.Background()
	own, err := airlock.New(ctx, append(suiteOptions(), airlock.WithCacheDir(privateCache(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = own.Run(ctx, airlock.Request{
				Code:   "b = b'x' * (32 << 20)\nwhile True:\n    with open('f', 'wb', buffering=0) as f:\n        f.write(b)\n",
				Limits: airlock.Limits{Timeout: time.Minute, FSBytes: 1 << 30},
			})
		})
	}
	time.Sleep(time.Second)
	start := time.Now()
	if err := own.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Close took %v: the runs were not stopped", d)
	}
	for _, err := range errs {
		if errors.Is(err, airlock.ErrCrash) {
			t.Fatalf("a run stopped by Close reads as a crash: %v", err)
		}
	}
	if _, err := own.Run(ctx, airlock.Request{Code: "pass"}); !errors.Is(err, airlock.ErrClosed) {
		t.Fatalf("a run after Close: %v, want ErrClosed", err)
	}
}

// Closing twice releases the shared compiled code once: another Sandbox
// using it goes on working.
func TestCloseTwice(t *testing.T) {
	ctx := context.Background()
	other, err := airlock.New(ctx, suiteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	first := other.Close(ctx)
	if second := other.Close(ctx); second != first {
		t.Fatalf("second Close: %v, first %v", second, first)
	}
	if res, err := sb.Run(ctx, airlock.Request{Code: "print(1 + 1)"}); err != nil || string(res.Stdout) != "2\n" {
		t.Fatalf("the other Sandbox after a double Close: %v %q", err, res.Stdout)
	}
}
