package airlock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayoutArrows keeps the packages' imports pointing one way:
// cmd → server → airlock → python, hostfuncs → engine → wasi → memfs, with
// the client and the wire types free of the rest (docs/layout.md). A
// package may import one of ours only of a lower rank; internal packages
// are free to serve any of them.
func TestLayoutArrows(t *testing.T) {
	const mod = "github.com/airlock-sandbox/airlock"
	rank := map[string]int{
		"cmd/airlock": 9, "bench/charts": 9,
		"server": 8, "bench": 8,
		"":       7,
		"python": 6, "hostfuncs": 6,
		"engine/wasmtime": 5,
		"engine":          4,
		"wasi":            3, "wasi/memfs": 2, "wasi/errno": 1,
		"server/client": 1, "server/wire": 0,
	}
	out, err := exec.Command("go", "list", "-tags", "airlock_wasmtime", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from := strings.TrimPrefix(strings.TrimPrefix(fields[0], mod), "/")
		r, ranked := rank[from]
		if !ranked {
			continue // internal packages and tools
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			to := strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/")
			if rt, ok := rank[to]; ok && rt >= r {
				t.Errorf("%s imports %s: the arrows point the other way", fields[0], imp)
			}
			if from == "server/client" || from == "server/wire" {
				if to != "server/wire" {
					t.Errorf("%s imports %s: a client must compile nothing of the server or the sandbox", fields[0], imp)
				}
			}
		}
	}
}
