package main

import (
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// bench --markdown prints the latency report as the Markdown table
// docs/performance.md holds, one row per workload and worker count, and a
// line saying the command, the date and the machine it ran on.
func TestBenchMarkdown(t *testing.T) {
	// wazero named, as the rows say it: CI runs this suite on wasmtime too.
	args := []string{"bench", "--markdown", "--engine", airlock.EngineWazero, "--mode", "snapshot", "--runs", "3", "--workloads", "pass,hello"}
	code, stdout, stderr := cli(t, "", args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "| workload | engine | mode | workers |") || !strings.HasPrefix(lines[1], "|---|") {
		t.Fatalf("no Markdown table:\n%s", stdout)
	}
	row := regexp.MustCompile(`^\| (pass|print\("hi"\)|[^|]+) \| wazero \| snapshot \| [12] \| [0-9.e+-]+ \| [0-9.e+-]+ \| [0-9.e+-]+ \| [^|]* \| [^|]+ \|$`)
	rows := 0
	for _, l := range lines[2:] {
		if l == "" {
			break
		}
		if !row.MatchString(l) {
			t.Fatalf("row %q does not match %s", l, row)
		}
		rows++
	}
	if rows != 4 { // two workloads, one and two workers
		t.Fatalf("%d rows, want 4:\n%s", rows, stdout)
	}
	caption := lines[len(lines)-1]
	for _, want := range []string{"`airlock " + strings.Join(args, " ") + "`", "3 runs per row", runtime.Version(), "CPUs", "GOMAXPROCS"} {
		if !strings.Contains(caption, want) {
			t.Errorf("caption %q lacks %q", caption, want)
		}
	}
	if !regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).MatchString(caption) {
		t.Errorf("caption %q has no date", caption)
	}
	for _, bad := range [][]string{{"--markdown", "--json"}, {"--markdown", "--sessions"}, {"--markdown", "--peers"}} {
		if code, _, _ := cli(t, "", append([]string{"bench"}, bad...)...); code != exitUsage {
			t.Errorf("bench %v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}
