package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The Markdown form of a bench report (--markdown) is what
// docs/performance.md holds: the table, then one line saying when, where
// and with what command it was measured, so that a table and its
// circumstances travel together and a table is replaced whole, never
// edited by hand.

// writeMarkdown prints report's rows as a Markdown table and its caption.
func writeMarkdown(w io.Writer, report benchReport, args []string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "| workload | engine | mode | workers | p50 ms | p99 ms | runs/s | fuel | steal |")
	fmt.Fprintln(bw, "|---|---|---|--:|--:|--:|--:|--:|--:|")
	for _, r := range report.Workloads {
		fuel := ""
		if r.Fuel != 0 {
			fuel = strconv.FormatInt(r.Fuel, 10)
			if r.FuelVaries {
				fuel = "varies"
			}
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %d | %.3g | %.3g | %.4g | %s | %s |\n", mdCell(r.Name), r.Engine, r.Mode, r.Workers,
			r.P50MS, r.P99MS, r.RunsPerS, fuel, stealText(r.StealPct))
	}
	fmt.Fprintf(bw, "\n`airlock bench %s`, %d runs per row; %s; %s, %s.\n",
		strings.Join(args, " "), runsOf(report), report.Date, hostDescription(report), procsNote(report.Workloads))
	return bw.Flush()
}

// runsOf is the rows' run count (the same for every row of a report).
func runsOf(r benchReport) int {
	if len(r.Workloads) == 0 {
		return 0
	}
	return r.Workloads[0].Runs
}

// mdCell keeps a workload's name from breaking the table.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// hostDescription says where a report was measured: the CPU model, the
// CPUs, the memory, the OS and Go, and the load when it ended (Linux
// reads; elsewhere only what Go knows).
func hostDescription(r benchReport) string {
	parts := []string{}
	if model := cpuModel(); model != "" {
		parts = append(parts, model)
	}
	parts = append(parts, fmt.Sprintf("%d CPUs", r.CPUs))
	if gib := memGiB(); gib > 0 {
		parts = append(parts, fmt.Sprintf("%d GiB", gib))
	}
	if name := osName(); name != "" {
		parts = append(parts, name)
	}
	parts = append(parts, r.GoVersion)
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(load)); len(f) >= 3 {
			parts = append(parts, "load "+strings.Join(f[:3], " "))
		}
	}
	return strings.Join(parts, ", ")
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memGiB() int64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return (kb + 1<<19) >> 20
			}
		}
	}
	return 0
}

func osName() string {
	data, _ := os.ReadFile("/etc/os-release")
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
