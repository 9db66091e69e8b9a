// Package bench measures Airlock on the real python.wasm: the workloads,
// and the latency and throughput statistics that `airlock bench` and the
// `go test -bench` benchmarks report.
package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// Workload is a program measured as one fresh run per iteration.
type Workload struct {
	Name string
	Code string
}

// Workloads are what `airlock bench` and the benchmarks run, in order.
var Workloads = []Workload{
	{"pass", "pass"},
	{"hello", `print("hi")`},
	{"json_re", JSONRe},
	// CPU-bound: where the engines' code generation and fuel metering show.
	{"sum_1e6", "print(sum(range(10**6)))"},
}

// JSONRe is a small, typical agent workload: build, dump, parse and scan JSON.
const JSONRe = `
import json, re
doc = {"items": [{"id": i, "name": f"item-{i}", "tags": ["a", "b", str(i % 7)]} for i in range(200)]}
text = json.dumps(doc)
back = json.loads(text)
ids = [int(m.group(1)) for m in re.finditer(r'"id": (\d+)', text)]
assert len(ids) == 200 and back["items"][199]["name"] == "item-199"
`

// Stats summarises one measurement. Durations are of Sandbox.Run as the
// caller sees it.
type Stats struct {
	Runs      int
	Workers   int
	P50, P99  time.Duration
	RunsPerS  float64
	WallClock time.Duration
	// FuelMin and FuelMax bound the fuel the runs consumed (0 on engines
	// that do not meter it); equal when the workload is deterministic.
	FuelMin, FuelMax int64
}

// Measure runs w runs times on workers goroutines and reports latency
// percentiles and throughput. Any failed run aborts the measurement.
func Measure(ctx context.Context, sb *airlock.Sandbox, w Workload, runs, workers int) (Stats, error) {
	if runs < 1 || workers < 1 {
		return Stats{}, fmt.Errorf("bench: need at least one run and one worker")
	}
	lat := make([]time.Duration, runs)
	fuel := make([]int64, runs)
	next := make(chan int, runs)
	for i := range runs {
		next <- i
	}
	close(next)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				res, err := sb.Run(ctx, airlock.Request{Code: w.Code})
				lat[i] = time.Since(t)
				fuel[i] = res.Fuel
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("bench: %s: %w", w.Name, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return Stats{}, firstErr
	}
	slices.Sort(lat)
	return Stats{
		Runs:      runs,
		Workers:   workers,
		P50:       percentile(lat, 50),
		P99:       percentile(lat, 99),
		RunsPerS:  float64(runs) / wall.Seconds(),
		WallClock: wall,
		FuelMin:   slices.Min(fuel),
		FuelMax:   slices.Max(fuel),
	}, nil
}

// percentile of sorted durations, nearest-rank.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank-1, 0)]
}
