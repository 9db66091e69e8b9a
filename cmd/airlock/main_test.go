package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// envExecMain makes the test binary run as the airlock command (for tests
// that need it as a separate process, such as an MCP client's server).
const envExecMain = "AIRLOCK_TEST_EXEC_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envExecMain) == "1" {
		os.Exit(command(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// Hold one Sandbox for the whole test process: every command's own
	// Sandbox then shares its compiled module instead of reloading it.
	sb, err := airlock.New(context.Background(), airlock.WithNotice(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "CLI tests need python.wasm (scripts/setup.sh):", err)
		os.Exit(1)
	}
	code := m.Run()
	sb.Close(context.Background())
	os.Exit(code)
}

func cli(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := dispatch(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunExitStatuses(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"ok", []string{"run", "-c", "print(1)"}, 0},
		{"program status", []string{"run", "-c", "import sys; sys.exit(42)"}, 42},
		{"status past 255", []string{"run", "-c", "import os; os._exit(256)"}, 1}, // not 256 & 0xff = 0
		{"exception", []string{"run", "-c", "1/0"}, 1},
		{"timeout", []string{"run", "--timeout", "1s", "-c", "while True: pass"}, exitTimeout},
		{"memory", []string{"run", "--memory", "32MiB", "-c", "x = bytearray(64 << 20)"}, exitLimit},
		{"output", []string{"run", "--output-limit", "100", "-c", "print('x' * 1000)"}, exitLimit},
		{"no program", []string{"run"}, exitUsage},
		// A file named on the command line that cannot be read is the
		// invocation's fault (python3 says so with 2 too), not a status
		// the program could have exited with.
		{"missing script", []string{"run", "/nonexistent/script.py"}, exitUsage},
		{"script is a directory", []string{"run", os.TempDir()}, exitUsage},
		{"missing --file", []string{"run", "--file", "/nonexistent/in.txt", "-c", "pass"}, exitUsage},
		{"missing --stdin", []string{"run", "--stdin", "/nonexistent/in.txt", "-c", "pass"}, exitUsage},
		{"repl: missing --load", []string{"repl", "--load", "/nonexistent/s.bin"}, exitUsage},
		{"repl: missing --file", []string{"repl", "--file", "/nonexistent/in.txt"}, exitUsage},
		{"both programs", []string{"run", "-c", "pass", "x.py"}, exitUsage},
		{"bad size", []string{"run", "--memory", "lots", "-c", "pass"}, exitUsage},
		{"bad flag", []string{"run", "--nope", "-c", "pass"}, exitUsage},
		{"unknown command", []string{"fly"}, exitUsage},
		{"no command", nil, exitUsage},
		{"unknown engine", []string{"run", "--engine", "v8", "-c", "pass"}, exitAirlock},
		{"fuel on wazero", []string{"run", "--engine", "wazero", "--fuel", "1000000", "-c", "pass"}, exitUsage},
	}
	if slices.Contains(airlock.AvailableEngines(), airlock.EngineWasmtime) {
		cases = append(cases, struct {
			name string
			args []string
			want int
		}{"fuel exhausted", []string{"run", "--engine", "wasmtime", "--fuel", "10000000", "--timeout", "1m", "-c", "while True: pass"}, exitLimit})
	} else {
		cases = append(cases, struct {
			name string
			args []string
			want int
		}{"wasmtime not built in", []string{"run", "--engine", "wasmtime", "-c", "pass"}, exitAirlock})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cli(t, "", tc.args...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.want, stderr)
			}
		})
	}
}

