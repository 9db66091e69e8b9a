package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// serve --memory-budget says its figure at start-up, refuses a session
// that holds more than all of it (507 memory_budget) once that session
// has been moved to disk, and leaves no spilled session behind at exit.
func TestServeMemoryBudget(t *testing.T) {
	tmp := t.TempDir()
	url, cmd, logs := startServe(t, []string{"TMPDIR=" + tmp}, "--drain-timeout", "5s", "--memory-budget", "64MiB")
	if !strings.Contains(logs.String(), `memory_budget="64MiB (--memory-budget)"`) {
		t.Errorf("start-up line does not say the budget: %s", logs.String())
	}
	ctx := context.Background()
	c := &client.Client{URL: url}
	id, err := c.NewSession(ctx, wire.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	hold := "x = bytearray(80 << 20)\nx[::4096] = b'\\x01' * len(range(0, len(x), 4096))\n"
	if res, err := c.RunSession(ctx, id, wire.SessionRunRequest{Code: hold}); err != nil || res.ExitCode != 0 {
		t.Fatalf("first call: %v %+v", err, res)
	}
	if spilled, _ := filepath.Glob(filepath.Join(tmp, "airlock-spill-*", "session-*")); len(spilled) != 1 {
		t.Fatalf("spilled sessions on disk: %v, want the one over the budget", spilled)
	}
	var apiErr *client.APIError
	if _, err := c.RunSession(ctx, id, wire.SessionRunRequest{Code: "print(len(x))"}); !errors.As(err, &apiErr) || apiErr.Status != 507 || apiErr.Kind != "memory_budget" {
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
