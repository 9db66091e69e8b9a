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
	// Phases are the medians of where resumed runs' time went (zero for
	// fresh ones): airlock.Result.Phases, and Host, what Sandbox.Run took
	// around the engine's phases (state, files, output, the audit).
	Phases PhaseStats
	// Tail is the same over the slowest runs, those at or above P99: which
	// phase a slow run lost its time in.
	Tail PhaseStats
}

// PhaseStats are per-phase medians, each over all runs; they need not
// add up to P50.
type PhaseStats struct {
	Start, Restore, Guest, Close, Host time.Duration
	// Pooled is the share of runs that took an instance made ahead.
	Pooled float64
}

// Measure runs w runs times on workers goroutines and reports latency
// percentiles and throughput. Any failed run aborts the measurement.
func Measure(ctx context.Context, sb *airlock.Sandbox, w Workload, runs, workers int) (Stats, error) {
	if runs < 1 || workers < 1 {
		return Stats{}, fmt.Errorf("bench: need at least one run and one worker")
	}
	lat := make([]time.Duration, runs)
	fuel := make([]int64, runs)
	phases := make([]airlock.Phases, runs)
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
				fuel[i], phases[i] = res.Fuel, res.Phases
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
	ph := phaseStats(lat, phases)
	sorted := slices.Sorted(slices.Values(lat))
	p99 := percentile(sorted, 99)
	var tailLat []time.Duration
	var tailPhases []airlock.Phases
	for i, d := range lat {
		if d >= p99 {
			tailLat, tailPhases = append(tailLat, d), append(tailPhases, phases[i])
		}
	}
	lat = sorted
	return Stats{
		Phases:    ph,
		Tail:      phaseStats(tailLat, tailPhases),
		Runs:      runs,
		Workers:   workers,
		P50:       percentile(lat, 50),
		P99:       p99,
		RunsPerS:  float64(runs) / wall.Seconds(),
		WallClock: wall,
		FuelMin:   slices.Min(fuel),
		FuelMax:   slices.Max(fuel),
	}, nil
}

// phaseStats takes the medians of each phase; lat is in run order.
func phaseStats(lat []time.Duration, phases []airlock.Phases) PhaseStats {
	n := len(phases)
	start, restore, guest, closing, host := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
	pooled := 0
	for i, p := range phases {
		start[i], restore[i], guest[i], closing[i] = p.Start, p.Restore, p.Guest, p.Close
		host[i] = lat[i] - p.Start - p.Restore - p.Guest - p.Close
		if p.Pooled {
			pooled++
		}
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return percentile(d, 50)
	}
	return PhaseStats{Start: median(start), Restore: median(restore), Guest: median(guest), Close: median(closing),
		Host: median(host), Pooled: float64(pooled) / float64(n)}
}

// percentile of sorted durations, nearest-rank.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank-1, 0)]
}
