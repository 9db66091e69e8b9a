package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/server"
)

// serve --memory-budget says its figure at start-up, refuses a session
// that holds more than all of it (507 memory_budget) once that session
// has been moved to disk, and leaves no spilled session behind at exit.
func TestServeMemoryBudget(t *testing.T) {
	logs := &syncWriter{}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--drain-timeout", "5s", "--memory-budget", "64MiB")
	cmd.Env = append(os.Environ(), envExecMain+"=1", "AIRLOCK_TOKEN=", "AIRLOCK_SESSION_STORE=", "AIRLOCK_SESSION_KEY=", "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addrRE := regexp.MustCompile(`addr=http://(\S+)`)
	var url string
	for deadline := time.Now().Add(2 * time.Minute); url == ""; time.Sleep(50 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(logs.String()); m != nil {
			url = "http://" + m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), `memory_budget="64MiB (--memory-budget)"`) {
		t.Errorf("start-up line does not say the budget: %s", logs.String())
	}
	ctx := context.Background()
	c := &server.Client{URL: url}
	id, err := c.NewSession(ctx, server.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hold := "x = bytearray(80 << 20)\nx[::4096] = b'\\x01' * len(range(0, len(x), 4096))\n"
	if res, err := c.RunSession(ctx, id, server.SessionRunRequest{Code: hold}); err != nil || res.ExitCode != 0 {
		t.Fatalf("first call: %v %+v", err, res)
	}
	if spilled, _ := filepath.Glob(filepath.Join(tmp, "airlock-spill-*", "session-*")); len(spilled) != 1 {
		t.Fatalf("spilled sessions on disk: %v, want the one over the budget", spilled)
	}
	var apiErr *server.APIError
	if _, err := c.RunSession(ctx, id, server.SessionRunRequest{Code: "print(len(x))"}); !errors.As(err, &apiErr) || apiErr.Status != 507 || apiErr.Kind != "memory_budget" {
		t.Fatalf("a session over the whole budget: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, logs.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "airlock-spill-*")); len(left) != 0 {
		t.Fatalf("spill directory left after exit: %v", left)
	}
}
