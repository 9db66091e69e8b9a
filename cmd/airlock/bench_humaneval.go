package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/airlock-sandbox/airlock/bench"
	"github.com/airlock-sandbox/airlock/python"
)

// humanEvalRow is one surface's rounds over all HumanEval problems, in
// `airlock bench --humaneval --json`; the keys are stable.
type humanEvalRow struct {
	Surface string `json:"surface"`
	Rounds  int    `json:"rounds"`
	// Passed is how many problems passed in every round.
	Passed int `json:"passed"`
	// WallMS is the median over rounds of the time all problems took with
	// Workers at once.
	WallMS float64 `json:"wall_ms"`
	// ProblemP50MS is the median time of one problem as its caller waits.
	ProblemP50MS float64 `json:"problem_p50_ms"`
	// Speedup is native's WallMS over this row's, 0 without a native row.
	Speedup  float64  `json:"speedup_over_native,omitempty"`
	Failures []string `json:"failures,omitempty"`
}

type humanEvalReport struct {
	Date     string         `json:"date"`
	CPUs     int            `json:"cpus"`
	Load     string         `json:"load,omitempty"`
	Workers  int            `json:"workers"`
	Problems int            `json:"problems"`
	Rows     []humanEvalRow `json:"rows"`
	Notes    []string       `json:"notes,omitempty"`
}

// cmdBenchHumanEval runs HumanEval's canonical solutions with their
// tests, each problem a fresh run, with workers problems at a time: through
// `airlock serve`'s handler on loopback (one request each, as an agent
// harness calls it), the Go API, and natively as one python process each.
// The surfaces take turns, a whole round each; the passes and the wall
// time of every round count.
func cmdBenchHumanEval(ctx context.Context, common *commonFlags, rounds, workers int, nativePython string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	cache := common.cacheDir
	if cache == "" {
		var err error
		if cache, err = python.CacheDir(); err != nil {
			return 1, err
		}
	}
	dir := bench.HumanEvalDir(cache)
	if err := bench.FetchHumanEval(ctx, dir, nativePython, stderr); err != nil {
		return 1, err
	}
	problems, err := bench.LoadHumanEval(dir)
	if err != nil {
		return 1, err
	}
	sb, err := common.sandbox(ctx, stderr)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	httpRun, stopHTTP, err := httpSurface(sb)
	if err != nil {
		return 1, err
	}
	defer stopHTTP()
	surfaces := []surface{
		{name: "http (serve)", run: httpRun},
		goSurface(sb),
	}
	report := humanEvalReport{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Workers: workers, Problems: len(problems)}
	work, err := os.MkdirTemp("", "airlock-bench-humaneval-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(work)
	if native, err := nativeSurface(ctx, nativePython, work); err == nil {
		surfaces = append(surfaces, native)
	} else {
		report.Notes = append(report.Notes, err.Error())
	}
	workloads := make([]bench.SurfaceWorkload, len(problems))
	for i, p := range problems {
		workloads[i] = bench.SurfaceWorkload{Name: strings.ReplaceAll(p.TaskID, "/", "_"), Code: p.Program()}
	}

	if err := measureHumanEval(ctx, surfaces, problems, workloads, rounds, workers, &report); err != nil {
		return 1, err
	}
	report.Load = loadAvg()
	code := 0
	for _, r := range report.Rows {
		if r.Passed != len(problems) {
			code = 1 // a canonical solution that fails is a fault, not a figure
		}
	}
	if asJSON {
		return code, writeReport(stdout, report)
	}
	if err := printHumanEval(stdout, report, rounds, sb.Engine()); err != nil {
		return code, err
	}
	return code, nil
}

// measureHumanEval runs every problem through each surface, workers at a
// time, in rounds taking turns after an untimed one, and adds a row per
// surface to report.
func measureHumanEval(ctx context.Context, surfaces []surface, problems []bench.HumanEvalProblem, workloads []bench.SurfaceWorkload, rounds, workers int, report *humanEvalReport) error {
	// One untimed problem through each: images and connections made once.
	for _, s := range surfaces {
		if _, err := s.run(ctx, workloads[0]); err != nil {
			return fmt.Errorf("%s through %s: %w", problems[0].TaskID, s.name, err)
		}
	}
	walls := make([][]time.Duration, len(surfaces))
	each := make([][]time.Duration, len(surfaces))
	failed := make([]map[string]string, len(surfaces))
	for i := range failed {
		failed[i] = map[string]string{}
	}
	for r := range rounds {
		for _, i := range surfaceOrder(len(surfaces), r) {
			wall, times, fails := humanEvalRound(ctx, surfaces[i], workloads, workers)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			walls[i] = append(walls[i], wall)
			each[i] = append(each[i], times...)
			for name, why := range fails {
				failed[i][name] = why
			}
		}
	}
	native := slices.IndexFunc(surfaces, func(s surface) bool { return s.native })
	for i, s := range surfaces {
		row := humanEvalRow{Surface: s.name, Rounds: rounds, Passed: len(problems) - len(failed[i]),
			WallMS: ms(bench.Median(walls[i])), ProblemP50MS: ms(bench.Median(each[i]))}
		if native >= 0 && !s.native {
			row.Speedup = ms(bench.Median(walls[native])) / row.WallMS
		}
		for _, name := range slices.Sorted(maps.Keys(failed[i])) {
			row.Failures = append(row.Failures, name+": "+failed[i][name])
		}
		report.Rows = append(report.Rows, row)
	}
	return nil
}

// printHumanEval prints report as a table, its failures and notes.
func printHumanEval(stdout io.Writer, report humanEvalReport, rounds int, engine string) error {
	problems := report.Problems
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "surface\tpassed\twall ms\tproblem p50 ms\tspeedup over native\t")
	for _, r := range report.Rows {
		speedup := "-"
		if r.Speedup > 0 {
			speedup = fmt.Sprintf("%.1fx", r.Speedup)
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%.0f\t%.2f\t%s\t\n", r.Surface, r.Passed, problems, r.WallMS, r.ProblemP50MS, speedup)
	}
	fmt.Fprintf(tw, "\nHumanEval %s's %d canonical solutions with their tests, one fresh run each, %d at a time; wall: median of %d rounds taking turns; %s, %d CPUs, load %s, %s\n",
		bench.HumanEvalVersion, problems, report.Workers, rounds, report.Date, report.CPUs, report.Load, engine)
	for _, r := range report.Rows {
		for _, f := range r.Failures {
			fmt.Fprintf(tw, "FAILED through %s: %s\n", r.Surface, f)
		}
	}
	for _, n := range report.Notes {
		fmt.Fprintln(tw, n)
	}
	return tw.Flush()
}

// humanEvalRound runs every workload through s, workers at a time, and
// returns the round's wall time, each run's time, and the failures by name.
func humanEvalRound(ctx context.Context, s surface, workloads []bench.SurfaceWorkload, workers int) (time.Duration, []time.Duration, map[string]string) {
	var (
		mu    sync.Mutex
		times []time.Duration
		fails = map[string]string{}
		next  = make(chan bench.SurfaceWorkload)
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for w := range next {
				t0 := time.Now()
				_, err := s.run(ctx, w)
				d := time.Since(t0)
				mu.Lock()
				times = append(times, d)
				if err != nil {
					fails[w.Name] = lastLine(err.Error())
				}
				mu.Unlock()
			}
		})
	}
	for _, w := range workloads {
		if ctx.Err() != nil {
			break
		}
		next <- w
	}
	close(next)
	wg.Wait()
	return time.Since(start), times, fails
}

// lastLine is s's last line, a traceback's exception, for a one-line
// failure summary.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
