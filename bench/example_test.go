package bench_test

import (
	"fmt"
	"time"

	"github.com/airlock-sandbox/airlock/bench"
)

// The statistics behind `airlock bench`: medians of run times, and a
// table of peers with each figure's ratio to the baseline's.
func Example() {
	fmt.Println(bench.Median([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}))
	fmt.Print(bench.MarkdownTable([]bench.PeerResult{
		{Workload: "hello", Sandbox: "airlock", Runs: 100, P50MS: 2, P99MS: 3, RunsPerS: 450, PeakMemory: 40 << 20},
		{Workload: "hello", Sandbox: "native", Runs: 100, P50MS: 10, P99MS: 12, RunsPerS: 95, PeakMemory: 10 << 20},
	}, "airlock", nil))
	// Output:
	// 2ms
	// | workload | sandbox | runs | p50 ms | p99 ms | runs/s | peak MiB |
	// |---|---|--:|--:|--:|--:|--:|
	// | hello | airlock | 100 | 2.00 (×1.00) | 3.00 (×1.00) | 450 (×1.00) | 40.0 (×1.00) |
	// | hello | native | 100 | 10.0 (×5.00) | 12.0 (×4.00) | 95.0 (×0.21) | 10.0 (×0.25) |
}
