package airlock_test

import (
	"context"
	"strings"
	"testing"

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
