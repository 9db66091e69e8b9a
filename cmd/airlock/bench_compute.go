package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/bench"
	"github.com/airlock-sandbox/airlock/python"
)

// computeOptions are the flags of `airlock bench --compute`.
type computeOptions struct {
	common       commonFlags
	reps         int
	asJSON       bool
	nativePython string
	only         []string // nil: every workload
}

type computeRunner struct {
	name, note string
	run        bench.Runner
}

type computeReport struct {
	Date    string                `json:"date"`
	Machine string                `json:"machine"`
	Load    string                `json:"load"`
	Native  string                `json:"native"`
	Notes   map[string]string     `json:"notes"`
	Skipped []bench.Skipped       `json:"skipped"`
	Results []bench.ComputeResult `json:"results"`
	// GeoMean is each Airlock runner's geometric-mean ratio to native.
	GeoMean map[string]float64 `json:"geomean_ratio"`
}

// computeSelected says whether w runs: every default workload when only
// is nil, the named ones otherwise; numpy's only when named
// (bench.NumpyComputeWorkloads says why).
func computeSelected(w bench.ComputeWorkload, only []string) bool {
	if only != nil {
		return slices.Contains(only, w.Name)
	}
	return !slices.Contains(bench.NumpyComputeWorkloads, w)
}

// cmdBenchCompute times bench.ComputeWorkloads inside the interpreter
// (start-up excluded) natively and in Airlock on every python.wasm there
// is: the own build (snapshot and fresh interpreter) and the npm fallback.
// It prints each workload's median and its ratio to native, and the
// geometric mean of the ratios per runner.
func cmdBenchCompute(ctx context.Context, o computeOptions, stdout, stderr io.Writer) (int, error) {
	cache := o.common.cacheDir
	if cache == "" {
		var err error
		if cache, err = python.CacheDir(); err != nil {
			return 1, err
		}
	}
	report := computeReport{
		Date:    time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Machine: machine(),
		Load:    loadAvg(),
		Notes:   map[string]string{},
		GeoMean: map[string]float64{},
	}
	runners, closeAll, err := computeRunners(ctx, o, cache, &report, stderr)
	defer closeAll()
	if err != nil {
		return 1, err
	}
	for _, w := range slices.Concat(bench.ComputeWorkloads, bench.NumpyComputeWorkloads) {
		if !computeSelected(w, o.only) {
			continue
		}
		for _, r := range runners {
			fmt.Fprintf(stderr, "airlock: compute %s on %s\n", w.Name, r.name)
			res, err := bench.MeasureCompute(ctx, r.name, r.run, w, o.reps)
			if err != nil {
				return 1, err
			}
			report.Results = append(report.Results, res)
		}
	}
	report.Load += " → " + loadAvg()
	base := summarizeCompute(&report, runners)
	if o.asJSON {
		return 0, writeReport(stdout, report)
	}
	if err := printCompute(stdout, report, runners, base, o.reps); err != nil {
		return 1, err
	}
	return 0, nil
}

