package python

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/wasi"
)

// The functions a snapshot's pause goes through. A snapshot (and a session
// between calls) is the interpreter paused where CPython's interactive
// loop reads its next statement (see prelude.py), and asyncify must
// instrument every function that can be on the stack there. Instrumenting
// only those (asyncify-onlylist) leaves the rest of the interpreter, the
// evaluation loop above all, as compiled; instrumenting every function
// that could reach a read costs ~2x on call-heavy code. Which functions
// they are depends on the build's inlining, so PausePath asks the build
// itself: it runs the module (not asyncified) up to that read and reads
// the stack off the trap that stops it there. A guest that later pauses
// itself in another read unwinds a different stack, which the engine
// refuses (engine.ErrPausedElsewhere).

// ErrNoPausePath: the build's stack at the loop's read could not be named
// (a module without a name section, such as the npm build), so asyncify
// instruments every function that could reach a read.
var ErrNoPausePath = errors.New("python: the build's functions are not named")

// errStopAtRead stops the run at its first read of stdin.
var errStopAtRead = errors.New("airlock: stop at the first read of stdin")

// stopAtRead is a stdin that panics, so the read traps (an error would
// only reach the guest as EIO) and the run's error carries the trace.
type stopAtRead struct{}

func (stopAtRead) Read([]byte) (int, error) { panic(errStopAtRead) }

// PausePath returns the names of the functions on art's stack at the
// interactive loop's first read of stdin, innermost first, without the
// WASI import itself. cacheDir ("" for none) keeps the compiled module,
// which fresh runs use too.
//
// # Errors
// ErrNoPausePath for a module whose functions are not named; an error when
// the module does not load or never reads stdin.
func PausePath(ctx context.Context, art *Artifact, cacheDir string) ([]string, error) {
	opts := engine.Options{}
	if cacheDir != "" {
		opts.CacheDir = CompiledDir(cacheDir)
	}
	wasm, err := art.Module()
	if err != nil {
		return nil, fmt.Errorf("python: pause path: %w", err)
	}
	mod, err := engine.Load(ctx, wasm, opts)
	if err != nil {
		return nil, fmt.Errorf("python: pause path: %w", err)
	}
	defer mod.Close(ctx)
	// The snapshot's filesystem and environment (Capture's): the stdin the
	// loop reads is then C stdio's unbuffered one, as in every image.
	spec := ImageSpec{Env: art.Env, Layers: art.Layers()}
	fs, err := spec.fs()
	if err != nil {
		return nil, fmt.Errorf("python: pause path: %w", err)
	}
	state := wasi.NewState(wasi.Config{Args: Args(), Env: spec.env(), FS: fs, Stdin: stopAtRead{}})
	defer state.Close()
	_, err = mod.Run(ctx, engine.RunSpec{WASI: state, MemoryLimit: SnapshotMemory})
	if err == nil || !strings.Contains(err.Error(), errStopAtRead.Error()) {
		return nil, fmt.Errorf("python: pause path: the interpreter did not read stdin: %v", err)
	}
	// The engine names the frames (engine.TrapError.Frames).
	var trap *engine.TrapError
	var stack []string
	if errors.As(err, &trap) {
		stack = trap.Frames
	}
	// The innermost frame is the WASI import, the outermost the entry.
	if len(stack) < 3 || stack[0] != "fd_read" {
		return nil, fmt.Errorf("python: pause path: unexpected stack %v", stack)
	}
	stack = stack[1:]
	if slices.ContainsFunc(stack, func(name string) bool { return strings.HasPrefix(name, "$") }) {
		return nil, ErrNoPausePath
	}
	if stack[len(stack)-1] != "_start" {
		return nil, fmt.Errorf("python: pause path: unexpected stack %v", stack)
	}
	return stack, nil
}
