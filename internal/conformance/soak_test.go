package airlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// envSoak sets the number of soak runs; unset, TestSoak makes
// soakShortRuns (CI's default path, about half a minute).
// AIRLOCK_SOAK=20000 go test -run TestSoak -v -timeout 1h .
const (
	envSoak       = "AIRLOCK_SOAK"
	soakShortRuns = 1000
)

// soakWorkload is one kind of run in the mix, with how to check it.
type soakWorkload struct {
	name   string
	every  int // run it when i%every == 0 (the first match wins)
	req    airlock.Request
	kind   airlock.Kind
	stdout string // exact, when kind is ""
}

// soakMix is ordered from rarest to most common: timeouts and OOMs by
// growth are the slow ones (a timeout costs its full 50 ms, filling the
// memory a few hundred ms at -O0); most OOMs are one large request.
var soakMix = []soakWorkload{
	{name: "oom-growth", every: 211, req: airlock.Request{Code: "x = []\nwhile True: x.append(bytearray(1 << 20))", Limits: airlock.Limits{Memory: 24 << 20}}, kind: airlock.KindMemoryLimit},
	{name: "timeout", every: 97, req: airlock.Request{Code: "while True: pass", Limits: airlock.Limits{Timeout: 50 * time.Millisecond}}, kind: airlock.KindTimeout},
	{name: "oom", every: 29, req: airlock.Request{Code: "x = bytearray(64 << 20)", Limits: airlock.Limits{Memory: 32 << 20}}, kind: airlock.KindMemoryLimit},
	{name: "output-limit", every: 23, req: airlock.Request{Code: "while True: print('x' * 100)", Limits: airlock.Limits{Output: 8 << 10}}, kind: airlock.KindOutputLimit},
	{name: "fs-quota", every: 19, req: airlock.Request{Code: "f = open('x', 'wb')\nwhile True: f.write(b'x' * 65536)", Limits: airlock.Limits{FSBytes: 1 << 20}}, kind: airlock.KindFSQuota},
	{name: "crash-exit", every: 11, req: airlock.Request{Code: "raise ValueError('soak')"}, stdout: ""},
	{name: "host-calls", every: 7, req: airlock.Request{Code: "import airlock\nprint(sum(airlock.tools.add(i, 1) for i in range(5)))"}, stdout: "15\n"},
	{name: "files", every: 5, req: airlock.Request{Code: "import os\nfor i in range(5): open(f'f{i}', 'w').write(str(i) * 100)\nprint(len(os.listdir('.')), open('in.txt').read())",
		Files: map[string][]byte{"in.txt": []byte("in")}}, stdout: "6 in\n"},
	{name: "json-re", every: 3, req: airlock.Request{Code: "import json, re\nd = [{'id': i, 'name': f'n{i}'} for i in range(200)]\ns = json.dumps(d)\nprint(len(re.findall(r'n\\d+', s)), len(json.loads(s)))"}, stdout: "200 200\n"},
	{name: "hello", every: 1, req: airlock.Request{Code: "print('hi')"}, stdout: "hi\n"},
}

// soakStats is one measurement of the process.
type soakStats struct {
	goroutines int
	fds        int
	rss        int64 // bytes
}

func measure(t *testing.T) soakStats {
	t.Helper()
	runtime.GC()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	var rss int64
	for line := range bytes.Lines(status) {
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return soakStats{goroutines: runtime.NumGoroutine(), fds: len(fds), rss: rss}
}

// TestSoak makes many consecutive runs of a mixed workload (including
// timeouts, OOMs and every other limit) on one Sandbox and checks that the
// process does not grow: goroutines and open descriptors return to their
// count after warm-up, resident memory stays within 10% of it.
func TestSoak(t *testing.T) {
	runs := soakShortRuns
	if v := os.Getenv(envSoak); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			t.Fatalf("$%s=%q: want a number of runs, at least 100", envSoak, v)
		}
		runs = n
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ctx := context.Background()
	s, err := airlock.New(ctx, append(suiteOptions(), airlock.WithHostFuncs(testTools...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if os.Getenv(envSoak) == "" && !s.Snapshots() {
		t.Skip("the short soak runs resumed from snapshots only (a fresh interpreter costs ~0.4 s a run)")
	}

	warmup := runs / 5
	var base, peak soakStats
	counts := map[string]int{}
	start := time.Now()
	for i := range runs {
		if i == warmup {
			base = measure(t)
			peak = base
		}
		var w *soakWorkload
		for j := range soakMix {
			if i%soakMix[j].every == 0 {
				w = &soakMix[j]
				break
			}
		}
		req := w.req
		if req.Limits.Timeout == 0 {
			req.Limits.Timeout = 30 * time.Second // only the timeout workload should time out
		}
		res, err := s.Run(ctx, req)
		counts[w.name]++
		if err := checkSoak(w, res, err); err != nil {
			t.Fatalf("run %d (%s): %v", i, w.name, err)
		}
		if i > warmup && i%(runs/10) == 0 {
			m := measure(t)
			peak.rss = max(peak.rss, m.rss)
			t.Logf("run %d: %d goroutines, %d fds, RSS %.1f MiB", i, m.goroutines, m.fds, float64(m.rss)/(1<<20))
		}
	}
	elapsed := time.Since(start)
	// Let the last run's goroutines (deadline timers, pool returns) finish.
	var end soakStats
	for range 50 {
		if end = measure(t); end.goroutines <= base.goroutines {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	peak.rss = max(peak.rss, end.rss)
	t.Logf("%d runs in %v (%.2f ms/run), mix %v", runs, elapsed.Round(time.Millisecond), float64(elapsed.Microseconds())/1000/float64(runs), counts)
	t.Logf("after warm-up (run %d): %d goroutines, %d fds, RSS %.1f MiB", warmup, base.goroutines, base.fds, float64(base.rss)/(1<<20))
	t.Logf("at the end: %d goroutines, %d fds, RSS %.1f MiB (peak %.1f MiB, %+.1f%%)", end.goroutines, end.fds,
		float64(end.rss)/(1<<20), float64(peak.rss)/(1<<20), 100*float64(end.rss-base.rss)/float64(base.rss))
	if end.goroutines > base.goroutines {
		t.Errorf("goroutines grew from %d to %d", base.goroutines, end.goroutines)
	}
	if end.fds > base.fds {
		t.Errorf("open descriptors grew from %d to %d", base.fds, end.fds)
	}
	if float64(end.rss) > 1.10*float64(base.rss) {
		t.Errorf("resident memory grew from %d to %d bytes (more than 10%%)", base.rss, end.rss)
	}
}

func checkSoak(w *soakWorkload, res *airlock.Result, err error) error {
	if res == nil {
		return fmt.Errorf("nil Result (err %v)", err)
	}
	if w.kind != "" {
		var ae *airlock.Error
		if !errors.As(err, &ae) || ae.Kind != w.kind {
			return fmt.Errorf("want %s, got err=%v exit=%d stderr=%.300s", w.kind, err, res.ExitCode, res.Stderr)
		}
		return nil
	}
	wantExit := 0
	if w.name == "crash-exit" {
		wantExit = 1
	}
	if err != nil || res.ExitCode != wantExit || string(res.Stdout) != w.stdout {
		return fmt.Errorf("err=%v exit=%d stdout=%q stderr=%.300s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return nil
}
