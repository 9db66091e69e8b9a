package engine_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/engine"
	"github.com/airlock-sandbox/airlock/engine/internal/enginetest"
	"github.com/airlock-sandbox/airlock/python"
)

// entryGuest is captured in the interactive loop's read with a function f
// whose address (id) it prints; f reads a command from stdin and exits,
// returns, raises (PyObject_CallNoArgs then returns NULL), or returns with
// a file open.
const entryGuest = `import os, sys
sys.ps1 = sys.ps2 = ''
calls = []
def f():
    calls.append(len(calls))
    cmd = os.read(0, 16)
    print('entered', calls, cmd.decode(), flush=True)
    if cmd == b'exit':
        os._exit(3)
    if cmd == b'raise':
        raise ValueError(cmd)
    if cmd == b'open':
        f.kept = open('/tmp/kept', 'w')
print(id(f), flush=True)`

// captureEntry captures entryGuest and sets the image's entry point to f.
func captureEntry(t *testing.T, m *engine.Compiled) *engine.Snapshot {
	t.Helper()
	var out bytes.Buffer
	st := enginetest.StateArgs([]string{"python", "-i", "-c", entryGuest}, nil, &out)
	img, err := m.Capture(context.Background(), engine.RunSpec{WASI: st, MemoryLimit: 1 << 30, PauseWhen: python.LoopRead})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Cleanup(img.Close)
	addr, err := strconv.ParseUint(strings.TrimSpace(out.String()), 10, 32)
	if err != nil {
		t.Fatalf("capture printed %q, want f's address", out.String())
	}
	img.SetEntry(uint32(addr), engine.Range{})
	return img
}

// A resume at an image's entry point calls it on an empty stack: the
// guest's own reads of stdin never pause it (the loop's stack is not
// asyncify's to unwind there), a return pauses it when the run pauses and
// otherwise ends the run with status 0 (an exit without the trap), a
// return of NULL is an error, and the image a run pauses in resumes at
// the same entry point.
func TestResumeAtEntryPoint(t *testing.T) {
	m := resumable(t)
	if !m.Enters() {
		t.Fatal("the own build's module does not export the entry functions (python.EntryFuncs)")
	}
	img := captureEntry(t, m)
	ctx := context.Background()
	always := func(uint32) bool { return true }
	run := func(from *engine.Snapshot, stdin string, pause func(uint32) bool) (engine.Outcome, error, string) {
		var out bytes.Buffer
		st := enginetest.StateArgs(nil, strings.NewReader(stdin), &out)
		o, err := m.Resume(ctx, from, engine.RunSpec{WASI: st, MemoryLimit: 256 << 20, PauseWhen: pause})
		return o, err, out.String()
	}

	if o, err, s := run(img, "exit", nil); err != nil || o.ExitCode != 3 || s != "entered [0] exit\n" || o.Image != nil {
		t.Fatalf("exit: %v %+v %q", err, o, s)
	}
	o, err, s := run(img, "back", always)
	if err != nil || o.Image == nil || s != "entered [0] back\n" {
		t.Fatalf("return in a pausing run: %v %+v %q", err, o, s)
	}
	defer o.Image.Close()
	if o.Image.Entry() != img.Entry() {
		t.Fatalf("paused image's entry %#x, its base's %#x", o.Image.Entry(), img.Entry())
	}
	if o2, err, s := run(o.Image, "exit", nil); err != nil || o2.ExitCode != 3 || s != "entered [0, 1] exit\n" {
		t.Fatalf("resumed from the pause: %v %+v %q", err, o2, s)
	}
	if o, err, s := run(img, "back", nil); err != nil || o.ExitCode != 0 || s != "entered [0] back\n" || o.Image != nil {
		t.Fatalf("return in a run that does not pause: %v %+v %q", err, o, s)
	}
	if _, err, s := run(img, "raise", nil); !errors.Is(err, engine.ErrEntryReturned) {
		t.Fatalf("return of NULL in a run that does not pause: err = %v (%q)", err, s)
	}
	if o, err, s := run(img, "open", always); !errors.Is(err, engine.ErrPausedWithOpenFiles) || o.Image != nil {
		t.Fatalf("return with a file open: err = %v, image %v (%q)", err, o.Image != nil, s)
	}

	// A module that does not export the entry functions cannot resume
	// the image at its entry point, and says so.
	plain := enginetest.ResumableWith(t, engine.Options{Entry: []string{"airlock_no_such_function"}})
	if plain.Enters() {
		t.Fatal("a module without the named function enters")
	}
	var out bytes.Buffer
	if _, err := plain.Resume(ctx, img, engine.RunSpec{WASI: enginetest.StateArgs(nil, strings.NewReader("exit"), &out), MemoryLimit: 256 << 20}); !errors.Is(err, engine.ErrNoEntry) {
		t.Fatalf("resume at an entry point the module lacks: err = %v", err)
	}
}

