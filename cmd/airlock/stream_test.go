package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// airlock run as a process shows a script's output as it is written,
// locally and with --server: the first line arrives while the script
// still sleeps, not when it ends.
func TestRunStreamsOutput(t *testing.T) {
	url := startServer(t, "")
	code := "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')"
	for _, args := range [][]string{{"run", "-c", code}, {"run", "--server", url, "-c", code}} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), envExecMain+"=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		var times []time.Time
		var got []string
		for lines.Scan() {
			got, times = append(got, lines.Text()), append(times, time.Now())
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.Join(got, ",") != "first,second" {
			t.Fatalf("%v: stdout %q", args, got)
		}
		if gap := times[1].Sub(times[0]); gap < time.Second {
			t.Errorf("%v: the lines came %v apart: the first waited for the end", args[:len(args)-2], gap)
		}
	}
}

// Usage errors are one line with a hint; Airlock's own failures exit 126,
// apart from any status the program could exit with.
func TestCLIConventions(t *testing.T) {
	code, stdout, stderr := cli(t, "", "run", "--timeout", "5", "-c", "pass")
	if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "a duration takes a unit, e.g. 5s") || !strings.Contains(stderr, "(see 'airlock run -h')") {
		t.Errorf("--timeout 5: %d %q", code, stderr)
	}
	if code, _, stderr := cli(t, "", "run", "-c", "pass", "--no-such-flag"); code != exitUsage || strings.Count(stderr, "\n") != 1 {
		t.Errorf("unknown flag: %d %q", code, stderr)
	}
	// -h still shows every flag, sizes in units.
	if code, _, stderr := cli(t, "", "run", "-h"); code != 0 || !strings.Contains(stderr, "(default 256MiB)") || !strings.Contains(stderr, "-memory") {
		t.Errorf("-h: %d %q", code, stderr)
	}
	t.Setenv("AIRLOCK_CACHE_DIR", t.TempDir()) // no build there
	t.Setenv("AIRLOCK_PYTHON", "")
	code, _, stderr = cli(t, "", "run", "-c", "pass")
	if code != exitAirlock || strings.Contains(stderr, "airlock: airlock:") || !strings.HasPrefix(stderr, "airlock: python: the own CPython 3.13 build is not in the cache directory") {
		t.Errorf("no build: %d %q", code, stderr)
	}
	if code, stdout, _ := cli(t, "", "--version"); code != 0 || !strings.HasPrefix(stdout, "airlock ") {
		t.Errorf("--version: %d %q", code, stdout)
	}
}
