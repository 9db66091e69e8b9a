package airlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// Interactive input behaves as at Python's prompt: an expression
// statement's value is printed and kept in _, None is not printed, and
// input holding two statements is refused as the prompt refuses it.
func TestSessionInteractive(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	in := func(code string) airlock.Request {
		return airlock.Request{Code: code, Filename: "<stdin>", Interactive: true}
	}
	call(t, s, in("x = 6 * 7"), "", "")
	call(t, s, in("x"), "42\n", "")
	call(t, s, in("_ + 1"), "43\n", "")
	call(t, s, in("print('p')"), "p\n", "") // print's None is not echoed
	call(t, s, in("for i in range(2):\n    i * 10\n"), "0\n10\n", "")
	call(t, s, in("'a'; 'b'"), "'a'\n'b'\n", "")
	res := call(t, s, in("y = 1\nz = 2\n"), "", "")
	if res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "SyntaxError: multiple statements") {
		t.Errorf("two statements: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	// Without Interactive the same session runs whole programs, silently.
	call(t, s, airlock.Request{Code: "x\nw = x + 1\nw"}, "", "")
	call(t, s, in("w"), "43\n", "")

	// A one-off run may be interactive too.
	res, err := snapshotSandbox(t).Run(context.Background(), in("2 ** 10"))
	if err != nil || string(res.Stdout) != "1024\n" {
		t.Errorf("interactive Run: %q, %v", res.Stdout, err)
	}
}

// Err reports a session's end without waiting for a call in progress: a
// server sweeping its table of sessions must not stall behind one.
func TestSessionErr(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	started := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(context.Background(), airlock.Request{
			Code: "print('looping', flush=True)\nwhile True: pass", Limits: airlock.Limits{Timeout: 3 * time.Second},
			OnOutput: func(string, []byte) {
				select {
				case started <- struct{}{}:
				default:
				}
			},
		})
	}()
	<-started
	errc := make(chan error, 1)
	go func() { errc <- s.Err() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Err of a live session: %v", err)
		}
	case <-time.After(2 * time.Second): // the call runs until its 3 s timeout
		t.Fatal("Err waits for the running call to end")
	}
	<-done
	s.Close(context.Background())
	if err := s.Err(); !errors.Is(err, airlock.ErrSessionClosed) {
		t.Fatalf("Err after Close: %v", err)
	}
}
