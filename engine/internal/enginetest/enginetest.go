// Package enginetest holds what the engine's tests and its wasmtime back
// end's share: the asyncified python.wasm set-up made, loaded on an engine,
// the states its images are captured and resumed in, and a tiny module
// that exits.
package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Resumable loads the asyncified python.wasm set-up made (scripts/setup.sh).
func Resumable(t *testing.T) *engine.Compiled { return ResumableOn(t, "") }

// ResumableOn loads the asyncified python.wasm on the named engine ("" for
// the default).
func ResumableOn(t *testing.T, name string) *engine.Compiled {
	t.Helper()
	return ResumableWith(t, engine.Options{Engine: name})
}

// ResumableWith is ResumableOn with more options; the compile cache is the
// suite's, and the entry functions Airlock loads the module with
// (python.EntryFuncs) are exported unless opts names others.
func ResumableWith(t *testing.T, opts engine.Options) *engine.Compiled {
	t.Helper()
	if opts.Entry == nil {
		opts.Entry = python.EntryFuncs
	}
	cache, _, _, read := OwnBuild(t)
	wasm, err := read()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opts.CacheDir = filepath.Join(cache, "compiled")
	m, err := engine.LoadResumable(ctx, wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctx) })
	return m
}

// OwnBuild loads the build set-up made (scripts/setup.sh) from the
// suite's cache ($AIRLOCK_CACHE_DIR, as the other suites read it, or the
// user's), makes it the one State and Looping set up, and returns the
// cache, the build, and its asyncified module's record and reader.
func OwnBuild(t *testing.T) (cache string, art *python.Artifact, rec *python.AsyncifyRecord, read func() ([]byte, error)) {
	t.Helper()
	cache = testenv.FromEnv().CacheDir
	var err error
	if cache == "" {
		if cache, err = python.CacheDir(); err != nil {
			t.Fatal(err)
		}
	}
	art, err = python.Load("", cache)
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh fetches it)", err)
	}
	testArt = art
	rec, read, err = python.AsyncifiedSource(art, cache)
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh prepares it)", err)
	}
	return cache, art, rec, read
}

// CaptureLoop captures m's image in the interactive loop's first read (see
// Looping), closed when the test ends.
func CaptureLoop(t *testing.T, m *engine.Compiled) *engine.Snapshot {
	t.Helper()
	var out bytes.Buffer
	img, err := m.Capture(context.Background(), engine.RunSpec{WASI: Looping(&out), MemoryLimit: 1 << 30, PauseWhen: python.LoopRead})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Cleanup(img.Close)
	return img
}

// testArt is the build Resumable loaded: its stdlib layer and environment
// (the own build's; none for the npm one) go into every state.
var testArt *python.Artifact

// Artifact is the build Resumable loaded last.
func Artifact() *python.Artifact { return testArt }

func State(code string, stdin []byte, stderr *bytes.Buffer) *wasi.State {
	return StateArgs([]string{"python", "-c", code}, bytes.NewReader(stdin), stderr)
}

func StateArgs(args []string, stdin io.Reader, stderr *bytes.Buffer) *wasi.State {
	return StateRandom(args, stdin, stderr, nil)
}

// StateRandom is StateArgs with random_get, and an image's fresh range
// (engine.Snapshot.Fresh), fed by random (nil: crypto/rand).
func StateRandom(args []string, stdin io.Reader, stderr *bytes.Buffer, random io.Reader) *wasi.State {
	fs := memfs.New(memfs.Options{})
	fs.MkdirAll("/tmp")
	if testArt.Layer != nil {
		fs.Mount(testArt.Layer)
	}
	// BaseEnv has PYTHONUNBUFFERED=1, under which C stdio reads stdin
	// with two buffers (see python.LoopRead).
	return wasi.NewState(wasi.Config{Args: args, Env: testArt.BaseEnv(), FS: fs, Stdin: stdin, Stdout: stderr, Stderr: stderr, Random: random})
}

// Looping is the state an image is captured in: CPython's interactive
// loop (-i, no prompts) paused at its first read, as Airlock's prelude
// is (the own build's asyncify instruments only that read's path).
func Looping(stderr *bytes.Buffer) *wasi.State {
	return StateArgs([]string{"python", "-i", "-c", "import sys; sys.ps1 = sys.ps2 = ''"}, nil, stderr)
}

// Resumed is the state an image from Looping resumes in: the loop reads
// one statement, alone, which runs code from the rest of stdin and exits
// (the loop would print a newline at the end of stdin).
func Resumed(code []byte, stderr *bytes.Buffer) *wasi.State {
	return ResumedThen(code, "; __import__('os')._exit(0)", stderr)
}

