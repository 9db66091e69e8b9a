package airlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// Sessions resume images, so these tests need snapshots (the child
// process that reruns the suite without them skips TestSession*).

func newSession(t *testing.T, sandbox *airlock.Sandbox, opts airlock.SessionOptions) *airlock.Session {
	t.Helper()
	s, err := sandbox.NewSession(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// call runs code in s and checks the outcome: want is the expected
// stdout, wantErr the expected error kind ("" for none).
func call(t *testing.T, s *airlock.Session, req airlock.Request, want string, wantErr airlock.Kind) *airlock.Result {
	t.Helper()
	res, err := s.Run(context.Background(), req)
	if res == nil {
		t.Fatalf("Exec returned no Result (err %v)", err)
	}
	if (err == nil) != (res.Error == nil) {
		t.Fatalf("error %v disagrees with Result.Error %v", err, res.Error)
	}
	gotKind := airlock.Kind("")
	if res.Error != nil {
		gotKind = res.Error.Kind
	}
	if gotKind != wantErr || string(res.Stdout) != want {
		t.Fatalf("%q: stdout %q, error %v; want %q, kind %q\nstderr:\n%s", req.Code, res.Stdout, err, want, wantErr, res.Stderr)
	}
	return res
}

func TestSessionKeepsState(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{Files: map[string][]byte{"in.txt": []byte("seed")}})
	call(t, s, airlock.Request{Code: "import fractions\nx = 40\ndef twice(v): return 2 * v\nopen('notes.txt', 'w').write(open('in.txt').read() + '!')"}, "", "")
	res := call(t, s, airlock.Request{Code: "x += 1\nprint(twice(x), fractions.Fraction(1, 3), open('notes.txt').read())"}, "82 1/3 seed!\n", "")
	if len(res.Files) != 0 {
		t.Errorf("second call reported files %v; it changed none", res.Files)
	}
	// A Python exception does not roll back what ran before it.
	res = call(t, s, airlock.Request{Code: "y = 'kept'\nraise ValueError('boom')"}, "", "")
	if res.ExitCode != 1 || res.RolledBack || !strings.Contains(string(res.Stderr), "ValueError: boom") {
		t.Errorf("exception: exit %d, rolled back %v, stderr %q", res.ExitCode, res.RolledBack, res.Stderr)
	}
	res = call(t, s, airlock.Request{Code: "import sys\nprint(y, x)\nsys.exit(3)"}, "kept 41\n", "")
	if res.ExitCode != 3 || res.RolledBack {
		t.Errorf("sys.exit(3): exit %d, rolled back %v", res.ExitCode, res.RolledBack)
	}
	// Stdin is per call; input() reads it.
	call(t, s, airlock.Request{Code: "print(input().upper(), y)", Stdin: []byte("hello\n")}, "HELLO kept\n", "")
	if got := s.Calls(); got != 5 {
		t.Errorf("Calls() = %d, want 5", got)
	}
}

func TestSessionRollsBackACallThatHitsALimit(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "n = 1\nopen('a.txt', 'w').write('first')"}, "", "")
	for _, tc := range []struct {
		name string
		req  airlock.Request
		kind airlock.Kind
	}{
		{"timeout", airlock.Request{Code: "n = 2\nopen('a.txt', 'w').write('second')\nopen('b.txt', 'w').write('x')\nwhile True: pass", Limits: airlock.Limits{Timeout: 500 * time.Millisecond}}, airlock.KindTimeout},
		{"output", airlock.Request{Code: "n = 3\nprint('x' * 5000)", Limits: airlock.Limits{Output: 1000}}, airlock.KindOutputLimit},
		{"memory", airlock.Request{Code: "n = 4\nb = bytearray(200 << 20)", Limits: airlock.Limits{Memory: 64 << 20}}, airlock.KindMemoryLimit},
		{"fs quota", airlock.Request{Code: "n = 5\nwith open('big', 'wb') as f: f.write(b'x' * 4096)", Limits: airlock.Limits{FSBytes: 1024}}, airlock.KindFSQuota},
	} {
		res, err := s.Run(context.Background(), tc.req)
		if res.Error == nil || res.Error.Kind != tc.kind || !errors.Is(err, res.Error) || !res.RolledBack {
			t.Fatalf("%s: error %v, rolled back %v; want kind %s, rolled back\nstderr: %s", tc.name, err, res.RolledBack, tc.kind, res.Stderr)
		}
	}
	call(t, s, airlock.Request{Code: "import os\nprint(n, open('a.txt').read(), os.path.exists('b.txt'))"}, "1 first False\n", "")

	// Leaving the interpreter (os._exit) keeps the state from before.
	res := call(t, s, airlock.Request{Code: "n = 9\nimport os\nos._exit(7)"}, "", "")
	if res.ExitCode != 7 || !res.RolledBack {
		t.Errorf("os._exit(7): exit %d, rolled back %v", res.ExitCode, res.RolledBack)
	}
	call(t, s, airlock.Request{Code: "print(n)"}, "1\n", "")
}

