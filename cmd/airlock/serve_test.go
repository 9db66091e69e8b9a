package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// --max-sessions and --session-ttl reach the Sandbox that serve and mcp
// build; nonsense values are usage errors.
func TestSessionFlags(t *testing.T) {
	parse := func(args ...string) ([]airlock.Option, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f sessionFlags
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return f.options()
	}
	opts, err := parse("--max-sessions", "1", "--session-ttl", "1h")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := airlock.New(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	s, err := sb.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := sb.NewSession(ctx, airlock.SessionOptions{}); !errors.Is(err, airlock.ErrTooManySessions) {
		t.Fatalf("second session under --max-sessions 1: %v", err)
	}
	for _, bad := range [][]string{{"--max-sessions", "0"}, {"--session-ttl", "0s"}} {
		var ue usageError
		if _, err := parse(bad...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
	for _, cmd := range []string{"serve", "mcp"} {
		if code, _, _ := cli(t, "", cmd, "--max-sessions", "0"); code != exitUsage {
			t.Errorf("%s --max-sessions 0: exit %d, want %d", cmd, code, exitUsage)
		}
	}
}

// startServe runs `airlock serve --addr 127.0.0.1:0 ARGS` as a process of
// this test binary, with no token, session store or key from the
// environment unless extraEnv sets them, and returns its URL once it says
// where it listens, the process and its log. It is killed at the end of
// the test.
func startServe(t *testing.T, extraEnv []string, args ...string) (string, *exec.Cmd, *syncWriter) {
	t.Helper()
	logs := &syncWriter{}
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), envExecMain+"=1", "AIRLOCK_TOKEN=", "AIRLOCK_SESSION_STORE=", "AIRLOCK_SESSION_KEY="), extraEnv...)
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addrRE := regexp.MustCompile(`addr=http://(\S+)`)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(logs.String()); m != nil {
			return "http://" + m[1], cmd, logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s", logs.String())
		}
	}
}