// ResumedThen is Resumed with then after the statement that runs code;
// with "", the loop goes on to read stdin again after it.
func ResumedThen(code []byte, then string, stderr *bytes.Buffer) *wasi.State {
	line := fmt.Sprintf("exec(__import__('os').read(0, %d))%s\n", len(code), then)
	return StateArgs(nil, io.MultiReader(strings.NewReader(line), bytes.NewReader(code)), stderr)
}

// AfterCode is a PauseWhen for runs from Resumed: a read with two buffers
// once the code has been read (with one), as a session pauses only once
// the call is done. The loop's own reads before that (C stdio, one byte
// at a time since stdin is unbuffered) pass two as well.
func AfterCode() func(uint32) bool {
	read := false
	return func(buffers uint32) bool {
		read = read || buffers == 1
		return read && python.LoopRead(buffers)
	}
}

// ExitModule is a module whose _start calls proc_exit(code); with other,
// a function before _start exits with other instead.
func ExitModule(code int32, other ...int32) []byte {
	sleb := func(v int32) []byte {
		var out []byte
		for {
			b := byte(v & 0x7f)
			v >>= 7
			if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
				return append(out, b)
			}
			out = append(out, b|0x80)
		}
	}
	sec := func(id byte, b ...byte) []byte { return append([]byte{id, byte(len(b))}, b...) }
	body := func(c int32) []byte {
		b := append(append([]byte{0, 0x41}, sleb(c)...), 0x10, 0, 0x0b)
		return append([]byte{byte(len(b))}, b...)
	}
	funcs, bodies := []byte{1, 1}, append([]byte{1}, body(code)...)
	start := byte(1) // function index: the import is 0
	for _, c := range other {
		funcs, bodies, start = []byte{2, 1, 1}, append(append([]byte{2}, body(c)...), bodies[1:]...), 2
	}
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = append(m, sec(1, 2, 0x60, 1, 0x7f, 0, 0x60, 0, 0)...)
	imp := append([]byte{1, 22}, "wasi_snapshot_preview1"...)
	imp = append(append(append(imp, 9), "proc_exit"...), 0, 0)
	m = append(m, sec(2, imp...)...)
	m = append(m, sec(3, funcs...)...)
	m = append(m, sec(5, 1, 0, 1)...)
	exp := append([]byte{2, 6}, "memory"...)
	exp = append(append(append(exp, 2, 0, 6), "_start"...), 0, start)
	m = append(m, sec(7, exp...)...)
	return append(m, sec(10, bodies...)...)
}

// RunExit loads wasm with opts and returns its exit code.
func RunExit(t *testing.T, wasm []byte, opts engine.Options) uint32 {
	t.Helper()
	ctx := context.Background()
	m, err := engine.Load(ctx, wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	st := wasi.NewState(wasi.Config{FS: memfs.New(memfs.Options{}), Stdout: io.Discard, Stderr: io.Discard})
	defer st.Close()
	o, err := m.Run(ctx, engine.RunSpec{WASI: st, MemoryLimit: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return o.ExitCode
}

// LoadFromTheCache checks, on the named engine, that with the rewrites and
// the compiled code in the suite's cache the own build's module loads
// without its bytes being read, and that a Capture, which needs the data
// segments they hold, reads them then and reports a read that fails.
func LoadFromTheCache(t *testing.T, name string) {
	t.Helper()
	cache, _, rec, readModule := OwnBuild(t)
	ctx := context.Background()
	opts := engine.Options{CacheDir: filepath.Join(cache, "compiled"), Engine: name, Entry: python.EntryFuncs}
	warm, err := engine.LoadResumableFrom(ctx, rec.OutputSHA256, readModule, opts) // fills the cache
	if err != nil {
		t.Fatal(err)
	}
	warm.Close(ctx)
	readErr := errors.New("the module's bytes were read")
	reads := 0
	read := func() ([]byte, error) { reads++; return nil, readErr }
	lazy, err := engine.LoadResumableFrom(ctx, rec.OutputSHA256, read, opts)
	if err != nil {
		t.Fatalf("load from a warm cache: %v", err)
	}
	defer lazy.Close(ctx)
	if reads != 0 {
		t.Fatalf("loading from a warm cache read the module %d times", reads)
	}
	var stderr bytes.Buffer
	if _, err := lazy.Capture(ctx, engine.RunSpec{WASI: Looping(&stderr), MemoryLimit: 256 << 20}); !errors.Is(err, readErr) {
		t.Fatalf("Capture without the bytes: %v, want the read's error", err)
	}
}
