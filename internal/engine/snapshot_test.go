package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/internal/engine"
	"github.com/airlock-sandbox/airlock/internal/python"
	"github.com/airlock-sandbox/airlock/internal/wasi"
	"github.com/airlock-sandbox/airlock/internal/wasi/memfs"
)

// resumable loads the asyncified python.wasm set-up made (scripts/setup.sh).
func resumable(t *testing.T) *engine.Module { return resumableOn(t, "") }

// resumableOn loads the asyncified python.wasm on the named engine ("" for
// the default).
func resumableOn(t *testing.T, name string) *engine.Module {
	t.Helper()
	return resumableWith(t, engine.Options{Engine: name})
}

// resumableWith is resumableOn with more options; the compile cache is the
// suite's.
func resumableWith(t *testing.T, opts engine.Options) *engine.Module {
	t.Helper()
	cache, err := python.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	art, err := python.Load("", cache)
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh fetches it)", err)
	}
	testArt = art
	wasm, _, err := python.LoadAsyncified(art, cache)
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh prepares it)", err)
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

// captureLoop captures m's image in the interactive loop's first read (see
// looping), closed when the test ends.
func captureLoop(t *testing.T, m *engine.Module) *engine.Image {
	t.Helper()
	var out bytes.Buffer
	img, err := m.Capture(context.Background(), engine.RunSpec{WASI: looping(&out), MemoryLimit: 1 << 30, PauseWhen: python.LoopRead})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Cleanup(img.Close)
	return img
}

// testArt is the build resumable loaded: its stdlib layer and environment
// (the own build's; none for the npm one) go into every state.
var testArt *python.Artifact

func state(code string, stdin []byte, stderr *bytes.Buffer) *wasi.State {
	return stateArgs([]string{"python", "-c", code}, bytes.NewReader(stdin), stderr)
}

func stateArgs(args []string, stdin io.Reader, stderr *bytes.Buffer) *wasi.State {
	fs := memfs.New(memfs.Options{})
	fs.MkdirAll("/tmp")
	if testArt.Layer != nil {
		fs.Mount(testArt.Layer)
	}
	// BaseEnv has PYTHONUNBUFFERED=1, under which C stdio reads stdin
	// with two buffers (see python.LoopRead).
	return wasi.NewState(wasi.Config{Args: args, Env: testArt.BaseEnv(), FS: fs, Stdin: stdin, Stdout: stderr, Stderr: stderr})
}

// looping is the state an image is captured in: CPython's interactive
// loop (-i, no prompts) paused at its first read, as Airlock's prelude
// is (the own build's asyncify instruments only that read's path).
func looping(stderr *bytes.Buffer) *wasi.State {
	return stateArgs([]string{"python", "-i", "-c", "import sys; sys.ps1 = sys.ps2 = ''"}, nil, stderr)
}

// resumed is the state an image from looping resumes in: the loop reads
// one statement, alone, which runs code from the rest of stdin and exits
// (the loop would print a newline at the end of stdin).
func resumed(code []byte, stderr *bytes.Buffer) *wasi.State {
	return resumedThen(code, "; __import__('os')._exit(0)", stderr)
}

// resumedThen is resumed with then after the statement that runs code;
// with "", the loop goes on to read stdin again after it.
func resumedThen(code []byte, then string, stderr *bytes.Buffer) *wasi.State {
	line := fmt.Sprintf("exec(__import__('os').read(0, %d))%s\n", len(code), then)
	return stateArgs(nil, io.MultiReader(strings.NewReader(line), bytes.NewReader(code)), stderr)
}

// afterCode is a PauseWhen for runs from resumed: a read with two buffers
// once the code has been read (with one), as a session pauses only once
// the call is done. The loop's own reads before that (C stdio, one byte
// at a time since stdin is unbuffered) pass two as well.
func afterCode() func(uint32) bool {
	read := false
	return func(buffers uint32) bool {
		read = read || buffers == 1
		return read && python.LoopRead(buffers)
	}
}

