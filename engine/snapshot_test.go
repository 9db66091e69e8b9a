package engine_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/engine"
)

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
	if _, err, _ := run("pass", uint64(img.Len())-65536); !errors.Is(err, engine.ErrBelowMinMemory) {
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
	globals, unwind := engine.SnapshotRegisters(img)
	stack := mem[unwind+8 : unwind+4096]
	for i := range stack {
		stack[i] = 0xff
	}
	bad := engine.NewSnapshot(mem, globals, unwind)
	defer bad.Close()
	if _, err := m.Resume(ctx, bad, engine.RunSpec{WASI: resumed([]byte("print(1)"), &out), MemoryLimit: 256 << 20}); !errors.Is(err, engine.ErrBadImage) {
		t.Fatalf("damaged stack: err = %v", err)
	}
}
