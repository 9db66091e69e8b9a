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
	"github.com/airlock-sandbox/airlock/wasi"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// resumable loads the asyncified python.wasm set-up made (scripts/setup.sh).
func resumable(t *testing.T) *engine.Module {
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
	m, err := engine.LoadResumable(ctx, wasm, engine.Options{CacheDir: filepath.Join(cache, "compiled")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctx) })
	return m
}

// testArt is the build resumable loaded: its stdlib layer and environment
// (the own build's; none for the npm one) go into every state.
var testArt *python.Artifact

func state(code string, stdin []byte, stderr *bytes.Buffer) *wasi.State {
	fs := memfs.New(memfs.Options{})
	fs.MkdirAll("/tmp")
	if testArt.Layer != nil {
		fs.Mount(testArt.Layer)
	}
	return wasi.NewState(wasi.Config{Args: []string{"python", "-c", code}, Env: testArt.Env, FS: fs,
		Stdin: bytes.NewReader(stdin), Stdout: stderr, Stderr: stderr})
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
	var out bytes.Buffer
	img, err := m.Capture(ctx, engine.RunSpec{WASI: state("import os, sys\nn = os.read(0, 100)\nexec(n)", nil, &out), MemoryLimit: 1 << 30})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	defer img.Close()
	run := func(code string, limit uint64) (engine.Outcome, error, string) {
		var out bytes.Buffer
		o, err := m.Resume(ctx, img, engine.RunSpec{WASI: state("", []byte(code), &out), MemoryLimit: limit})
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
	if _, err := m.Resume(tctx, img, engine.RunSpec{WASI: state("", []byte("while True: pass"), &out), MemoryLimit: 256 << 20}); !errors.Is(err, engine.ErrInterrupted) {
		t.Fatalf("timeout on a resumed instance: err = %v", err)
	}
}