func TestCaptureRefusals(t *testing.T) {
	m := resumable(t)
	ctx := context.Background()
	var out bytes.Buffer
	_, err := m.Capture(ctx, engine.RunSpec{WASI: state("f = open('/tmp/f', 'w')\nimport os\nos.read(0, 1)", nil, &out), MemoryLimit: 1 << 30})
	if !errors.Is(err, engine.ErrPausedWithOpenFiles) {
		t.Fatalf("open file at the pause: err = %v\n%s", err, out.String())
	}
	_, err = m.Capture(ctx, engine.RunSpec{WASI: state("print('never reads')", nil, &out), MemoryLimit: 1 << 30})
	if !errors.Is(err, engine.ErrNoPausePoint) {
		t.Fatalf("no read: err = %v", err)
	}
}

func TestResumeLimits(t *testing.T) {
	m := resumable(t)
	ctx := context.Background()
	img := captureLoop(t, m)
	var out bytes.Buffer
	run := func(code string, limit uint64) (engine.Outcome, error, string) {
		var out bytes.Buffer
		o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte(code), &out), MemoryLimit: limit})
		return o, err, out.String()
	}
	if o, err, s := run("print('resumed')", 256<<20); err != nil || o.ExitCode != 0 || s != "resumed\n" {
		t.Fatalf("resume: %v %+v %q", err, o, s)
	}
	if _, err, _ := run("pass", uint64(len(img.Memory))-65536); !errors.Is(err, engine.ErrMemoryLimit) {
		t.Fatalf("cap below the image: err = %v", err)
	}
	o, _, s := run("b = bytearray(300 << 20)", 64<<20)
	if !o.MemoryLimitHit || o.PeakMemory > 64<<20 {
		t.Fatalf("memory cap on a resumed instance: %+v %s", o, s)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := m.Resume(tctx, img, engine.RunSpec{WASI: resumed([]byte("while True: pass"), &out), MemoryLimit: 256 << 20}); !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("timeout on a resumed instance: err = %v", err)
	}
}

// TestPauseOutsideTheLoop: a resumed guest asked to pause in a read other
// than its image's (os.readv passes two buffers, as the loop's read does)
// unwinds another stack, which the engine refuses (on the own build, whose
// asyncify instruments only the loop's path, that stack also has frames
// that saved nothing); the image it resumed from still works. An image
// whose saved stack is damaged reports ErrBadImage rather than whatever
// the derailed guest did.
func TestPauseOutsideTheLoop(t *testing.T) {
	m := resumable(t)
	ctx := context.Background()
	img := captureLoop(t, m)
	var out bytes.Buffer
	for _, code := range []string{
		"import os\nos.readv(0, [bytearray(0), bytearray(64)])",
		"import os\ndef down(n):\n    return os.readv(0, [bytearray(0), bytearray(64)]) if n == 0 else list(map(down, [n - 1]))\ndown(20)",
	} {
		out.Reset()
		o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte(code), &out), MemoryLimit: 256 << 20, PauseWhen: afterCode()})
		if !errors.Is(err, engine.ErrPausedElsewhere) || o.Image != nil {
			t.Fatalf("%q: err = %v, image %v\n%s", code, err, o.Image != nil, out.String())
		}
	}
	out.Reset()
	if o, err := m.Resume(ctx, img, engine.RunSpec{WASI: resumed([]byte("print(6 * 7)"), &out), MemoryLimit: 256 << 20}); err != nil || out.String() != "42\n" {
		t.Fatalf("after a refused pause: %v %+v %q", err, o, out.String())
	}

	mem := img.Bytes()
	stack := mem[img.UnwindBuffer+8 : img.UnwindBuffer+4096]
	for i := range stack {
		stack[i] = 0xff
	}
	bad := engine.NewImage(mem, img.Globals, img.UnwindBuffer)
	defer bad.Close()
	if _, err := m.Resume(ctx, bad, engine.RunSpec{WASI: resumed([]byte("print(1)"), &out), MemoryLimit: 256 << 20}); !errors.Is(err, engine.ErrBadImage) {
		t.Fatalf("damaged stack: err = %v", err)
	}
}
