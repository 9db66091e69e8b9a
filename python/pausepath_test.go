package python

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestPausePath: the own build's stack at the interactive loop's read runs
// from the WASI read through C stdio and CPython's line reader (called
// through a function pointer, so never inlined) up to the entry point;
// the npm build, whose functions are not named, has none.
func TestPausePath(t *testing.T) {
	ctx := context.Background()
	cache := mustCacheDir(t)
	if art, err := Load(SelectNPM, cache); err == nil {
		if path, err := PausePath(ctx, art, cache); !errors.Is(err, ErrNoPausePath) {
			t.Errorf("npm build: %v, %v; want ErrNoPausePath", path, err)
		}
	}
	art, err := LoadOwn(OwnDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	path, err := PausePath(ctx, art, cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"PyOS_StdioReadline", "_start"} {
		if !slices.Contains(path, name) {
			t.Errorf("pause path %v lacks %s", path, name)
		}
	}
	if path[len(path)-1] != "_start" || len(path) > 40 {
		t.Errorf("pause path %v: want the stack from the read to _start", path)
	}
}
