package airlock_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// envLoadSession names a saved session for TestSessionLoadInChild, which
// the round-trip test runs in a second process.
const envLoadSession = "AIRLOCK_TEST_LOAD_SESSION"

func saved(t *testing.T, s *airlock.Session) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatalf("Save: %v", err)
	}
	return buf.Bytes()
}

func TestSessionSaveLoadAcrossProcesses(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{Env: map[string]string{"GREETING": "hi"}})
	call(t, s, airlock.Request{Code: "import json, os\nstate = {'n': 41, 'big': list(range(50000))}\nos.makedirs('out', exist_ok=True)\nopen('out/data.json', 'w').write(json.dumps(state['n']))"}, "", "")
	blob := saved(t, s)
	t.Logf("saved session: %d bytes (the image's unchanged pages left out)", len(blob))

	// In this process, as a new session that then diverges from the original.
	loaded, err := sb.LoadSession(context.Background(), bytes.NewReader(blob), airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("LoadSession: %v", err)
	}
	defer loaded.Close(context.Background())
	if loaded.ID() == s.ID() {
		t.Error("a loaded session has its saver's ID")
	}
	call(t, loaded, airlock.Request{Code: "state['n'] += 1\nprint(state['n'], len(state['big']), open('out/data.json').read(), os.environ['GREETING'])"}, "42 50000 41 hi\n", "")
	call(t, s, airlock.Request{Code: "print(state['n'])"}, "41\n", "")

	// In another process.
	path := filepath.Join(t.TempDir(), "session.bin")
	if err := os.WriteFile(path, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSessionLoadInChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envLoadSession+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("child saw: 41 50000 hi")) {
		t.Fatalf("child process: %v\n%s", err, out)
	}
}

