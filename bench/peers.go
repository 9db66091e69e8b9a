package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// PeerWorkloads are what `airlock bench --peers` runs in every sandbox, in
// order. Each program checks its own result, so a sandbox that runs it
// wrongly fails instead of looking fast.
var PeerWorkloads = []Workload{
	{"hello", `print("hi")`},
	{"json_re", JSONRe},
	{"sum_1e6", "assert sum(range(10**6)) == 499999500000"},
	{"unittest_50", Unittest50},
}

// Unittest50 is a test file of 50 small tests, run with unittest's own
// loader and runner; it fails unless all 50 ran and passed.
var Unittest50 = func() string {
	var b strings.Builder
	b.WriteString("import io, unittest\n\nclass T(unittest.TestCase):\n")
	for i := range 50 {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "    def test_%02d(self):\n        self.assertEqual(sum(range(%d)), %d)\n", i, i, i*(i-1)/2)
		case 1:
			fmt.Fprintf(&b, "    def test_%02d(self):\n        self.assertIn(\"x%d\", {\"x%d\": 1})\n", i, i, i)
		case 2:
			fmt.Fprintf(&b, "    def test_%02d(self):\n        self.assertEqual(sorted([%d, 3, 1]), sorted([1, 3, %d]))\n", i, i, i)
		case 3:
			fmt.Fprintf(&b, "    def test_%02d(self):\n        with self.assertRaises(ZeroDivisionError):\n            %d / 0\n", i, i)
		case 4:
			fmt.Fprintf(&b, "    def test_%02d(self):\n        self.assertTrue(\"%d\".isdigit())\n", i, i)
		}
	}
	b.WriteString(`
suite = unittest.defaultTestLoader.loadTestsFromTestCase(T)
result = unittest.TextTestRunner(stream=io.StringIO()).run(suite)
assert result.wasSuccessful() and result.testsRun == 50, result
`)
	return b.String()
}()

// Peer is one way of running Python that the comparison measures. Run
// runs code once and reports the peak memory of what ran it, in bytes;
// what a run gets (a fresh instance or not) and what the memory figure
// counts is in Note.
type Peer struct {
	Name  string
	Note  string
	Run   func(ctx context.Context, code string) (peak int64, err error)
	Close func() error // may be nil
	// MaxRuns caps the runs per workload for a slow peer (0: no cap).
	MaxRuns int
}

// Skipped is a peer that was not measured, and why.
type Skipped struct {
	Name, Reason string
}

// PeerResult is one peer measured on one workload.
type PeerResult struct {
	Workload   string  `json:"workload"`
	Sandbox    string  `json:"sandbox"`
	Runs       int     `json:"runs"`
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
	RunsPerS   float64 `json:"runs_per_s"`
	PeakMemory int64   `json:"peak_memory_bytes"`
}

// MeasurePeer runs w runs times in a row on p (capped at p.MaxRuns) and
// reports latency percentiles, throughput (one run at a time) and the
// largest peak memory of any run. A failed run aborts the measurement.
func MeasurePeer(ctx context.Context, p Peer, w Workload, runs int) (PeerResult, error) {
	if p.MaxRuns > 0 {
		runs = min(runs, p.MaxRuns)
	}
	if runs < 1 {
		return PeerResult{}, errors.New("bench: need at least one run")
	}
	lat := make([]time.Duration, runs)
	var peak int64
	start := time.Now()
	for i := range runs {
		t := time.Now()
		m, err := p.Run(ctx, w.Code)
		lat[i] = time.Since(t)
		if err != nil {
			return PeerResult{}, fmt.Errorf("bench: %s on %s: %w", w.Name, p.Name, err)
		}
		peak = max(peak, m)
	}
	wall := time.Since(start)
	slices.Sort(lat)
	return PeerResult{
		Workload: w.Name, Sandbox: p.Name, Runs: runs,
		P50MS:      durMS(percentile(lat, 50)),
		P99MS:      durMS(percentile(lat, 99)),
		RunsPerS:   float64(runs) / wall.Seconds(),
		PeakMemory: peak,
	}, nil
}

func durMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// AirlockPeer runs each program in sb, a fresh instance per run; its peak
// memory is the guest's linear memory (Result.PeakMemory).
func AirlockPeer(name string, sb *airlock.Sandbox) Peer {
	note := "fresh instance per run, resumed from the snapshot; memory: guest linear memory"
	if !sb.Snapshots() {
		note = "fresh instance and interpreter start per run; memory: guest linear memory"
	}
	return Peer{
		Name: name,
		Note: note,
		Run: func(ctx context.Context, code string) (int64, error) {
			res, err := sb.Run(ctx, airlock.Request{Code: code, Limits: peerLimits})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			return res.PeakMemory, err
		},
	}
}

// peerLimits lift the default 10 s timeout: the comparison measures
// speed, and a loaded machine can push a fresh-interpreter run past it.
var peerLimits = airlock.Limits{Timeout: 5 * time.Minute}

// Ratio is v relative to base (v/base), 0 when base is not positive.
func Ratio(v, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return v / base
}

// MarkdownTable formats results as a markdown table, one row per workload
// and sandbox, each figure followed by its ratio to the same workload's
// figure on the baseline sandbox. Skipped peers follow as a list.
func MarkdownTable(results []PeerResult, baseline string, skipped []Skipped) string {
	base := map[string]PeerResult{}
	for _, r := range results {
		if r.Sandbox == baseline {
			base[r.Workload] = r
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| workload | sandbox | runs | p50 ms | p99 ms | runs/s | peak MiB |\n")
	fmt.Fprintf(&b, "|---|---|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		bl, ok := base[r.Workload]
		cell := func(v, bv float64, prec int) string {
			s := fmt.Sprintf("%.*f", prec, v)
			if ok {
				s += " (" + formatRatio(Ratio(v, bv)) + ")"
			}
			return s
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", r.Workload, r.Sandbox, r.Runs,
			cell(r.P50MS, bl.P50MS, precision(r.P50MS)),
			cell(r.P99MS, bl.P99MS, precision(r.P99MS)),
			cell(r.RunsPerS, bl.RunsPerS, precision(r.RunsPerS)),
			cell(mib(r.PeakMemory), mib(bl.PeakMemory), 1))
	}
	for _, s := range skipped {
		fmt.Fprintf(&b, "\n- %s: not measured: %s", s.Name, s.Reason)
	}
	if len(skipped) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// precision gives small figures two decimals and large ones none.
func precision(v float64) int {
	switch {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	default:
		return 2
	}
}

// formatRatio writes a ratio as ×N with two significant figures or so.
func formatRatio(r float64) string {
	switch {
	case r == 0:
		return "×–"
	case r >= 100:
		return fmt.Sprintf("×%.0f", r)
	case r >= 10:
		return fmt.Sprintf("×%.1f", r)
	case r >= 0.1:
		return fmt.Sprintf("×%.2f", r)
	default:
		return fmt.Sprintf("×%.2g", r)
	}
}
