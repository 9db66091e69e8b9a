package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
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
	url, cmd, logs := startServe(t, []string{"TMPDIR=" + tmp}, "--drain-timeout", "5s", "--memory-budget", "700MiB", "--max-memory", "1GiB")
	if !strings.Contains(logs.String(), `memory_budget="700MiB (--memory-budget)"`) {
		t.Errorf("start-up line does not say the budget: %s", logs.String())
	}
	ctx := context.Background()
	c := &client.Client{URL: url}
	// What the process holds at start (program, images, compiled code)
	// differs by engine (wazero ~150-340 MiB; wasmtime pages its code in
	// later, ~70 MiB), and an eighth of the budget is the heap's room:
	// the sizes follow from the room they leave. Each call
	// may use nearly all of it, and a session holds over half of it, so
	// the second session's call moves the first to disk, and the first,
	// with a call's limit beside it, can never fit.
	room := (700<<20 - processMemoryCounted(t, url)) >> 20
	if room < 200 {
		t.Fatalf("serve counts %d MiB of its 700 MiB budget as its own at start: too little left for this test", 700-room)
	}
	limits := wire.RunLimits{Memory: (room - 8) << 20}
	hold := fmt.Sprintf("x = bytearray(%d << 20)\nx[::4096] = b'\\x01' * len(range(0, len(x), 4096))\n", room/2)
	var ids []string
	for i := range 2 {
		id, err := c.NewSession(ctx, wire.SessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.RunSession(ctx, id, wire.SessionRunRequest{Code: hold, Limits: limits}); err != nil || res.ExitCode != 0 {
			t.Fatalf("session %d's first call: %v %+v", i, err, res)
		}
		ids = append(ids, id)
	}
	if spilled, _ := filepath.Glob(filepath.Join(tmp, "airlock-spill-*", "session-*")); len(spilled) != 1 {
		t.Fatalf("spilled sessions on disk: %v, want the first", spilled)
	}
	var apiErr *client.APIError
	if _, err := c.RunSession(ctx, ids[0], wire.SessionRunRequest{Code: "print(len(x))", Limits: limits}); !errors.As(err, &apiErr) || apiErr.Status != 507 || apiErr.Kind != "memory_budget" {
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

// processMemoryCounted reads what serve counts within its budget as its
// own (airlock_process_memory_counted_bytes on /metrics).
func processMemoryCounted(t *testing.T, url string) int64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "airlock_process_memory_counted_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("airlock_process_memory_counted_bytes: %v", err)
			}
			return int64(f)
		}
	}
	t.Fatalf("no airlock_process_memory_counted_bytes on /metrics:\n%s", body)
	return 0
}
