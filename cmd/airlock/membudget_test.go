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

// serve --memory-budget says its figure at start-up, moves an idle
// session to disk when another needs the room, refuses a call whose
// session and memory limit pass all of what the budget leaves beside the
// process (507 memory_budget), and leaves no spilled session behind at
// exit.
func TestServeMemoryBudget(t *testing.T) {
	tmp := t.TempDir()
	// The process holds 150-340 MiB of it (program, images, compiled
	// code): the rest holds a call of 256 MiB (the default memory limit)
	// beside small sessions, never beside a 200 MiB one.
	url, cmd, logs := startServe(t, []string{"TMPDIR=" + tmp}, "--drain-timeout", "5s", "--memory-budget", "600MiB")
	if !strings.Contains(logs.String(), `memory_budget="600MiB (--memory-budget)"`) {
		t.Errorf("start-up line does not say the budget: %s", logs.String())
	}
	ctx := context.Background()
	c := &client.Client{URL: url}
	hold := "x = bytearray(200 << 20)\nx[::4096] = b'\\x01' * len(range(0, len(x), 4096))\n"
	var ids []string
	for i := range 2 {
		id, err := c.NewSession(ctx, wire.SessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.RunSession(ctx, id, wire.SessionRunRequest{Code: hold}); err != nil || res.ExitCode != 0 {
			t.Fatalf("session %d's first call: %v %+v", i, err, res)
		}
		ids = append(ids, id)
	}
	if spilled, _ := filepath.Glob(filepath.Join(tmp, "airlock-spill-*", "session-*")); len(spilled) != 1 {
		t.Fatalf("spilled sessions on disk: %v, want the first", spilled)
	}
	var apiErr *client.APIError
	if _, err := c.RunSession(ctx, ids[0], wire.SessionRunRequest{Code: "print(len(x))"}); !errors.As(err, &apiErr) || apiErr.Status != 507 || apiErr.Kind != "memory_budget" {
		t.Fatalf("a session that with its call's limit passes the budget: %v", err)
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
