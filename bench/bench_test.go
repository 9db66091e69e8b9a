// Package bench measures Airlock's per-run cost on the real python.wasm.
//
//	go test -run '^$' -bench . -count 5 ./bench/ | tee new.txt   # then benchstat
//
// CI runs each benchmark once (-benchtime=1x) so they keep working; the
// figures in README.md come from -count runs on a named machine.
package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// Workloads are shared with the CLI's bench so both measure the same code.
var workloads = []struct{ name, code string }{
	{"pass", "pass"},
	{"hello", `print("hi")`},
	{"json_re", jsonRe},
}

const jsonRe = `
import json, re
doc = {"items": [{"id": i, "name": f"item-{i}", "tags": ["a", "b", str(i % 7)]} for i in range(200)]}
text = json.dumps(doc)
back = json.loads(text)
ids = [int(m.group(1)) for m in re.finditer(r'"id": (\d+)', text)]
assert len(ids) == 200 and back["items"][199]["name"] == "item-199"
`

var sb *airlock.Sandbox

func TestMain(m *testing.M) {
	var err error
	sb, err = airlock.New(context.Background(), airlock.WithNotice(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench needs python.wasm (scripts/setup.sh):", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := sb.Run(ctx, airlock.Request{Code: w.code})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
				}
			}
		})
	}
}

// BenchmarkRunParallel measures throughput with one worker per core.
func BenchmarkRunParallel(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := sb.Run(ctx, airlock.Request{Code: `print("hi")`})
			if err != nil || res.ExitCode != 0 {
				b.Errorf("err=%v exit=%d", err, res.ExitCode)
				return
			}
		}
	})
}
