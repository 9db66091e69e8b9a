package main

import (
	"strings"
	"testing"
)

// A listen address beyond loopback without a bearer token is refused
// before anything is built, with an error that names the fixes; loopback
// needs no token; the explicit flag, or a token, lets the command go on
// (to a listen that fails here: 192.0.2.1 is a documentation address no
// host of ours has, so no test binds beyond loopback).
func TestNetworkListenNeedsToken(t *testing.T) {
	t.Setenv("AIRLOCK_TOKEN", "")
	exposed := []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0", "[::ffff:192.0.2.1]:0"}
	for _, addr := range exposed {
		for _, args := range [][]string{{"serve", "--addr", addr}, {"mcp", "--http", addr}} {
			code, _, stderr := cli(t, "", args...)
			if code != exitUsage {
				t.Errorf("%v without a token: exit %d, want %d; stderr:\n%s", args, code, exitUsage, stderr)
				continue
			}
			for _, want := range []string{"no bearer token", "$AIRLOCK_TOKEN", "127.0.0.1", "--" + flagUnauthenticatedNetwork} {
				if !strings.Contains(stderr, want) {
					t.Errorf("%v: the refusal does not name %q:\n%s", args, want, stderr)
				}
			}
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "127.3.4.5:0", "[::1]:0", "localhost:0", "LOCALHOST:0", "[::ffff:127.0.0.1]:0"} {
		if err := checkListenAuth("--addr", addr, "", false); err != nil {
			t.Errorf("loopback %s refused: %v", addr, err)
		}
	}

	// Past the check, the listen on an address not ours fails instead.
	pastCheck := func(args ...string) {
		t.Helper()
		code, _, stderr := cli(t, "", args...)
		if code == exitUsage || !strings.Contains(stderr, "192.0.2.1") || strings.Contains(stderr, "no bearer token") {
			t.Errorf("%v: exit %d, want the check passed and the listen failed; stderr:\n%s", args, code, stderr)
		}
	}
	pastCheck("serve", "--addr", "192.0.2.1:0", "--"+flagUnauthenticatedNetwork)
	pastCheck("mcp", "--http", "192.0.2.1:0", "--"+flagUnauthenticatedNetwork)
	t.Setenv("AIRLOCK_TOKEN", "s3cret")
	pastCheck("serve", "--addr", "192.0.2.1:0")
	pastCheck("mcp", "--http", "192.0.2.1:0")
}
