package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"testing"

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
	defer s.Close()
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
