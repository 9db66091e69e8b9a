//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// warmEnv is the environment of CLI processes that use warm servers,
// their sockets in a directory of the test's own.
func warmEnv(t *testing.T, idle string) []string {
	t.Helper()
	rt, err := os.MkdirTemp("", "rt") // short: a socket's path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	// wazero's: wasmtime runs stay in their own process (and CI runs this
	// suite with $AIRLOCK_ENGINE=wasmtime too).
	env := []string{"XDG_RUNTIME_DIR=" + rt, envWarm + "=" + idle, envEngine + "=" + airlock.EngineWazero}
	t.Cleanup(func() { cliProcess(t, env, "", "warm", "stop") })
	return env
}

// cliProcess runs the test binary as the airlock command, a process of its
// own as a user's shell would start it.
func cliProcess(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), envExecMain+"=1"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("airlock %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

var warmRuns = regexp.MustCompile(`runs (\d+)`)

// warmServed is how many runs the one warm server of env answered, -1
// while there is none.
func warmServed(t *testing.T, env []string) int {
	t.Helper()
	_, out, _ := cliProcess(t, env, "", "warm", "status")
	m := warmRuns.FindAllStringSubmatch(out, -1)
	switch len(m) {
	case 0:
		return -1
	case 1:
		n, _ := strconv.Atoi(m[0][1])
		return n
	}
	t.Fatalf("more than one warm server:\n%s", out)
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestWarmServerTakesLaterRuns(t *testing.T) {
	env := warmEnv(t, "5m")
	if code, out, errOut := cliProcess(t, env, "", "run", "-c", "print(6*7)"); code != 0 || out != "42\n" {
		t.Fatalf("first run: status %d, stdout %q, stderr %q", code, out, errOut)
	}
	waitUntil(t, "a warm server", func() bool { return warmServed(t, env) == 0 })

	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("shout"), 0o644); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "out")
	// What a seeded run prints in a process of its own, for the same run
	// on the server to match.
	seeded := []string{"--deterministic", "--seed", "7", "-c", "import random, time; print(random.random(), time.time())"}
	_, seededOut, _ := cliProcess(t, append(env, envWarm+"=off"), "", append([]string{"run"}, seeded...)...)
	if seededOut == "" {
		t.Fatal("a seeded run in-process printed nothing")
	}
	cases := []struct {
		name       string
		stdin      string
		args       []string
		status     int
		out, inErr string
	}{
		{"exit status and both streams", "", []string{"-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"}, 3, "out\n", "err\n"},
		{"an exception", "", []string{"-c", "1/0"}, 1, "", "ZeroDivisionError"},
		{"timeout", "", []string{"--timeout", "1s", "-c", "while True: pass"}, exitTimeout, "", "timeout"},
		{"memory limit", "", []string{"--memory", "32MiB", "-c", "x = bytearray(64 << 20)"}, exitLimit, "", "memory"},
		{"stdin", "from the pipe", []string{"--stdin", "-", "-c", "import sys; print(sys.stdin.read().upper())"}, 0, "FROM THE PIPE\n", ""},
		{"files in and out", "", []string{"--file", in, "--out", outDir, "-c",
			"open('/home/user/loud.txt', 'w').write(open('/home/user/in.txt').read().upper())"}, 0, "", ""},
		{"deterministic", "", seeded, 0, seededOut, ""},
	}
	for i, c := range cases {
		code, out, errOut := cliProcess(t, env, c.stdin, append([]string{"run"}, c.args...)...)
		if code != c.status || out != c.out || !strings.Contains(errOut, c.inErr) {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want %d, %q, stderr with %q", c.name, code, out, errOut, c.status, c.out, c.inErr)
		}
		if n := warmServed(t, env); n != i+1 {
			t.Fatalf("%s: the warm server answered %d runs, want %d", c.name, n, i+1)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outDir, "loud.txt")); err != nil || string(b) != "SHOUT" {
		t.Errorf("--out through the warm server: %q, %v", b, err)
	}
	code, out, _ := cliProcess(t, env, "", "run", "--json", "-c", "print(1)")
	var res struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Python   struct {
			Build string `json:"build"`
		} `json:"python"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Stdout != "1\n" || res.Python.Build != "own" {
		t.Errorf("--json: status %d, %v, %+v", code, err, res)
	}
	served := len(cases) + 1
	if n := warmServed(t, env); n != served {
		t.Fatalf("after --json: %d runs served, want %d", n, served)
	}

	// A package is the invoking process's to load: that run is its own.
	pkg := filepath.Join(dir, "pkg")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "localmod.py"), []byte("X = 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cliProcess(t, env, "", "run", "--package", pkg, "-c", "import localmod; print(localmod.X)"); code != 0 || out != "5\n" {
		t.Errorf("--package: status %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := warmServed(t, env); n != served {
		t.Errorf("a --package run went to the warm server (%d runs served, want %d)", n, served)
	}
	// As does any run with the variable off.
	if code, out, _ := cliProcess(t, append(env, envWarm+"=off"), "", "run", "-c", "print(2)"); code != 0 || out != "2\n" {
		t.Errorf("%s=off: status %d, stdout %q", envWarm, code, out)
	}
	if n := warmServed(t, env); n != served {
		t.Errorf("a run with %s=off went to the warm server (%d runs served, want %d)", envWarm, n, served)
	}
}

func TestWarmServerExitsIdle(t *testing.T) {
	env := warmEnv(t, "2s")
	if code, _, errOut := cliProcess(t, env, "", "run", "-c", "pass"); code != 0 {
		t.Fatalf("first run: status %d, %s", code, errOut)
	}
	waitUntil(t, "a warm server", func() bool { return warmServed(t, env) == 0 })
	start := time.Now()
	waitUntil(t, "the idle server to exit", func() bool { return warmServed(t, env) == -1 })
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("the server idle for 2 s exited after %v", waited)
	}
	dir := filepath.Join(envValue(env, "XDG_RUNTIME_DIR"), "airlock")
	socks, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	if len(socks) != 0 {
		t.Errorf("the server left its socket: %v", socks)
	}
	// warm stop sweeps the lock and the log it leaves.
	if code, _, errOut := cliProcess(t, env, "", "warm", "stop"); code != 0 {
		t.Fatalf("warm stop: %d %s", code, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("after warm stop: %v", left)
	}
}

// A changed python.wasm is for a new server to load: the old one answers
// no more runs (they run in-process) and exits.
func TestWarmServerLeavesWhenTheBuildChanges(t *testing.T) {
	env := warmEnv(t, "5m")
	if code, _, errOut := cliProcess(t, env, "", "run", "-c", "pass"); code != 0 {
		t.Fatalf("first run: status %d, %s", code, errOut)
	}
	waitUntil(t, "a warm server", func() bool { return warmServed(t, env) == 0 })
	sb, err := airlock.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wasm := sb.Info().Path
	sb.Close(context.Background())
	fi, err := os.Stat(wasm)
	if err != nil {
		t.Fatal(err)
	}
	// The same times again: only the change time moves, as with any write.
	if err := os.Chtimes(wasm, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cliProcess(t, env, "", "run", "-c", "print('still runs')"); code != 0 || out != "still runs\n" {
		t.Fatalf("after the change: status %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The stale server exits, and a run after that starts a new one (the
	// run above did, unless the old one still held the lock), which serves
	// from the changed build.
	waitUntil(t, "a fresh warm server", func() bool {
		n := warmServed(t, env)
		if n == -1 {
			cliProcess(t, env, "", "run", "-c", "pass")
		}
		return n == 0
	})
	if code, out, _ := cliProcess(t, env, "", "run", "-c", "print(3)"); code != 0 || out != "3\n" {
		t.Fatalf("status %d, stdout %q", code, out)
	}
	if n := warmServed(t, env); n != 1 {
		t.Errorf("the new server answered %d runs, want 1", n)
	}
}

func TestWarmDirMustBePrivate(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	dir := filepath.Join(rt, "airlock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := warmDir(); err == nil {
		t.Error("a directory others may enter is taken for warm servers' sockets")
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := warmDir(); err != nil {
		t.Errorf("a private directory: %v", err)
	}
	os.Remove(dir)
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := warmDir(); err == nil {
		t.Error("a symbolic link is taken for warm servers' directory")
	}
}

func TestGoRunBinariesGetNoWarmServer(t *testing.T) {
	for exe, want := range map[string]bool{
		"/tmp/go-build200154856/b001/exe/airlock":  true, // go run's
		"/tmp/go-build200154856/b001/airlock.test": false,
		"/usr/local/bin/airlock":                   false,
		"/home/me/exe/airlock":                     false,
	} {
		if got := goRunBinary(exe); got != want {
			t.Errorf("goRunBinary(%q) = %v", exe, got)
		}
	}
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

func TestWarmSettingMustParse(t *testing.T) {
	t.Setenv(envWarm, "soon")
	code, _, errOut := cli(t, "", "run", "-c", "pass")
	if code != exitUsage || !strings.Contains(errOut, "$AIRLOCK_WARM=\"soon\"") {
		t.Fatalf("status %d, stderr %q", code, errOut)
	}
}

// airlock test's runs go to a warm server too, one whose Sandbox has
// pytest in its image, and report as the suite's own process would.
func TestWarmServerTakesTestSuites(t *testing.T) {
	needTestWheels(t)
	env := warmEnv(t, "5m")
	suite := writeSuite(t, map[string]string{
		"conftest.py":   "import pytest\n@pytest.fixture\ndef answer():\n    return 42\n",
		"test_a.py":     "def test_fixture(answer): assert answer == 42\ndef test_fail(): assert 1 + 1 == 3\n",
		"sub/test_b.py": "def test_b(): pass\n",
	})
	const summary = "2 passed, 1 failed, 0 errors, 0 skipped (3 tests) in "
	if code, out, errOut := cliProcess(t, env, "", "test", suite); code != 1 || !strings.Contains(out, summary) {
		t.Fatalf("first suite: status %d\n%s\n%s", code, out, errOut)
	}
	waitUntil(t, "a warm server", func() bool { return warmServed(t, env) == 0 })
	if code, out, errOut := cliProcess(t, env, "", "test", suite); code != 1 || !strings.Contains(out, summary) || !strings.Contains(out, "assert (1 + 1) == 3") {
		t.Fatalf("warm suite: status %d\n%s\n%s", code, out, errOut)
	}
	if n := warmServed(t, env); n != 1 {
		t.Fatalf("the warm server answered %d runs, want 1", n)
	}
	junit := filepath.Join(t.TempDir(), "report.xml")
	code, out, errOut := cliProcess(t, env, "", "test", "--isolate", "--junit", junit, suite)
	if code != 1 || !strings.Contains(out, summary) {
		t.Fatalf("--isolate: status %d\n%s\n%s", code, out, errOut)
	}
	if n := warmServed(t, env); n != 3 {
		t.Fatalf("after --isolate over two files: %d runs served, want 3", n)
	}
	xml, err := os.ReadFile(strings.TrimSuffix(junit, ".xml") + "-test_a.xml")
	if err != nil || !strings.Contains(string(xml), `tests="2"`) {
		t.Fatalf("--junit through the warm server: %v\n%.300s", err, xml)
	}
}

// bench --cli times whole processes: through a warm server (which must
// have answered every timed run), in a process of its own, and native.
func TestBenchCLI(t *testing.T) {
	rt, err := os.MkdirTemp("", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	t.Setenv("XDG_RUNTIME_DIR", rt)
	t.Setenv(envExecMain, "1") // bench's processes are this test binary, as the airlock command
	code, out, errOut := cli(t, "", "bench", "--cli", "--engine", airlock.EngineWazero, "--runs", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep cliReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{"airlock run, warm server", "airlock run, own process"}
	if _, err := exec.LookPath("python3"); err == nil {
		want = append(want, "python3 -c pass")
	}
	if len(rep.Rows) != len(want) {
		t.Fatalf("rows %+v, want %v", rep.Rows, want)
	}
	for i, r := range rep.Rows {
		if r.Name != want[i] || r.Runs != 2 || r.MinMS <= 0 || r.MedianMS < r.MinMS || r.MaxMS < r.MedianMS || r.PeakRSS <= 0 {
			t.Errorf("row %d: %+v, want %q", i, r, want[i])
		}
	}
	// Each process's own peak (it reports it), not this one's, which a
	// child's rusage counts in: a warm run's client holds no build.
	if warm, own := rep.Rows[0].PeakRSS, rep.Rows[1].PeakRSS; warm >= own {
		t.Errorf("peak RSS through the warm server %d bytes, in a process of its own %d", warm, own)
	}
	if s := rep.Rows[0].Served; s == nil || *s != 2 {
		t.Errorf("the warm server answered %v of the 2 timed runs", s)
	}
	if servers, err := warmServers(); err != nil || len(servers) != 0 {
		t.Errorf("bench left warm servers running: %v %v", servers, err)
	}
}