// freshGuest keeps a 64-byte bytes object whose contents its entry point f
// prints (the first 32 bytes, in hex) before it returns; it prints both
// addresses at its capture.
const freshGuest = `import os, sys
sys.ps1 = sys.ps2 = ''
buf = bytes(64)
def f():
    print(buf[:32].hex(), flush=True)
print(id(f), id(buf), flush=True)`

// A resume from an image with a fresh range fills it from the run's random
// source before the guest runs; an image a run paused in keeps what its
// guest had and is not filled again; a range outside memory is an error.
func TestResumeFillsTheFreshRange(t *testing.T) {
	m := resumable(t)
	ctx := context.Background()
	var out bytes.Buffer
	st := enginetest.StateArgs([]string{"python", "-i", "-c", freshGuest}, nil, &out)
	img, err := m.Capture(ctx, engine.RunSpec{WASI: st, MemoryLimit: 1 << 30, PauseWhen: python.LoopRead})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	defer img.Close()
	var entry, buf uint32
	if _, err := fmt.Sscan(out.String(), &entry, &buf); err != nil {
		t.Fatalf("capture printed %q, want two addresses", out.String())
	}
	// A bytes object's contents follow its header: three words and the
	// cached hash on a 32-bit build.
	img.SetEntry(entry, engine.Range{Addr: buf + 16, Len: 32})
	seeded := func(seed byte) io.Reader { return rand.NewChaCha8([32]byte{seed}) }
	want := func(seed byte) string {
		b := make([]byte, 32)
		io.ReadFull(seeded(seed), b)
		return hex.EncodeToString(b) + "\n"
	}
	run := func(from *engine.Snapshot, seed byte, pause func(uint32) bool) (engine.Outcome, string) {
		t.Helper()
		var out bytes.Buffer
		st := enginetest.StateRandom(nil, nil, &out, seeded(seed))
		o, err := m.Resume(ctx, from, engine.RunSpec{WASI: st, MemoryLimit: 256 << 20, PauseWhen: pause})
		if err != nil {
			t.Fatalf("resume: %v\n%s", err, out.String())
		}
		return o, out.String()
	}
	for _, seed := range []byte{1, 2, 1} {
		if _, got := run(img, seed, nil); got != want(seed) {
			t.Fatalf("seed %d: the guest saw %q, want %q", seed, got, want(seed))
		}
	}
	o, got := run(img, 3, func(uint32) bool { return true })
	if got != want(3) || o.Image == nil {
		t.Fatalf("pausing run: %q, image %v", got, o.Image)
	}
	defer o.Image.Close()
	if o.Image.Fresh().Len != 0 {
		t.Fatalf("a paused image got a fresh range: %+v", o.Image.Fresh())
	}
	if _, got := run(o.Image, 4, nil); got != want(3) {
		t.Fatalf("a run from the paused image saw %q, want its guest's %q", got, want(3))
	}

	img.SetEntry(img.Entry(), engine.Range{Addr: uint32(img.Len()) - 16, Len: 32})
	var stderr bytes.Buffer
	_, err = m.Resume(ctx, img, engine.RunSpec{WASI: enginetest.StateArgs(nil, nil, &stderr), MemoryLimit: 256 << 20})
	if err == nil || !strings.Contains(err.Error(), "outside its memory") {
		t.Fatalf("a fresh range past the memory: %v, want an error naming it", err)
	}
}