func TestSessionForkIsIndependent(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "items = ['base']\nopen('f', 'w').write('base')"}, "", "")
	f, err := s.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	call(t, s, airlock.Request{Code: "items.append('parent')\nopen('f', 'a').write('+parent')"}, "", "")
	call(t, f, airlock.Request{Code: "items.append('fork')\nopen('f', 'a').write('+fork')"}, "", "")
	call(t, s, airlock.Request{Code: "print(items, open('f').read())"}, "['base', 'parent'] base+parent\n", "")
	call(t, f, airlock.Request{Code: "print(items, open('f').read())"}, "['base', 'fork'] base+fork\n", "")
	// Closing the parent leaves the fork whole (the image they shared).
	s.Close(context.Background())
	if _, err := s.Run(context.Background(), airlock.Request{Code: "print(1)"}); !errors.Is(err, airlock.ErrSessionClosed) {
		t.Errorf("run on a closed session: %v, want ErrSessionClosed", err)
	}
	call(t, f, airlock.Request{Code: "print(len(items))"}, "2\n", "")
}

func TestSessionTTLAndCap(t *testing.T) {
	ctx := context.Background()
	sandbox, err := airlock.New(ctx, append(suiteOptions(), airlock.WithSessionTTL(300*time.Millisecond), airlock.WithMaxSessions(2))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sandbox.Close(ctx)
	if !sandbox.Snapshots() {
		t.Fatal("snapshots unavailable")
	}
	a := newSession(t, sandbox, airlock.SessionOptions{})
	call(t, a, airlock.Request{Code: "v = 1"}, "", "")
	b := newSession(t, sandbox, airlock.SessionOptions{})
	if _, err := sandbox.NewSession(ctx, airlock.SessionOptions{}); !errors.Is(err, airlock.ErrTooManySessions) {
		t.Fatalf("third session: %v, want ErrTooManySessions", err)
	}
	if _, err := a.Fork(); !errors.Is(err, airlock.ErrTooManySessions) {
		t.Fatalf("fork at the cap: %v, want ErrTooManySessions", err)
	}
	b.Close(ctx)
	if sandbox.Sessions() != 1 {
		t.Errorf("Sessions() = %d after closing one of two", sandbox.Sessions())
	}
	// Calls keep a session alive; idleness past the TTL ends it.
	for range 3 {
		time.Sleep(150 * time.Millisecond)
		call(t, a, airlock.Request{Code: "v += 1"}, "", "")
	}
	time.Sleep(700 * time.Millisecond)
	if _, err := a.Run(ctx, airlock.Request{Code: "print(v)"}); !errors.Is(err, airlock.ErrSessionExpired) {
		t.Fatalf("idle past the TTL: %v, want ErrSessionExpired", err)
	}
	if sandbox.Sessions() != 0 {
		t.Errorf("Sessions() = %d after expiry", sandbox.Sessions())
	}
}

func TestSessionRefusals(t *testing.T) {
	ctx := context.Background()
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	for name, req := range map[string]airlock.Request{
		"deterministic":    {Code: "pass", Deterministic: true},
		"start-up env":     {Code: "pass", Env: map[string]string{"PYTHONHASHSEED": "1"}},
		"reserved env":     {Code: "pass", Env: map[string]string{"AIRLOCK_SESSION": "0"}},
		"negative limit":   {Code: "pass", Limits: airlock.Limits{Timeout: -1}},
		"file in a layer?": {Code: "pass", Files: map[string][]byte{"/": nil}},
	} {
		res, err := s.Run(ctx, req)
		if !errors.Is(err, airlock.ErrInvalidRequest) || res.Error == nil {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
	if _, err := snapshotSandbox(t).NewSession(ctx, airlock.SessionOptions{Env: map[string]string{"LANG": "C"}}); !errors.Is(err, airlock.ErrInvalidRequest) {
		t.Errorf("session with LANG: %v, want invalid_request", err)
	}
	if _, err := snapshotSandbox(t).NewSession(ctx, airlock.SessionOptions{Tools: []string{"no_such_tool"}}); !errors.Is(err, airlock.ErrInvalidRequest) {
		t.Errorf("session with an unknown tool: %v, want invalid_request", err)
	}
	// A file left open cannot be carried to the next call: the call fails
	// and the session keeps its state.
	call(t, s, airlock.Request{Code: "k = 1"}, "", "")
	res, err := s.Run(ctx, airlock.Request{Code: "k = 2\nkeep = open('left-open.txt', 'w')"})
	if !errors.Is(err, airlock.ErrInvalidRequest) || !res.RolledBack || !strings.Contains(err.Error(), "left files open") {
		t.Errorf("file left open: %v, rolled back %v", err, res.RolledBack)
	}
	call(t, s, airlock.Request{Code: "print(k)"}, "1\n", "")

	off, err := airlock.New(ctx, airlock.WithSnapshots(false))
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close(ctx)
	if _, err := off.NewSession(ctx, airlock.SessionOptions{}); !errors.Is(err, airlock.ErrSessionsUnavailable) {
		t.Errorf("without snapshots: %v, want ErrSessionsUnavailable", err)
	}
}

// A call's stdin is that call's: input the previous call read ahead and
// did not use (sys.stdin's buffer lives in the paused image) must not
// reach the next one.
func TestSessionCallsHaveTheirOwnStdin(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "print(input())", Stdin: []byte("alice\nbob\n")}, "alice\n", "")
	call(t, s, airlock.Request{Code: "print(input())", Stdin: []byte("carol\n")}, "carol\n", "")
	call(t, s, airlock.Request{Code: "import sys; print(repr(sys.stdin.read()))"}, "''\n", "")
}

// Each session call says which tools it allows: airlock.tools must not
// keep the list of the first call that used it.
func TestSessionToolListFollowsTheCall(t *testing.T) {
	ctx := context.Background()
	s, err := toolSandbox(t).NewSession(ctx, airlock.SessionOptions{Tools: []string{"add"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	call(t, s, airlock.Request{Code: "import airlock\nprint(airlock.tools.add(1, 2))"}, "3\n", "")
	call(t, s, airlock.Request{Code: "print(airlock.tools.echo('hi'))", Tools: []string{"add", "echo"}}, "hi\n", "")
}

// A fork continues its session's state but not its random sequence: the
// fork's first call reseeds, as os.fork's child does.
func TestSessionForkDrawsItsOwnRandomNumbers(t *testing.T) {
	ctx := context.Background()
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "import random"}, "", "")
	f, err := s.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	code := "print([random.randrange(1 << 60) for _ in range(3)])"
	a, err1 := s.Run(ctx, airlock.Request{Code: code})
	b, err2 := f.Run(ctx, airlock.Request{Code: code})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if string(a.Stdout) == string(b.Stdout) {
		t.Fatalf("the session and its fork drew the same numbers: %s", a.Stdout)
	}
}

// A traceback through a function an earlier call defined shows that
// call's source line, not the line of the same number in the current one.
func TestSessionTracebacksShowTheRightCall(t *testing.T) {
	ctx := context.Background()
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	call(t, s, airlock.Request{Code: "def f():\n    return 1 / 0\n"}, "", "")
	res, err := s.Run(ctx, airlock.Request{Code: "x = 'first line of the second call'\nf()\n"})
	if err != nil {
		t.Fatal(err)
	}
	if tb := string(res.Stderr); !strings.Contains(tb, "return 1 / 0") || !strings.Contains(tb, `File "<main> [2]", line 2`) {
		t.Fatalf("traceback:\n%s", tb)
	}
}

// HeldMemory says what an idle session keeps of its own: nothing before
// its first call, then its interpreter's changed pages (more after it
// builds an 8 MB list) and its files (a 1 MiB file counts).
func TestSessionHeldMemory(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	if image, files := s.HeldMemory(); image != 0 || files != 0 {
		t.Fatalf("before any call: %d image bytes, %d file bytes; want none", image, files)
	}
	call(t, s, airlock.Request{Code: "x = 1"}, "", "")
	small, _ := s.HeldMemory()
	call(t, s, airlock.Request{Code: "big = list(range(2_000_000))\nopen('data.bin', 'wb').write(bytes(1 << 20))"}, "", "")
	image, files := s.HeldMemory()
	if small <= 0 || image < small+8<<20 {
		t.Fatalf("image bytes %d after a small call, %d after building a 2M-int list; want growth past 8 MB", small, image)
	}
	if files < 1<<20 {
		t.Fatalf("file bytes %d after writing 1 MiB", files)
	}
}
