package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/server"
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

// Three `airlock serve` instances (each its own Sandbox and store
// connection, in this test's process) sharing one real redis-server: a
// session made on the first is called on the second and forked on the
// third.
func TestServeReplicasShareRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test needs redis-server (apt-get install redis-server): %v", err)
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
	t.Setenv("AIRLOCK_SESSION_KEY", "")
	t.Setenv("AIRLOCK_TOKEN", "")

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

	addrRE := regexp.MustCompile(`addr=http://(\S+)`)
	urls := make([]string, 3)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range urls {
		logs := &syncWriter{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmdServe(ctx, []string{"--addr", "127.0.0.1:0", "--session-store", storeURL, "--session-key-file", keyFile, "--drain-timeout", "5s"}, io.Discard, logs)
		}()
		deadline := time.Now().Add(2 * time.Minute)
		for urls[i] == "" {
			if m := addrRE.FindStringSubmatch(logs.String()); m != nil {
				urls[i] = "http://" + m[1]
				if !strings.Contains(logs.String(), "sessions="+storeURL) {
					t.Fatalf("serve does not log its store: %s", logs.String())
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d did not start: %s", i, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	bg := context.Background()
	c0, c1, c2 := &server.Client{URL: urls[0]}, &server.Client{URL: urls[1]}, &server.Client{URL: urls[2]}
	id, err := c0.NewSession(bg, server.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := func(c *server.Client, id, code, stdout string) {
		t.Helper()
		res, err := c.RunSession(bg, id, server.SessionRunRequest{Code: code})
		if err != nil || res.Stdout != stdout || res.RolledBack {
			t.Fatalf("%s on %s: %+v %v, want stdout %q", code, c.URL, res, err, stdout)
		}
	}
	want(c1, id, "x = 20\nprint(x)", "20\n")
	fork, err := c2.ForkSession(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	want(c2, fork, "x *= 2\nprint(x)", "40\n")
	want(c0, id, "print(x)", "20\n")
	list, err := c1.ListSessions(bg)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c2.DeleteSession(bg, id); err != nil {
		t.Fatal(err)
	}
	var apiErr *server.APIError
	if _, err := c1.RunSession(bg, id, server.SessionRunRequest{Code: "print(x)"}); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("deleted session: %v, want a 404", err)
	}
}
