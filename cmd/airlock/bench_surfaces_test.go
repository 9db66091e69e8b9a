package main

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// Every surface runs the workloads and reports them: the Go API and the
// server's own run time, HTTP and MCP round trips over loopback.
func TestBenchSurfacesJSON(t *testing.T) {
	rt, err := os.MkdirTemp("", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	t.Setenv("XDG_RUNTIME_DIR", rt)
	t.Setenv(envExecMain, "1") // the CLI's processes are this test binary, as the airlock command
	// wazero: the warm server is wazero's, and CI runs this suite on wasmtime too.
	code, stdout, stderr := cli(t, "", "bench", "--surfaces", "--engine", airlock.EngineWazero, "--runs", "2", "--workloads", "hello,pandas_csv", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep surfaceReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"hello", "pandas_csv"} {
		for _, s := range []string{"go", "http", "mcp", "cli (warm)"} {
			i := slices.IndexFunc(rep.Rows, func(r surfaceRow) bool { return r.Workload == w && r.Surface == s })
			if i < 0 {
				t.Fatalf("no row for %s through %s in %+v", w, s, rep.Rows)
			}
			r := rep.Rows[i]
			if r.Runs != 2 || r.P50MS <= 0 || r.P99MS < r.P50MS || (s == "go" || s == "http") != (r.RunP50MS > 0) {
				t.Fatalf("bad row %+v", r)
			}
		}
	}
	if servers, err := warmServers(); err != nil || len(servers) != 0 {
		t.Errorf("bench left warm servers running: %v %v", servers, err)
	}
}
