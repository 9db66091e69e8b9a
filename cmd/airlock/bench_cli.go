package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlock-sandbox/airlock/bench"
)

// cliRow is one way of running `pass` as a whole process, in `airlock
// bench --cli --json`; the keys are stable.
type cliRow struct {
	Name string `json:"name"`
	Runs int    `json:"runs"`
	// Wall time and peak RSS of the whole process, medians and ranges.
	MedianMS float64 `json:"median_ms"`
	MinMS    float64 `json:"min_ms"`
	MaxMS    float64 `json:"max_ms"`
	PeakRSS  int64   `json:"peak_rss_bytes"`
	// ToNative is the median of the paired ratios to native CPython's
	// time, 0 without it.
	ToNative float64 `json:"to_native,omitempty"`
	// Served is how many runs the warm server answered (warm row only).
	Served *int `json:"served,omitempty"`
}

type cliReport struct {
	Date  string   `json:"date"`
	CPUs  int      `json:"cpus"`
	Rows  []cliRow `json:"rows"`
	Notes []string `json:"notes,omitempty"`
}

// cliVariant is a command line measured as a whole process: through the
// warm server, the native interpreter, or neither.
type cliVariant struct {
	name         string
	argv         []string
	env          []string
	warm, native bool
}

// cmdBenchCLI times `airlock run -c pass` as whole processes, side by side
// and alternating: through a warm server, in a process of its own, and
// native CPython's `-c pass`.
func cmdBenchCLI(ctx context.Context, common *commonFlags, runs int, nativePython string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 1, err
	}
	flags := common.childArgs()
	run := append(append([]string{exe, "run"}, flags...), "-c", "pass")
	report := cliReport{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU()}
	peak := bench.EnvReportPeak + "=1"
	variants := []cliVariant{{name: "airlock run, own process", argv: run, env: []string{envWarm + "=off", peak}}}

	// The warm server: started by a first run, measured once it serves.
	warmEnv := []string{envWarm + "=on", peak}
	t, err := warmTargetFor(common, defaultWarmIdle, nil, nil)
	switch {
	case err != nil:
		report.Notes = append(report.Notes, "no warm server: "+warmReason(common))
	default:
		wasThere := t.present()
		if err := startWarm(ctx, t, run, warmEnv); err != nil {
			return 1, err
		}
		if !wasThere {
			defer t.stop()
		}
		variants = append([]cliVariant{{name: "airlock run, warm server", argv: run, env: warmEnv, warm: true}}, variants...)
	}
	if path, _, err := bench.ResolvePython(ctx, nativePython); err == nil {
		variants = append(variants, cliVariant{name: nativePython + " -c pass", argv: []string{path, "-c", bench.PythonPeakPrefix + "pass"}, native: true})
		report.Notes = append(report.Notes, nativePython+": "+path)
	} else {
		report.Notes = append(report.Notes, fmt.Sprintf("no %s on $PATH: no native row", nativePython))
	}
	served0 := -1
	if t != nil {
		served0, _ = t.runsServed(ctx)
	}
	times := make([][]time.Duration, len(variants))
	rss := make([][]int64, len(variants))
	for range runs {
		for i, v := range variants {
			d, peak, err := timeProcess(ctx, v)
			if err != nil {
				return 1, err
			}
			times[i], rss[i] = append(times[i], d), append(rss[i], peak)
		}
	}
	native := slices.IndexFunc(variants, func(v cliVariant) bool { return v.native })
	for i, v := range variants {
		peaks := make([]float64, runs)
		for r, b := range rss[i] {
			peaks[r] = float64(b)
		}
		row := cliRow{Name: v.name, Runs: runs, MedianMS: ms(bench.Median(times[i])), MinMS: ms(slices.Min(times[i])),
			MaxMS: ms(slices.Max(times[i])), PeakRSS: int64(bench.MedianOf(peaks))}
		if native >= 0 && !v.native {
			ratios := make([]float64, runs)
			for r := range runs {
				ratios[r] = float64(times[i][r]) / float64(times[native][r])
			}
			row.ToNative = bench.MedianOf(ratios)
		}
		if v.warm {
			if n, err := t.runsServed(ctx); err == nil && served0 >= 0 {
				served := n - served0
				row.Served = &served
			}
		}
		report.Rows = append(report.Rows, row)
	}
	if asJSON {
		return 0, writeReport(stdout, report)
	}
	return 0, printCLIReport(stdout, report)
}

// startWarm runs run once with warmEnv, which starts the warm server of t,
// and waits (up to two minutes) until it serves.
func startWarm(ctx context.Context, t *warmTarget, run, warmEnv []string) error {
	if _, _, err := timeProcess(ctx, cliVariant{argv: run, env: warmEnv}); err != nil {
		return err
	}
	for deadline := time.Now().Add(2 * time.Minute); !t.present(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench --cli: no warm server came up at %s (see its log beside it)", t.sock())
		}
	}
	return nil
}

// printCLIReport prints report as a table with its notes.
func printCLIReport(stdout io.Writer, report cliReport) error {
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "command\truns\tmedian ms\tmin-max ms\tpeak RSS MB\tto native\tserved\t")
	for _, r := range report.Rows {
		ratio, served := "-", "-"
		if r.ToNative > 0 {
			ratio = fmt.Sprintf("%.2f", r.ToNative)
		}
		if r.Served != nil {
			served = fmt.Sprint(*r.Served)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f-%.1f\t%.0f\t%s\t%s\t\n", r.Name, r.Runs, r.MedianMS, r.MinMS, r.MaxMS, float64(r.PeakRSS)/1e6, ratio, served)
	}
	fmt.Fprintf(tw, "\nwhole processes of `-c pass`, alternating, medians; %s, %d CPUs\n", report.Date, report.CPUs)
	for _, n := range report.Notes {
		fmt.Fprintln(tw, n)
	}
	return tw.Flush()
}

// childArgs are the flags that make an airlock process this one starts
// use the same build, cache and engine.
func (c *commonFlags) childArgs() []string {
	var flags []string
	if c.python != "" {
		flags = append(flags, "--python", c.python)
	}
	if c.cacheDir != "" {
		flags = append(flags, "--cache-dir", c.cacheDir)
	}
	if c.engine != "" {
		flags = append(flags, "--engine", c.engine)
	}
	return flags
}

// timeProcess runs v to its end and returns its wall time and its peak RSS
// as it reported it (bench.ProcessPeak).
func timeProcess(ctx context.Context, v cliVariant) (time.Duration, int64, error) {
	cmd := exec.CommandContext(ctx, v.argv[0], v.argv[1:]...)
	cmd.Env = append(os.Environ(), v.env...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("bench --cli: %s: %w: %s", strings.Join(v.argv, " "), err, errOut.String())
	}
	return d, bench.ProcessPeak([]byte(errOut.String()), cmd.ProcessState), nil
}

// warmReason says why common's runs get no warm server.
func warmReason(common *commonFlags) string {
	if e := common.engine; e != "" && e != "wazero" {
		return "the " + e + " engine runs in its own process"
	}
	return "off on this system (Linux only; not for go run binaries; a private runtime directory needed)"
}
