package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-sandbox/airlock/bench"
)

func TestCharts(t *testing.T) {
	results := []bench.PeerResult{
		{Workload: "hello", Sandbox: "a", P50MS: 2, PeakMemory: 16 << 20},
		{Workload: "hello", Sandbox: "b", P50MS: 2400, PeakMemory: 20 << 20},
		{Workload: "sum", Sandbox: "a", P50MS: 0.05, PeakMemory: 1 << 20},
	}
	dir := t.TempDir()
	files, err := Charts(results, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("files = %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) < 1000 || string(data[1:4]) != "PNG" {
			t.Fatalf("%s: %d bytes, err %v", filepath.Base(f), len(data), err)
		}
	}
}
