package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// machine describes this machine once, for the table's header: CPU model,
// cores, memory.
func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%s, %d cores, %.0f GiB", model, runtime.NumCPU(), float64(statusMemTotalKB())/(1<<20))
}

func statusMemTotalKB() int64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var n int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &n)
			return n
		}
	}
	return 0
}

// table renders the samples as Markdown: a header line (meta: machine,
// date, budgets), the load average's range, then one row a sample.
func table(samples []sample, meta string) string {
	var b strings.Builder
	lo, hi := 0.0, 0.0
	for i, s := range samples {
		if i == 0 || s.load1 < lo {
			lo = s.load1
		}
		if s.load1 > hi {
			hi = s.load1
		}
	}
	fmt.Fprintf(&b, "%s; machine load average (1 min) %.1f-%.1f over the run.\n\n", strings.TrimSpace(meta), lo, hi)
	b.WriteString("| minute | serve RSS MiB | fds | goroutines | live sessions | spilled (total) | cache MiB | ops | p50 ms | p99 ms | errors asked for | unexpected (total) | load | mcp RSS MiB | mcp ops |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "| %.1f | %.0f | %d | %d | %d | %d | %.0f | %d | %.1f | %.1f | %d | %d | %.1f | %.0f | %d |\n",
			s.minute, s.rssMiB, s.fds, s.goroutines, s.live, s.spilled, s.cacheMiB, s.ops, s.p50, s.p99, s.expected, s.unexpected, s.load1, s.mcpRSSMiB, s.mcpOps)
	}
	return b.String()
}

const (
	tableStart = "<!-- soak-table: written by go run ./scripts/soak -doc docs/soak.md -->"
	tableEnd   = "<!-- /soak-table -->"
)

// writeDoc replaces what lies between the table's markers in doc.
func writeDoc(doc, tbl string) error {
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	s := string(data)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q markers", doc, tableStart, tableEnd)
	}
	s = s[:i+len(tableStart)] + "\n" + tbl + s[j:]
	return os.WriteFile(doc, []byte(s), 0o644)
}
