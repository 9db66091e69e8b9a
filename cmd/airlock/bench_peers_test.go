package main

import (
	"strings"
	"testing"
)

// TestBenchPeersSetupWithoutNode: without node on PATH the Pyodide set-up
// is skipped with its reason, not failed.
func TestBenchPeersSetupWithoutNode(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := cli(t, "", "bench", "--peers", "--setup-only", "--cache-dir", t.TempDir())
	if code != 0 || !strings.Contains(stderr, "pyodide skipped") || !strings.Contains(stderr, "not found on PATH") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
