package main

import (
	"fmt"
	"os"
)

// writableCache checks that setup can write into the cache directory dir
// (making it if need be). Runs work from a cache they cannot write (they
// compile and capture in memory, each time); setup's whole point is to
// leave what it prepared there, so it says at once that it cannot,
// rather than prepare for nothing and report ready.
func writableCache(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("the cache directory %s cannot be made: %w (set AIRLOCK_CACHE_DIR or --cache-dir to one this user can write)", dir, err)
	}
	f, err := os.CreateTemp(dir, ".airlock-setup-probe-*")
	if err != nil {
		return fmt.Errorf("the cache directory %s is not writable: %w (set AIRLOCK_CACHE_DIR or --cache-dir to one this user can write; runs can use a read-only cache that setup prepared)", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}
