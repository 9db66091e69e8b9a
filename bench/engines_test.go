package bench

import (
	"context"
	"os"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// BenchmarkEngines runs the workloads on every engine compiled in, side by
// side (wasmtime needs -tags airlock_wasmtime), resumed from the snapshot.
// On wasmtime it reports the fuel one run consumed, which must be the same
// on every run of a workload.
func BenchmarkEngines(b *testing.B) {
	ctx := context.Background()
	for _, eng := range airlock.AvailableEngines() {
		b.Run(eng, func(b *testing.B) {
			sb, err := airlock.New(ctx, airlock.WithEngine(eng), airlock.WithNotice(os.Stderr))
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close(ctx)
			for _, w := range Workloads {
				b.Run(w.Name, func(b *testing.B) {
					fuel := int64(-1)
					for b.Loop() {
						res, err := sb.Run(ctx, airlock.Request{Code: w.Code})
						if err != nil || res.ExitCode != 0 {
							b.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
						}
						if fuel >= 0 && res.Fuel != fuel {
							b.Fatalf("fuel differs between runs: %d then %d", fuel, res.Fuel)
						}
						fuel = res.Fuel
					}
					if fuel > 0 {
						b.ReportMetric(float64(fuel), "fuel/op")
					}
				})
			}
		})
	}
}
