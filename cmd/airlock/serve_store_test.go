package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// A shared store without a session key is refused before anything
// starts: anyone able to write to the store could otherwise raise a
// session's limits or plant state. A store that cannot be reached fails
// serve at start, naming it.
func TestServeSessionStoreNeedsKey(t *testing.T) {
	t.Setenv("AIRLOCK_SESSION_KEY", "")
	t.Setenv("AIRLOCK_SESSION_STORE", "")
	code, _, stderr := cli(t, "", "serve", "--addr", "127.0.0.1:0", "--session-store", "redis://:secret@127.0.0.1:1/0")
	if code != exitUsage || !strings.Contains(stderr, "needs a session key") || !strings.Contains(stderr, "--session-key-file") {
		t.Fatalf("exit %d, stderr %q: want a usage error asking for a session key", code, stderr)
	}
	if strings.Contains(stderr, "secret") {
		t.Fatalf("the error shows the store's password: %q", stderr)
	}
	short := filepath.Join(t.TempDir(), "key")
	os.WriteFile(short, []byte("short\n"), 0o600)
	if code, _, stderr := cli(t, "", "serve", "--session-store", "redis://127.0.0.1:1/0", "--session-key-file", short); code != exitUsage || !strings.Contains(stderr, "at least 16") {
		t.Fatalf("short key: exit %d, stderr %q", code, stderr)
	}
	good := filepath.Join(t.TempDir(), "key")
	os.WriteFile(good, []byte("sixteen bytes or more\n"), 0o600)
	code, _, stderr = cli(t, "", "serve", "--addr", "127.0.0.1:0", "--session-store", "redis://127.0.0.1:1/0", "--session-key-file", good)
	if code != exitAirlock || !strings.Contains(stderr, "session store redis://127.0.0.1:1/0 unavailable") {
		t.Fatalf("unreachable store: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("AIRLOCK_SESSION_STORE", "redis://127.0.0.1:1/0")
	if code, _, stderr := cli(t, "", "serve", "--addr", "127.0.0.1:0"); code != exitUsage || !strings.Contains(stderr, "needs a session key") {
		t.Fatalf("$AIRLOCK_SESSION_STORE without a key: exit %d, stderr %q", code, stderr)
	}
}

// syncWriter lets a test read what a serve goroutine logs.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Three `airlock serve` processes (this test binary run as the command)
// sharing one real redis-server: a session made on the first is called
// on the second and forked on the third; two replicas calling it at once
// get one answer and one 409; a replica killed mid-call leaves the
// session as it was before that call, to any other replica, once the
// dead call's lease runs out.
func TestServeReplicasShareRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test needs redis-server (scripts/setup.sh installs it where it can; else apt-get install redis-server): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	redisCmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := redisCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redisCmd.Process.Kill(); redisCmd.Wait() })
	storeURL := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	keyFile := filepath.Join(t.TempDir(), "session-key")
	if err := os.WriteFile(keyFile, []byte("a replicas' shared session key\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// serve refuses to start until Redis answers.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not listen")
		}
		time.Sleep(50 * time.Millisecond)
	}

	const lease = 2 * time.Second
	procs := make([]*exec.Cmd, 3)
	urls := make([]string, 3)
	for i := range procs {
		var logs *syncWriter
		urls[i], procs[i], logs = startServe(t, nil, "--session-store", storeURL, "--session-key-file", keyFile,
			"--session-lease", lease.String(), "--drain-timeout", "5s")
		if !strings.Contains(logs.String(), "sessions="+storeURL) {
			t.Fatalf("serve does not log its store: %s", logs.String())
		}
	}
	bg := context.Background()
	c0, c1, c2 := &client.Client{URL: urls[0]}, &client.Client{URL: urls[1]}, &client.Client{URL: urls[2]}
	id, err := c0.NewSession(bg, wire.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := func(c *client.Client, id, code, stdout string) {
		t.Helper()
		res, err := c.RunSession(bg, id, wire.SessionRunRequest{Code: code})
		if err != nil || res.Stdout != stdout || res.RolledBack {
			t.Fatalf("%s on %s: %+v %v, want stdout %q", code, c.URL, res, err, stdout)
		}
	}
	busy := func(err error) bool {
		var apiErr *client.APIError
		return errors.As(err, &apiErr) && apiErr.Status == 409 && apiErr.Kind == "session_busy"
	}
	// A caller that loses the race for the lock to the test's polling
	// below tries again, as a client told 409 would.
	runRetrying := func(c *client.Client, code string) (*wire.SessionResult, error) {
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			res, err := c.RunSession(bg, id, wire.SessionRunRequest{Code: code})
			if !busy(err) || time.Since(start) > 20*time.Second {
				return res, err
			}
		}
	}
	want(c1, id, "x = 20\nprint(x)", "20\n")
	fork, err := c2.ForkSession(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	want(c2, fork, "x *= 2\nprint(x)", "40\n")
	want(c0, id, "print(x)", "20\n")

	// Two replicas at once: the second caller is told the session is
	// busy while the first call runs, and nothing of it is lost.
	first := make(chan error, 1)
	go func() {
		res, err := runRetrying(c0, "import time\ntime.sleep(2)\ny = 1")
		if err == nil && res.Error != nil {
			err = fmt.Errorf("%+v", res.Error)
		}
		first <- err
	}()
	waitBusy := func(c *client.Client) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := c.RunSession(bg, id, wire.SessionRunRequest{Code: "print(x)"})
			if busy(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the call in flight never held the session: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitBusy(c1)
	if err := <-first; err != nil {
		t.Fatalf("the first caller: %v", err)
	}
	want(c1, id, "print(x, y)", "20 1\n")

	// A replica killed mid-call: its call never commits, and once its
	// lease runs out the session is what it was before that call.
	dying := make(chan error, 1)
	go func() {
		_, err := runRetrying(c2, "x = 99\nimport time\ntime.sleep(60)")
		dying <- err
	}()
	waitBusy(c1)
	if err := procs[2].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	procs[2].Wait()
	if err := <-dying; err == nil {
		t.Fatal("a call on a killed replica reported success")
	}
	killed := time.Now()
	for {
		res, err := c1.RunSession(bg, id, wire.SessionRunRequest{Code: "print(x)"})
		if err == nil {
			if res.Stdout != "20\n" {
				t.Fatalf("after the dead call: %q, want the state before it", res.Stdout)
			}
			break
		}
		if !busy(err) {
			t.Fatalf("while the dead call's lease runs: %v, want 409 session_busy", err)
		}
		if time.Since(killed) > lease+20*time.Second {
			t.Fatalf("the dead replica's lease (%v) never ran out", lease)
		}
		time.Sleep(100 * time.Millisecond)
	}

	list, err := c1.ListSessions(bg)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c0.DeleteSession(bg, id); err != nil {
		t.Fatal(err)
	}
	var apiErr *client.APIError
	if _, err := c1.RunSession(bg, id, wire.SessionRunRequest{Code: "print(x)"}); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("deleted session: %v, want a 404", err)
	}
}