func TestRunJSONFilesAndStdin(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	os.WriteFile(in, []byte("from host"), 0o644)
	script := filepath.Join(dir, "main.py")
	os.WriteFile(script, []byte(`
import sys
data = open("in.txt").read() + "|" + open("/tmp/renamed.txt").read()
open("result.txt", "w").write(data + "|" + sys.stdin.read())
print("done")
`), 0o644)
	outDir := filepath.Join(dir, "out")
	code, stdout, stderr := cli(t, "piped",
		"run", script, "--file", in, "--file", in+":/tmp/renamed.txt", "--stdin", "-", "--out", outDir, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	var res struct {
		ExitCode   int     `json:"exit_code"`
		Stdout     string  `json:"stdout"`
		Stderr     string  `json:"stderr"`
		Error      *any    `json:"error"`
		DurationMS float64 `json:"duration_ms"`
		Files      []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
		} `json:"files"`
		Fuel   int64 `json:"fuel"`
		Python struct {
			Build   string `json:"build"`
			Version string `json:"version"`
			SHA256  string `json:"sha256"`
		} `json:"python"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if res.Stdout != "done\n" || res.Error != nil || res.DurationMS <= 0 {
		t.Fatalf("json = %+v", res)
	}
	if res.Python.Build != "own" || !strings.HasPrefix(res.Python.Version, "3.13.") || len(res.Python.SHA256) != 64 {
		t.Fatalf("json names the build %+v, want the own 3.13 one", res.Python)
	}
	// Fuel is metered, and reported, on wasmtime only.
	if metered := os.Getenv(envEngine) == airlock.EngineWasmtime; metered != (res.Fuel > 0) {
		t.Fatalf("fuel = %d on engine %q", res.Fuel, os.Getenv(envEngine))
	}
	if len(res.Files) != 1 || res.Files[0].Path != "/home/user/result.txt" || res.Files[0].Size != int64(len("from host|from host|piped")) {
		t.Fatalf("files = %+v", res.Files)
	}
	got, err := os.ReadFile(filepath.Join(outDir, "result.txt"))
	if err != nil || string(got) != "from host|from host|piped" {
		t.Fatalf("--out: %q %v", got, err)
	}
}

func TestRunJSONError(t *testing.T) {
	code, stdout, _ := cli(t, "", "run", "--json", "--timeout", "1s", "-c", "print('partial', flush=True)\nwhile True: pass")
	if code != exitTimeout {
		t.Fatalf("exit %d", code)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	e, _ := res["error"].(map[string]any)
	if e["kind"] != "timeout" || res["stdout"] != "partial\n" {
		t.Fatalf("json = %v", res)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "1KiB": 1024, "256MiB": 256 << 20, "1MB": 1e6, "2G": 2 << 30, "10B": 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "MiB", "1.5MiB", "99999999999999GiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := cli(t, "", "version")
	if code != 0 || !strings.Contains(stdout, "python 3.13.") || !strings.Contains(stdout, "\nbuild own build, CPython 3.13") ||
		!strings.Contains(stdout, "sha256 ") || !strings.Contains(stdout, "\nengine ") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestBenchJSON(t *testing.T) {
	code, stdout, stderr := cli(t, "", "bench", "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Workloads []struct {
			Name     string   `json:"name"`
			Mode     string   `json:"mode"`
			P50MS    float64  `json:"p50_ms"`
			P99MS    float64  `json:"p99_ms"`
			RunsPerS float64  `json:"runs_per_s"`
			StealPct *float64 `json:"steal_pct"`
		} `json:"workloads"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, w := range rep.Workloads {
		modes[w.Mode]++
	}
	if modes["snapshot"] == 0 || modes["snapshot"] != modes["fresh"] {
		t.Fatalf("want both modes side by side, got %v", modes)
	}
	for _, w := range rep.Workloads {
		if w.Name == "" || w.Mode == "" || w.P50MS <= 0 || w.P99MS < w.P50MS || w.RunsPerS <= 0 {
			t.Fatalf("bad row %+v", w)
		}
	}
}

// Each row says what share of the machine's CPU time the hypervisor took
// while it ran, where the kernel tells (Linux), so a p99 can be read
// against it.
func TestBenchReportsSteal(t *testing.T) {
	code, stdout, stderr := cli(t, "", "bench", "--mode", "snapshot", "--runs", "300", "--workloads", "pass", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Workloads []struct {
			Workers  int      `json:"workers"`
			StealPct *float64 `json:"steal_pct"`
		} `json:"workloads"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	_, procStat := readCPUTicks()
	if len(rep.Workloads) != 2 {
		t.Fatalf("%d rows, want pass on 1 and 2 workers", len(rep.Workloads))
	}
	for _, w := range rep.Workloads {
		if (w.StealPct != nil) != procStat || w.StealPct != nil && (*w.StealPct < 0 || *w.StealPct > 100) {
			t.Fatalf("%d workers: steal_pct %v (with /proc/stat: %v)", w.Workers, w.StealPct, procStat)
		}
	}
}

// --phases reports where resumed runs' time went, and every report says
// what the snapshot Sandboxes held idle after their runs.
func TestBenchPhasesJSON(t *testing.T) {
	code, stdout, stderr := cli(t, "", "bench", "--phases", "--mode", "snapshot", "--runs", "3", "--workloads", "pass,json_re", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	type phases struct {
		StartUS   float64 `json:"start_us"`
		RestoreUS float64 `json:"restore_us"`
		GuestUS   float64 `json:"guest_us"`
		CloseUS   float64 `json:"close_us"`
		HostUS    float64 `json:"host_us"`
		Pooled    float64 `json:"pooled"`
	}
	var rep struct {
		Workloads []struct {
			Name       string  `json:"name"`
			Engine     string  `json:"engine"`
			GOMAXPROCS int     `json:"gomaxprocs"`
			P99MS      float64 `json:"p99_ms"`
			Phases     *phases `json:"phases"`
			Tail       *phases `json:"tail"`
		} `json:"workloads"`
		Idle []struct {
			Mode         string  `json:"mode"`
			Regions      int     `json:"regions"`
			PrivateBytes []int64 `json:"private_bytes"`
		} `json:"idle"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range rep.Workloads {
		names = append(names, w.Name)
	}
	if want := []string{"pass", "pass", "json_re", "json_re"}; !slices.Equal(names, want) { // one and two workers
		t.Fatalf("workloads %q, want %q", names, want)
	}
	for _, w := range rep.Workloads {
		// One P more than the cores on wasmtime (procsFor).
		if want := defaultProcs + map[bool]int{true: 1}[w.Engine == airlock.EngineWasmtime]; os.Getenv("GOMAXPROCS") == "" && w.GOMAXPROCS != want {
			t.Fatalf("%s on %s: GOMAXPROCS %d, want %d", w.Name, w.Engine, w.GOMAXPROCS, want)
		}
		for _, p := range []*phases{w.Phases, w.Tail} {
			if p == nil || p.StartUS <= 0 || p.RestoreUS <= 0 || p.GuestUS <= 0 || p.CloseUS <= 0 || p.Pooled < 0 || p.Pooled > 1 {
				t.Fatalf("%s: phases %+v, tail %+v", w.Name, w.Phases, w.Tail)
			}
		}
		// With three runs the tail is the slowest alone: its phases add
		// up to its time, p99.
		tail := w.Tail
		if sum := tail.StartUS + tail.RestoreUS + tail.GuestUS + tail.CloseUS + tail.HostUS; math.Abs(sum-1000*w.P99MS) > 0.01 {
			t.Fatalf("%s: tail phases %+v add up to %.3f µs, not the p99 %.3f ms", w.Name, tail, sum, w.P99MS)
		}
	}
	// Both engines keep reset regions for the next runs.
	if len(rep.Idle) != 1 || rep.Idle[0].Mode != "snapshot" || rep.Idle[0].Regions == 0 ||
		(runtime.GOOS == "linux" && len(rep.Idle[0].PrivateBytes) != rep.Idle[0].Regions) {
		t.Fatalf("idle memory %+v", rep.Idle)
	}
}

// A workload bench does not have is a usage error that names those it has.
func TestBenchUnknownWorkload(t *testing.T) {
	code, _, stderr := cli(t, "", "bench", "--workloads", "pass,nosuch")
	if code != exitUsage || !strings.Contains(stderr, `no workload "nosuch"`) || !strings.Contains(stderr, "json_re") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// A file the host cannot write under --out (the guest picks its name,
// here one that makes the host path too long) is reported on stderr and
// costs neither the report nor the program's exit status.
func TestRunOutUnwritableFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := cli(t, "", "run", "--out", out, "--json", "-c", `
import os, sys
open('ok.txt', 'w').write('x')
n = 4096 - len('/home/user/')
parts = []
while n > 256:
    parts.append('d' * 254); n -= 255
parts.append('f' * n)
p = '/'.join(parts)
os.makedirs(os.path.dirname(p))
open(p, 'w').write('x')
print('hello')
sys.exit(3)`)
	var res map[string]any
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res["stdout"] != "hello\n" {
		t.Fatalf("--json report: %v %q", err, stdout)
	}
	if code != 3 || !strings.Contains(stderr, "not written") {
		t.Fatalf("exit %d, stderr %q; want the program's 3 and the file named", code, stderr)
	}
	if got, err := os.ReadFile(filepath.Join(out, "ok.txt")); err != nil || string(got) != "x" {
		t.Fatalf("the writable file: %q %v", got, err)
	}
}

// --value shows what a notebook would: displays' text, then the value;
// without it a script's last expression shows nothing.
func TestRunValue(t *testing.T) {
	code := "import airlock\nclass T:\n    def _repr_html_(self): return '<b>t</b>'\n    def __repr__(self): return 'T()'\nairlock.display(T())\nprint('out')\n6 * 7"
	status, stdout, stderr := cli(t, "", "run", "--value", "-c", code)
	if status != 0 || stdout != "out\nT()\n  (also text/html: see --json)\n42\n" {
		t.Fatalf("--value: %d %q %s", status, stdout, stderr)
	}
	if _, stdout, _ := cli(t, "", "run", "-c", "6 * 7"); stdout != "" {
		t.Fatalf("without --value: %q", stdout)
	}
	_, stdout, _ = cli(t, "", "run", "--json", "--value", "-c", "[1, 2]")
	var res struct{ Value string }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Value != "[1, 2]" {
		t.Fatalf("--json --value: %v %s", err, stdout)
	}
}

// Threads in a default `airlock run` (own build, wazero): a pool's
// results, and a deadlock's status and kind.
func TestRunThreads(t *testing.T) {
	if os.Getenv("AIRLOCK_ENGINE") == "wasmtime" || os.Getenv("AIRLOCK_PYTHON") == "npm" {
		t.Skip("threads run on the own build with wazero")
	}
	code, out, errOut := cli(t, "", "run", "-c", `
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(4) as ex:
    print(list(ex.map(lambda x: x + 1, range(5))))`)
	if code != 0 || out != "[1, 2, 3, 4, 5]\n" {
		t.Fatalf("status %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = cli(t, "", "run", "--threads", "2", "-c", `
import threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(1,), daemon=True).start()`)
	if code != 1 || !strings.Contains(errOut, "airlock: cannot start another thread") {
		t.Fatalf("--threads 2, three starts: status %d, stderr %q", code, errOut)
	}
	code, _, errOut = cli(t, "", "run", "-c", "import threading; threading.Lock().acquire(); l = threading.Lock(); l.acquire(); l.acquire()")
	if code != exitLimit || !strings.Contains(errOut, "airlock: deadlock:") {
		t.Fatalf("deadlock: status %d, stderr %q", code, errOut)
	}
}