// computeRunners are native CPython (o.nativePython) and a Sandbox per
// build compared: the one o names, else the own build resumed and fresh
// and the npm fallback when it is in cache (else it is in
// report.Skipped). closeAll closes the sandboxes made, also on error.
func computeRunners(ctx context.Context, o computeOptions, cache string, report *computeReport, stderr io.Writer) (runners []computeRunner, closeAll func(), err error) {
	var sandboxes []*airlock.Sandbox
	closeAll = func() {
		for _, sb := range slices.Backward(sandboxes) {
			sb.Close(context.Background())
		}
	}
	native, version, err := bench.NativeRunner(ctx, o.nativePython)
	if err != nil {
		return nil, closeAll, err
	}
	report.Native = "native " + o.nativePython + " " + version
	runners = []computeRunner{{name: "native", note: "CPython " + version + ", `" + o.nativePython + " -c`", run: native}}

	type build struct {
		name, sel string
		snapshots bool
	}
	var builds []build
	if o.common.python != "" {
		builds = append(builds, build{"airlock", o.common.python, true})
	} else {
		builds = append(builds, build{"own", python.SelectOwn, true}, build{"own fresh", python.SelectOwn, false})
		// The fallback is compared when it is there; it is fetched only
		// on request (`airlock setup --python npm`). It has no numpy.
		numpy := slices.ContainsFunc(bench.NumpyComputeWorkloads, func(w bench.ComputeWorkload) bool { return computeSelected(w, o.only) })
		if numpy {
			report.Skipped = append(report.Skipped, bench.Skipped{Name: "npm fallback", Reason: "no numpy in that build"})
		} else if _, err := python.Load(python.SelectNPM, cache); err == nil {
			builds = append(builds, build{"npm fallback", python.SelectNPM, true})
		} else {
			report.Skipped = append(report.Skipped, bench.Skipped{Name: "npm fallback", Reason: err.Error()})
		}
	}
	for _, b := range builds {
		c := o.common
		c.python = b.sel
		opts := []airlock.Option{}
		if !b.snapshots {
			opts = append(opts, airlock.WithSnapshots(false))
		}
		sb, err := c.sandbox(ctx, stderr, opts...)
		if err != nil {
			return nil, closeAll, fmt.Errorf("%s: %w", b.name, err)
		}
		sandboxes = append(sandboxes, sb)
		mode := "fresh interpreter per run"
		if sb.Snapshots() {
			mode = "resumed from the snapshot (asyncified module)"
		}
		mode += " on " + sb.Engine()
		if sb.Engine() == airlock.EngineWasmtime && !sb.FuelMetering() {
			mode += " without fuel metering"
		}
		runners = append(runners, computeRunner{name: b.name, note: sb.Info().Description + "; " + mode, run: bench.SandboxRunner(sb)})
	}
	return runners, closeAll, nil
}

// summarizeCompute fills report's notes and each runner's geometric mean
// of its ratios to native, and returns native's median by workload.
func summarizeCompute(report *computeReport, runners []computeRunner) map[string]float64 {
	base := map[string]float64{}
	ratios := map[string][]float64{}
	for _, r := range report.Results {
		if r.Runner == "native" {
			base[r.Workload] = r.MedianMS
		}
	}
	for _, r := range report.Results {
		if r.Runner != "native" {
			ratios[r.Runner] = append(ratios[r.Runner], bench.Ratio(r.MedianMS, base[r.Workload]))
		}
	}
	for _, r := range runners {
		report.Notes[r.name] = r.note
		if r.name != "native" {
			report.GeoMean[r.name] = bench.GeoMean(ratios[r.name])
		}
	}
	return base
}

// printCompute prints report as a table of medians and ratios to native,
// with a line per runner saying what it ran.
func printCompute(stdout io.Writer, report computeReport, runners []computeRunner, base map[string]float64, reps int) error {
	fmt.Fprintf(stdout, "%s; %s; load average (1 min) %s; median of %d timed repetitions (after one untimed), in ms; ratio (×) to native.\n\n",
		report.Date, report.Machine, report.Load, reps)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\t")
	for _, r := range runners {
		fmt.Fprintf(tw, "%s\t", r.name)
	}
	fmt.Fprintln(tw)
	byKey := map[[2]string]bench.ComputeResult{}
	var order []string
	for _, res := range report.Results {
		if _, ok := base[res.Workload]; ok && res.Runner == "native" {
			order = append(order, res.Workload)
		}
		byKey[[2]string{res.Workload, res.Runner}] = res
	}
	for _, w := range order {
		fmt.Fprintf(tw, "%s\t", w)
		for _, r := range runners {
			res := byKey[[2]string{w, r.name}]
			if r.name == "native" {
				fmt.Fprintf(tw, "%.1f\t", res.MedianMS)
			} else {
				fmt.Fprintf(tw, "%.1f (×%.2f)\t", res.MedianMS, bench.Ratio(res.MedianMS, base[w]))
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "geometric mean\t\t")
	for _, r := range runners[1:] {
		fmt.Fprintf(tw, "×%.2f\t", report.GeoMean[r.name])
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	for _, r := range runners {
		fmt.Fprintf(stdout, "- %s: %s\n", r.name, r.note)
	}
	for _, s := range report.Skipped {
		fmt.Fprintf(stdout, "- %s: not measured: %s\n", s.Name, s.Reason)
	}
	return nil
}
