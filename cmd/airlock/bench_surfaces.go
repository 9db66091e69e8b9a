package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/bench"
	"github.com/airlock-sandbox/airlock/server"
	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// surfaceRow is one workload through one surface, in `airlock bench
// --surfaces --json`; the keys are stable.
type surfaceRow struct {
	Workload string `json:"workload"`
	Surface  string `json:"surface"`
	Runs     int    `json:"runs"`
	// Round trip as the caller sees it: Sandbox.Run, an HTTP request, an
	// MCP tool call, a whole process.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	// RunP50MS is the run's own time as the surface reports it
	// (Result.Duration, the server's duration_ms), 0 where it reports none.
	RunP50MS float64 `json:"run_p50_ms,omitempty"`
	// ToNative is the ratio of P50MS to native CPython's (a new process
	// each run), 0 without it.
	ToNative float64 `json:"to_native,omitempty"`
}

type surfaceReport struct {
	Date  string       `json:"date"`
	CPUs  int          `json:"cpus"`
	Load  string       `json:"load,omitempty"`
	Rows  []surfaceRow `json:"rows"`
	Notes []string     `json:"notes,omitempty"`
}

// surface runs a workload once the way one kind of caller does and
// returns the run's own time where the surface reports it.
type surface struct {
	name   string
	run    func(ctx context.Context, w bench.SurfaceWorkload) (time.Duration, error)
	native bool
}

