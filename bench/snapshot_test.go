package bench

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// BenchmarkModes runs every workload resumed from the snapshot and in a
// freshly started interpreter, side by side:
//
//	go test -run '^$' -bench Modes -count 6 ./bench/ | tee modes.txt; benchstat modes.txt
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

// BenchmarkInstancePool is a run resumed from the snapshot with instances
// made ahead (the default) and without, side by side; the difference is
// what instantiation costs on a run's path (wazero). Runs come 3 ms apart
// (the pause is not timed), as requests to a server that is not
// saturated do: the pool refills between them. Back to back on every
// core, the refill competes with the runs and the two cost the same.
//
//	go test -run '^$' -bench InstancePool -benchtime 300x -count 6 ./bench/
func BenchmarkInstancePool(b *testing.B) {
	ctx := context.Background()
	unpooled, err := airlock.New(ctx, airlock.WithInstancePool(false))
	if err != nil {
		b.Fatal(err)
	}
	defer unpooled.Close(ctx)
	for _, m := range []struct {
		name string
		sb   *airlock.Sandbox
	}{{"pooled", sb}, {"unpooled", unpooled}} {
		b.Run(m.name, func(b *testing.B) {
			for b.Loop() {
				res, err := m.sb.Run(ctx, airlock.Request{Code: `print("hi")`})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
				}
				b.StopTimer()
				time.Sleep(3 * time.Millisecond)
				b.StartTimer()
			}
		})
	}
}
