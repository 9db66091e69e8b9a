package bench

import (
	"context"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// BenchmarkModes runs every workload resumed from the snapshot and in a
// freshly started interpreter, side by side:
//
//	go test -run '^$' -bench Modes -count 6 ./internal/bench/ | tee modes.txt; benchstat modes.txt
func BenchmarkModes(b *testing.B) {
	ctx := context.Background()
	fresh, err := airlock.New(ctx, airlock.WithSnapshots(false))
	if err != nil {
		b.Fatal(err)
	}
	defer fresh.Close(ctx)
	modes := []struct {
		name string
		sb   *airlock.Sandbox
	}{{"snapshot", sb}, {"fresh", fresh}}
	if !sb.Snapshots() {
		b.Fatal("snapshots unavailable: scripts/setup.sh prepares them")
	}
	for _, w := range Workloads {
		for _, m := range modes {
			b.Run(w.Name+"/"+m.name, func(b *testing.B) {
				b.ReportAllocs()
				reportRusage(b, func() {
					for b.Loop() {
						res, err := m.sb.Run(ctx, airlock.Request{Code: w.Code})
						if err != nil || res.ExitCode != 0 {
							b.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
						}
					}
				})
			})
		}
	}
}
