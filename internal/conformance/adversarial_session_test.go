package airlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// TestSessionHostileGuests: a session is the guest's own state, so a guest
// may wreck it; the host must stay whole, every call must return a
// Result, and the session must stay usable or end with a clear error.
func TestSessionHostileGuests(t *testing.T) {
	ctx := context.Background()
	sandbox := snapshotSandbox(t)

	t.Run("pauses itself mid-code", func(t *testing.T) {
		// The guest reports a status early and reads stdin. A session
		// pauses only in the interpreter loop's read (C stdio's), or, on
		// the own build, when the call returns from the prelude's entry
		// point, so this read just finds the call's stdin empty and the
		// call goes on.
		s := newSession(t, sandbox, airlock.SessionOptions{})
		call(t, s, airlock.Request{Code: "import os\nfd = os.open('/dev/airlock-session', os.O_WRONLY)\nos.write(fd, b'0')\nos.close(fd)\ndata = os.read(0, 4096)\nprint('read', len(data), 'bytes')"}, "read 0 bytes\n", "")
		call(t, s, airlock.Request{Code: "print('back in step', len(data))"}, "back in step 0\n", "")
	})

	t.Run("garbage status", func(t *testing.T) {
		// The prelude's own report follows the guest's and is the one kept.
		s := newSession(t, sandbox, airlock.SessionOptions{})
		res := call(t, s, airlock.Request{Code: "import os\nfd = os.open('/dev/airlock-session', os.O_WRONLY)\nos.write(fd, b'not a number')\nos.close(fd)\nx = 1"}, "", "")
		if res.ExitCode != 0 || res.RolledBack {
			t.Errorf("exit %d, rolled back %v; want 0, kept", res.ExitCode, res.RolledBack)
		}
		call(t, s, airlock.Request{Code: "print(x)"}, "1\n", "")
	})

	t.Run("pauses itself outside the loop", func(t *testing.T) {
		// On the npm build, whose calls go through the interpreter's
		// loop: os.readv passes two buffers, as the loop's read does, so
		// the host does pause there; the unwound stack is not the loop's
		// (here it passes through C recursion, map calling down), which
		// the engine detects. The call fails and is rolled back. At 1500
		// levels the stack outgrows asyncify's buffer, or, at -O0, the
		// guest's own C stack first: a crash, rolled back as well. On
		// the own build a call starts at the prelude's entry point and
		// pauses only by returning from it: the read finds stdin empty
		// and the call goes on.
		entered := sandbox.Info().Build == "own"
		for _, depth := range []int{0, 20, 1500} {
			s := newSession(t, sandbox, airlock.SessionOptions{})
			call(t, s, airlock.Request{Code: "depth = -1"}, "", "")
			res, err := s.Run(ctx, airlock.Request{Code: fmt.Sprintf("import os, sys\nsys.setrecursionlimit(50000)\ndef down(n):\n    global depth\n    depth = n\n    if n == 0:\n        fd = os.open('/dev/airlock-session', os.O_WRONLY)\n        os.write(fd, b'0')\n        os.close(fd)\n        return os.readv(0, [bytearray(0), bytearray(1024)])\n    return list(map(down, [n - 1]))\ndown(%d)", depth)})
			if entered {
				if err != nil || res.RolledBack {
					t.Fatalf("depth %d: %v, rolled back %v, stdout %q", depth, err, res.RolledBack, res.Stdout)
				}
				call(t, s, airlock.Request{Code: "print(depth)"}, "0\n", "")
				continue
			}
			if err == nil || !res.RolledBack || depth < 1500 && res.Error.Kind != airlock.KindInvalidRequest {
				t.Fatalf("depth %d: %v, rolled back %v, stdout %q", depth, err, res.RolledBack, res.Stdout)
			}
			call(t, s, airlock.Request{Code: "print(depth)"}, "-1\n", "")
		}
	})

	t.Run("state outgrows a later call's memory cap", func(t *testing.T) {
		s := newSession(t, sandbox, airlock.SessionOptions{})
		call(t, s, airlock.Request{Code: "blob = bytearray(80 << 20)", Limits: airlock.Limits{Memory: 256 << 20}}, "", "")
		res, err := s.Run(ctx, airlock.Request{Code: "print(len(blob))", Limits: airlock.Limits{Memory: 64 << 20}})
		if res.Error == nil || res.Error.Kind != airlock.KindMemoryLimit || !res.RolledBack {
			t.Fatalf("image above the cap: %v, rolled back %v", err, res.RolledBack)
		}
		call(t, s, airlock.Request{Code: "del blob\nprint('freed')", Limits: airlock.Limits{Memory: 256 << 20}}, "freed\n", "")
	})

	t.Run("concurrent calls are serialised", func(t *testing.T) {
		s := newSession(t, sandbox, airlock.SessionOptions{})
		call(t, s, airlock.Request{Code: "n = 0"}, "", "")
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				if res, err := s.Run(ctx, airlock.Request{Code: "n += 1"}); err != nil {
					t.Errorf("concurrent call: %v\n%s", err, res.Stderr)
				}
			})
		}
		wg.Go(func() {
			if f, err := s.Fork(); err == nil {
				f.Close(ctx)
			}
		})
		wg.Wait()
		call(t, s, airlock.Request{Code: "print(n)"}, "6\n", "")
	})

	t.Run("close while a call runs", func(t *testing.T) {
		s, err := sandbox.NewSession(ctx, airlock.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		var once sync.Once
		done := make(chan *airlock.Result, 1)
		go func() {
			res, _ := s.Run(ctx, airlock.Request{
				Code:     "import sys, time\nprint('started', flush=True)\ntime.sleep(0.3)\nprint('finished')",
				OnOutput: func(string, []byte) { once.Do(func() { close(started) }) },
			})
			done <- res
		}()
		<-started
		s.Close(ctx) // waits for the running call, then ends the session
		res := <-done
		if res == nil || res.Error != nil || !strings.Contains(string(res.Stdout), "finished") {
			t.Fatalf("the call Close waited for: %+v", res)
		}
		if _, err := s.Run(ctx, airlock.Request{Code: "pass"}); !errors.Is(err, airlock.ErrSessionClosed) {
			t.Errorf("a closed session's call: %v, want ErrSessionClosed", err)
		}
	})

	// Close's context bounds its wait, not the session's end: the call
	// runs on and the session ends when it returns.
	t.Run("close's context ends before the call", func(t *testing.T) {
		s, err := sandbox.NewSession(ctx, airlock.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		var once sync.Once
		done := make(chan *airlock.Result, 1)
		go func() {
			res, _ := s.Run(ctx, airlock.Request{
				Code:     "import time\nprint('started', flush=True)\ntime.sleep(0.5)\nprint('finished')",
				OnOutput: func(string, []byte) { once.Do(func() { close(started) }) },
			})
			done <- res
		}()
		<-started
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if err := s.Close(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close with a call running past its context: %v, want context.DeadlineExceeded", err)
		}
		if res := <-done; res == nil || res.Error != nil || !strings.Contains(string(res.Stdout), "finished") {
			t.Fatalf("the call Close gave up on: %+v", res)
		}
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close again: %v", err)
		}
		if !errors.Is(s.Err(), airlock.ErrSessionClosed) {
			t.Errorf("after the call: Err %v, want ErrSessionClosed", s.Err())
		}
	})
}