// cmdBenchSurfaces measures each surface workload through every surface
// users call, side by side in one process: the Go API, HTTP (`airlock
// serve`'s handler on loopback, rich output on as its default), MCP (the
// SDK's client over streamable HTTP on loopback), the CLI through a warm
// server, and native CPython in a new process.
func cmdBenchSurfaces(ctx context.Context, common *commonFlags, runs int, nativePython string, only []string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	report := surfaceReport{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU()}
	sb, err := common.sandbox(ctx, stderr)
	if err != nil {
		return 1, err
	}
	defer sb.Close(context.Background())
	surfaces := []surface{goSurface(sb)}

	httpRun, stopHTTP, err := httpSurface(sb)
	if err != nil {
		return 1, err
	}
	defer stopHTTP()
	surfaces = append(surfaces, surface{name: "http", run: httpRun})

	mcpRun, stopMCP, err := mcpSurface(ctx, sb)
	if err != nil {
		return 1, err
	}
	defer stopMCP()
	surfaces = append(surfaces, surface{name: "mcp", run: mcpRun})

	work, err := os.MkdirTemp("", "airlock-bench-surfaces-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(work)
	cli, stopWarm, note, err := cliSurface(ctx, common, work)
	switch {
	case err != nil:
		return 1, err
	case cli != nil:
		defer stopWarm()
		surfaces = append(surfaces, *cli)
	default:
		report.Notes = append(report.Notes, note)
	}
	if native, err := nativeSurface(ctx, nativePython, work); err == nil {
		surfaces = append(surfaces, native)
	} else {
		report.Notes = append(report.Notes, err.Error())
	}

	for _, w := range bench.SurfaceWorkloads {
		if only != nil && !slices.Contains(only, w.Name) {
			continue
		}
		if err := measureSurfaces(ctx, surfaces, w, runs, &report); err != nil {
			return 1, err
		}
	}
	report.Load = loadAvg()
	if asJSON {
		return 0, writeReport(stdout, report)
	}
	return 0, printSurfaces(stdout, report, sb.Engine())
}

// measureSurfaces times runs of w through each surface, after an untimed
// one, and adds their rows (and notes) to report.
func measureSurfaces(ctx context.Context, surfaces []surface, w bench.SurfaceWorkload, runs int, report *surfaceReport) error {
	// One untimed run through each: images, imports and connections
	// made once, as a server that has been up for a while has them. A
	// native interpreter without the workload's packages gets no row.
	surfaces = slices.Clone(surfaces)
	for i := 0; i < len(surfaces); i++ {
		s := surfaces[i]
		if _, err := s.run(ctx, w); err != nil {
			if s.native && strings.Contains(err.Error(), "ModuleNotFoundError") {
				report.Notes = append(report.Notes, fmt.Sprintf("%s: no native row (%s lacks a package it imports)", w.Name, s.name))
				surfaces = slices.Delete(surfaces, i, i+1)
				i--
				continue
			}
			return fmt.Errorf("%s through %s: %w", w.Name, s.name, err)
		}
	}
	times := make([][]time.Duration, len(surfaces))
	runTimes := make([][]time.Duration, len(surfaces))
	// In blocks of consecutive runs, as a server meets a stream of
	// requests; the blocks take turns, so that drift over the
	// measurement spreads over every surface, and a surface follows a
	// native process (which leaves the caches cold) once a block,
	// not once a run.
	for done := 0; done < runs; done += surfaceBlock {
		for _, i := range surfaceOrder(len(surfaces), done/surfaceBlock) {
			s := surfaces[i]
			for range min(surfaceBlock, runs-done) {
				start := time.Now()
				d, err := s.run(ctx, w)
				if err != nil {
					return fmt.Errorf("%s through %s: %w", w.Name, s.name, err)
				}
				times[i] = append(times[i], time.Since(start))
				runTimes[i] = append(runTimes[i], d)
			}
		}
	}
	native := slices.IndexFunc(surfaces, func(s surface) bool { return s.native })
	for i, s := range surfaces {
		sorted := slices.Sorted(slices.Values(times[i]))
		row := surfaceRow{Workload: w.Name, Surface: s.name, Runs: runs, P50MS: ms(bench.Median(sorted)),
			P99MS: ms(sorted[(len(sorted)*99-1)/100])}
		if slices.ContainsFunc(runTimes[i], func(d time.Duration) bool { return d > 0 }) {
			row.RunP50MS = ms(bench.Median(runTimes[i]))
		}
		if native >= 0 && !s.native {
			row.ToNative = row.P50MS / ms(bench.Median(times[native]))
		}
		report.Rows = append(report.Rows, row)
	}
	return nil
}

// printSurfaces prints report as a table, with the engine the sandbox ran on.
func printSurfaces(stdout io.Writer, report surfaceReport, engine string) error {
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tsurface\truns\tp50 ms\tp99 ms\trun p50 ms\tto native\t")
	for _, r := range report.Rows {
		run, ratio := "-", "-"
		if r.RunP50MS > 0 {
			run = fmt.Sprintf("%.2f", r.RunP50MS)
		}
		if r.ToNative > 0 {
			ratio = fmt.Sprintf("%.3f", r.ToNative)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%s\t%s\t\n", r.Workload, r.Surface, r.Runs, r.P50MS, r.P99MS, run, ratio)
	}
	fmt.Fprintf(tw, "\nround trips as each caller sees them, medians, in blocks of %d runs taking turns; run p50: the run's own time as the surface reports it; %s, %d CPUs, load %s, %s\n",
		surfaceBlock, report.Date, report.CPUs, report.Load, engine)
	for _, n := range report.Notes {
		fmt.Fprintln(tw, n)
	}
	return tw.Flush()
}

// goSurface runs workloads with Sandbox.Run.
func goSurface(sb *airlock.Sandbox) surface {
	return surface{name: "go", run: func(ctx context.Context, w bench.SurfaceWorkload) (time.Duration, error) {
		res, err := sb.Run(ctx, airlock.Request{Code: w.Code, Files: w.Files})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return 0, err
		}
		return res.Duration, nil
	}}
}

// nativeSurface runs workloads with python (the interpreter it
// resolves to) in a new process each, in work; its error is the report's
// note on why there is no native row.
func nativeSurface(ctx context.Context, python, work string) (surface, error) {
	path, _, err := bench.ResolvePython(ctx, python)
	if err != nil {
		return surface{}, fmt.Errorf("no native row: %w", err)
	}
	return surface{name: "native " + python, native: true,
		run: func(ctx context.Context, w bench.SurfaceWorkload) (time.Duration, error) {
			return 0, runNative(ctx, path, work, w)
		}}, nil
}

// surfaceBlock is how many runs a surface makes in a row.
const surfaceBlock = 10

// surfaceOrder is the order of n surfaces' blocks in round r: rotated, so
// each starts a round in turn.
func surfaceOrder(n, r int) []int {
	order := make([]int, n)
	for k := range order {
		order[k] = (r + k) % n
	}
	return order
}

// httpSurface serves `airlock serve`'s handler on a loopback port and
// runs workloads through the server's own client, with the request's
// defaults (rich output on).
func httpSurface(sb *airlock.Sandbox) (func(context.Context, bench.SurfaceWorkload) (time.Duration, error), func(), error) {
	srv, err := server.New(server.Config{Sandbox: sb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	go srv.Serve(ln)
	client := &client.Client{URL: "http://" + ln.Addr().String()}
	run := func(ctx context.Context, w bench.SurfaceWorkload) (time.Duration, error) {
		files := wire.InputFiles{}
		for name, data := range w.Files {
			files[name] = data
		}
		res, err := client.Run(ctx, wire.RunRequest{Code: w.Code, Files: files})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return 0, err
		}
		return time.Duration(res.DurationMS * float64(time.Millisecond)), nil
	}
	return run, func() { srv.Close() }, nil
}

// mcpSurface serves the MCP server over streamable HTTP on a loopback
// port and calls run_python with the MCP SDK's client.
func mcpSurface(ctx context.Context, sb *airlock.Sandbox) (func(context.Context, bench.SurfaceWorkload) (time.Duration, error), func(), error) {
	srv, err := server.NewMCP(server.MCPConfig{Sandbox: sb})
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	hs := &http.Server{Handler: server.MCPHandler(srv, server.MCPHTTPConfig{}), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "airlock-bench", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String()}, nil)
	if err != nil {
		hs.Close()
		return nil, nil, fmt.Errorf("mcp client: %w", err)
	}
	run := func(ctx context.Context, w bench.SurfaceWorkload) (time.Duration, error) {
		args := map[string]any{"code": w.Code}
		if len(w.Files) > 0 {
			b64 := map[string]string{}
			for name, data := range w.Files {
				b64[name] = base64.StdEncoding.EncodeToString(data)
			}
			args["files_base64"] = b64
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: args})
		if err != nil {
			return 0, err
		}
		if res.IsError {
			var text []string
			for _, c := range res.Content {
				if t, ok := c.(*mcp.TextContent); ok {
					text = append(text, t.Text)
				}
			}
			return 0, errors.New(strings.Join(text, "\n"))
		}
		return 0, nil
	}
	return run, func() { cs.Close(); hs.Close() }, nil
}

