package airlock_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
	loaded, err := sb.LoadSession(context.Background(), bytes.NewReader(blob))
	if err != nil {
		t.Fatalf("LoadSession: %v", err)
	}
	defer loaded.Close()
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
	s, err := sb.LoadSession(context.Background(), f)
	if err != nil {
		t.Fatalf("LoadSession: %v", err)
	}
	defer s.Close()
	res := call(t, s, airlock.Request{Code: "print('child saw:', state['n'], len(state['big']), os.environ['GREETING'])"}, "child saw: 41 50000 hi\n", "")
	t.Log(string(res.Stdout))
}

func TestSessionLoadRejectsDamage(t *testing.T) {
	ctx := context.Background()
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	// A session that has not run yet saves and loads too.
	fresh := saved(t, s)
	if l, err := sb.LoadSession(ctx, bytes.NewReader(fresh)); err != nil {
		t.Fatalf("load a session that never ran: %v", err)
	} else {
		call(t, l, airlock.Request{Code: "print('ok')"}, "ok\n", "")
		l.Close()
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
		if _, err := sb.LoadSession(ctx, bytes.NewReader(tc.data)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// Resealed damage anywhere past the header is refused or, where it
	// lands in data, loads into a session that runs or fails cleanly.
	for off := 84; off < len(blob)-32; off += max(1, (len(blob)-116)/40) {
		b := bytes.Clone(blob)
		b[off] ^= 0xff
		l, err := sb.LoadSession(ctx, bytes.NewReader(reseal(b)))
		if err != nil {
			if !errors.Is(err, airlock.ErrSessionCorrupt) {
				t.Errorf("offset %d: %v, want ErrSessionCorrupt", off, err)
			}
			continue
		}
		res, _ := l.Run(ctx, "print(1)")
		if res == nil {
			t.Fatalf("offset %d: no result", off)
		}
		l.Close()
	}
	if sb.Sessions() != 1 {
		t.Errorf("Sessions() = %d: failed loads left sessions behind", sb.Sessions())
	}
}
