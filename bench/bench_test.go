package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// Run with: go test -run '^$' -bench . -count 6 ./bench/ | tee new.txt; benchstat new.txt
// CI runs each benchmark once (-benchtime=1x) so they keep working; the
// figures in docs/performance.md come from -count runs on a named machine.

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
	for _, w := range Workloads {
		b.Run(w.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := sb.Run(ctx, airlock.Request{Code: w.Code})
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

func TestPercentile(t *testing.T) {
	d := func(n int) time.Duration { return time.Duration(n) }
	sorted := []time.Duration{d(1), d(2), d(3), d(4), d(5), d(6), d(7), d(8), d(9), d(10)}
	if p := percentile(sorted, 50); p != d(5) {
		t.Fatalf("p50 = %d", p)
	}
	if p := percentile(sorted, 99); p != d(10) {
		t.Fatalf("p99 = %d", p)
	}
	if p := percentile(sorted[:1], 50); p != d(1) {
		t.Fatalf("p50 of one = %d", p)
	}
}

func TestMeasure(t *testing.T) {
	st, err := Measure(context.Background(), sb, Workloads[1], 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 4 || st.P50 <= 0 || st.P99 < st.P50 || st.RunsPerS <= 0 {
		t.Fatalf("stats = %+v", st)
	}
	if _, err := Measure(context.Background(), sb, Workload{"fails", "raise SystemExit(3)"}, 2, 1); err == nil {
		t.Fatal("a failing workload was measured as if it ran")
	}
}