// cliSurface runs `airlock run FILE --file ...` as a whole process through
// a warm server, started by a first run and stopped by stop unless it was
// there before; nil and why when there can be none.
func cliSurface(ctx context.Context, common *commonFlags, work string) (_ *surface, stop func(), note string, _ error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, "no CLI row: " + err.Error(), nil
	}
	t, err := warmTargetFor(common, defaultWarmIdle, nil, nil)
	if err != nil {
		return nil, nil, "no CLI row (no warm server): " + warmReason(common), nil
	}
	flags := common.childArgs()
	run := func(ctx context.Context, w bench.SurfaceWorkload) (time.Duration, error) {
		script, err := writeWorkload(work, w)
		if err != nil {
			return 0, err
		}
		argv := append(append([]string{"run"}, flags...), script)
		for name := range w.Files {
			argv = append(argv, "--file", filepath.Join(work, name))
		}
		cmd := exec.CommandContext(ctx, exe, argv...)
		cmd.Env = append(os.Environ(), envWarm+"=on")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%w: %s", err, out)
		}
		return 0, nil
	}
	wasThere := t.present()
	if _, err := run(ctx, bench.SurfaceWorkloads[0]); err != nil {
		return nil, nil, "", err
	}
	for deadline := time.Now().Add(2 * time.Minute); !t.present(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, "", fmt.Errorf("bench --surfaces: no warm server came up at %s (see its log beside it)", t.sock())
		}
	}
	stop = func() {}
	if !wasThere {
		stop = func() { t.stop() }
	}
	return &surface{name: "cli (warm)", run: run}, stop, "", nil
}

// runNative runs w with python in a new process, in work, where its
// files are.
func runNative(ctx context.Context, python, work string, w bench.SurfaceWorkload) error {
	script, err := writeWorkload(work, w)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, python, script)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// writeWorkload writes w's program and files into work, once.
func writeWorkload(work string, w bench.SurfaceWorkload) (string, error) {
	script := filepath.Join(work, w.Name+".py")
	if _, err := os.Stat(script); err == nil {
		return script, nil
	}
	for name, data := range w.Files {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return script, os.WriteFile(script, []byte(w.Code), 0o644)
}
