package python

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// stackAtRead stops a run at its first read of stdin: the wasm stack trace
// wazero puts in the error names the functions on the stack there.
type stackAtRead struct{}

func (stackAtRead) Read([]byte) (int, error) { panic("airlock test: stop at the first read of stdin") }

// wazero's trace lines: "\t<module>.<function>(<params>) <results>",
// where the module's name may have dots ("python.wasm") and C names do not.
var traceFrame = regexp.MustCompile(`(?m)^\t[^(]*\.([^.(]+)\(`)

// TestPausePathIsTheLoopsStack: PausePath is exactly the own build's stack
// at the interactive loop's first read, the read a snapshot pauses in; a
// build that inlines differently fails here (and in Asyncify, for a name
// it lacks) instead of producing images that cannot resume.
func TestPausePathIsTheLoopsStack(t *testing.T) {
	cache := mustCacheDir(t)
	art, err := LoadOwn(OwnDir(cache))
	if errors.Is(err, ErrNoOwnBuild) && os.Getenv("AIRLOCK_REQUIRE_OWN_BUILD") == "" {
		t.Skip("no own build (make python); set AIRLOCK_REQUIRE_OWN_BUILD=1 to make this a failure")
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mod, err := engine.Load(ctx, art.Wasm, engine.Options{CacheDir: filepath.Join(cache, "compiled")})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	fs := memfs.New(memfs.Options{})
	fs.MkdirAll(Home)
	if err := fs.Mount(art.Layer); err != nil {
		t.Fatal(err)
	}
	state := wasi.NewState(wasi.Config{Args: Args(), Env: art.BaseEnv(), FS: fs, Stdin: stackAtRead{}})
	defer state.Close()
	_, err = mod.Run(ctx, engine.RunSpec{WASI: state, MemoryLimit: 1 << 30})
	if err == nil {
		t.Fatal("the run never read stdin")
	}
	var stack []string
	for _, m := range traceFrame.FindAllStringSubmatch(err.Error(), -1) {
		stack = append(stack, m[1])
	}
	// The innermost frame is the WASI import itself, not the build's.
	if len(stack) == 0 || stack[0] != "fd_read" {
		t.Fatalf("no stack at the read:\n%v", err)
	}
	stack = stack[1:]
	want := slices.Clone(PausePath)
	slices.Sort(want)
	got := slices.Clone(stack)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the loop's read is reached through %v (innermost first); PausePath is %v", stack, PausePath)
	}
}