func TestSessionLoadInChild(t *testing.T) {
	path := os.Getenv(envLoadSession)
	if path == "" {
		t.Skip("run by TestSessionSaveLoadAcrossProcesses in a second process")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := sb.LoadSession(context.Background(), f, airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("LoadSession: %v", err)
	}
	defer s.Close(context.Background())
	res := call(t, s, airlock.Request{Code: "print('child saw:', state['n'], len(state['big']), os.environ['GREETING'])"}, "child saw: 41 50000 hi\n", "")
	t.Log(string(res.Stdout))
}

func TestSessionLoadRejectsDamage(t *testing.T) {
	ctx := context.Background()
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	// A session that has not run yet saves and loads too.
	fresh := saved(t, s)
	if l, err := sb.LoadSession(ctx, bytes.NewReader(fresh), airlock.LoadOptions{}); err != nil {
		t.Fatalf("load a session that never ran: %v", err)
	} else {
		call(t, l, airlock.Request{Code: "print('ok')"}, "ok\n", "")
		l.Close(ctx)
	}
	call(t, s, airlock.Request{Code: "v = 'x' * 100"}, "", "")
	blob := saved(t, s)
	reseal := func(b []byte) []byte {
		sum := sha256.Sum256(b[:len(b)-32])
		copy(b[len(b)-32:], sum[:])
		return b
	}
	cases := map[string]struct {
		data []byte
		want error
	}{
		"empty":          {nil, airlock.ErrSessionCorrupt},
		"not a session":  {[]byte("hello, this is not a saved session at all, just some bytes to read"), airlock.ErrSessionCorrupt},
		"truncated":      {blob[:len(blob)/2], airlock.ErrSessionCorrupt},
		"one byte off":   {func() []byte { b := bytes.Clone(blob); b[len(b)/2] ^= 1; return b }(), airlock.ErrSessionCorrupt},
		"trailing":       {append(bytes.Clone(blob), 0), airlock.ErrSessionCorrupt},
		"other image":    {func() []byte { b := bytes.Clone(blob); b[25] ^= 1; return reseal(b) }(), airlock.ErrSessionMismatch},
		"future version": {func() []byte { b := bytes.Clone(blob); b[16] = 9; return reseal(b) }(), airlock.ErrSessionCorrupt},
	}
	for name, tc := range cases {
		if _, err := sb.LoadSession(ctx, bytes.NewReader(tc.data), airlock.LoadOptions{}); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// Resealed damage anywhere past the header is refused or, where it
	// lands in data, loads into a session that runs or fails cleanly.
	for off := 84; off < len(blob)-32; off += max(1, (len(blob)-116)/40) {
		b := bytes.Clone(blob)
		b[off] ^= 0xff
		l, err := sb.LoadSession(ctx, bytes.NewReader(reseal(b)), airlock.LoadOptions{})
		if err != nil {
			if !errors.Is(err, airlock.ErrSessionCorrupt) {
				t.Errorf("offset %d: %v, want ErrSessionCorrupt", off, err)
			}
			continue
		}
		res, _ := l.Run(ctx, airlock.Request{Code: "print(1)"})
		if res == nil {
			t.Fatalf("offset %d: no result", off)
		}
		l.Close(ctx)
	}
	if sb.Sessions() != 1 {
		t.Errorf("Sessions() = %d: failed loads left sessions behind", sb.Sessions())
	}
}

// Files made to look valid (resealed) must not get past what the sandbox
// checks elsewhere: an image larger than the session's memory cap (a few
// bytes can declare 4 GiB, which must not be allocated to find out), an
// image with the wrong number of globals (every call would crash), or a
// start-up variable NewSession refuses.
func TestSessionLoadRejectsCraftedFiles(t *testing.T) {
	ctx := context.Background()
	reseal := func(b []byte) []byte {
		sum := sha256.Sum256(b[:len(b)-32])
		copy(b[len(b)-32:], sum[:])
		return b
	}
	// A session without env or tools: magic, version, key, memory sum,
	// calls, 8 limits, env and tools counts, then the image marker.
	const marker = 16 + 4 + 32 + 32 + 8 + 8*8 + 4 + 4
	fresh := saved(t, newSession(t, snapshotSandbox(t), airlock.SessionOptions{}))
	if fresh[marker] != 0 {
		t.Fatalf("byte %d is %d, not the no-image marker", marker, fresh[marker])
	}
	var img bytes.Buffer
	binary.Write(&img, binary.LittleEndian, uint64(1<<32)) // memory size
	img.Write(make([]byte, (1<<32/65536)/8))               // bitmap: no page changed
	binary.Write(&img, binary.LittleEndian, uint32(0))     // globals
	binary.Write(&img, binary.LittleEndian, uint32(65536)) // unwind buffer
	huge := append(append(bytes.Clone(fresh[:marker]), 1), img.Bytes()...)
	huge = reseal(append(huge, fresh[marker+1:]...))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := sb.LoadSession(ctx, bytes.NewReader(huge), airlock.LoadOptions{}); !errors.Is(err, airlock.ErrSessionOverLimits) {
		t.Errorf("4 GiB image: %v, want ErrSessionOverLimits", err)
	}
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 256<<20 {
		t.Errorf("refusing a %d-byte file allocated %d MiB", len(huge), grown>>20)
	}

	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "v = 1"}, "", "")
	blob := saved(t, s)
	off := marker + 1
	size := binary.LittleEndian.Uint64(blob[off:])
	off += 8
	bitmap := blob[off : off+int(size/65536+7)/8]
	off += len(bitmap)
	for p := range int(size / 65536) {
		if bitmap[p/8]&(1<<(p%8)) != 0 {
			off += 65536
		}
	}
	n := int(binary.LittleEndian.Uint32(blob[off:]))
	if n == 0 {
		t.Fatal("the image has no globals to drop")
	}
	fewer := append(bytes.Clone(blob[:off]), binary.LittleEndian.AppendUint32(nil, uint32(n-1))...)
	fewer = append(fewer, blob[off+4:off+4+8*(n-1)]...)
	fewer = reseal(append(fewer, blob[off+4+8*n:]...))
	if _, err := sb.LoadSession(ctx, bytes.NewReader(fewer), airlock.LoadOptions{}); !errors.Is(err, airlock.ErrSessionCorrupt) {
		t.Errorf("%d of %d globals: %v, want ErrSessionCorrupt", n-1, n, err)
	}

	withEnv := saved(t, newSession(t, snapshotSandbox(t), airlock.SessionOptions{Env: map[string]string{"XANG": "xx"}}))
	i := bytes.Index(withEnv, []byte("XANG"))
	copy(withEnv[i:], "LANG")
	if _, err := sb.LoadSession(ctx, bytes.NewReader(reseal(withEnv)), airlock.LoadOptions{}); !errors.Is(err, airlock.ErrSessionCorrupt) {
		t.Errorf("LANG in a saved env: %v, want ErrSessionCorrupt", err)
	}
}

// The fuel cap is part of a saved session (wasmtime, which meters; CI
// runs this with -tags airlock_wasmtime): a loaded session keeps its CPU
// budget.
func TestSessionSaveKeepsTheFuelCap(t *testing.T) {
	ctx := context.Background()
	w, err := airlock.New(ctx, airlock.WithEngine(airlock.EngineWasmtime))
	if err != nil {
		t.Skipf("wasmtime is not built in (-tags airlock_wasmtime): %v", err)
	}
	defer w.Close(ctx)
	s, err := w.NewSession(ctx, airlock.SessionOptions{Limits: airlock.Limits{Fuel: 200_000_000, Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	l, err := w.LoadSession(ctx, &buf, airlock.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if res, _ := l.Run(ctx, airlock.Request{Code: "while True: pass"}); res.Error == nil || res.Error.Kind != airlock.KindFuelExhausted {
		t.Fatalf("a loaded session's endless loop: %v, want fuel_exhausted", res.Error)
	}
}
