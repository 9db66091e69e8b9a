// Package chartsuites runs matplotlib's and Pillow's own test suites (the
// tests of the sdists the own build was made from) inside the sandbox, on
// the engine $AIRLOCK_ENGINE names, and holds them to expected.json: the
// counts per suite, and every test expected to fail there with the
// reason. A test that newly fails, or one expected to fail that passes,
// fails the Go test, so the file stays true. scripts/charts-tests.sh runs
// the same runner.py on native CPython with the same versions' wheels,
// which gives expected.json's native counts.
package chartsuites

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
)

func init() { testenv.Defaults = testenv.FromEnv }

//go:embed runner.py
var runnerPy string

//go:embed expected.json
var expectedJSON []byte

// mark starts the line on which runner.py prints its result.
const mark = "@@charts-result@@ "

// Counts are pytest's outcomes: passed, failed, error, skipped, xfailed,
// xpassed (absent is zero).
type Counts map[string]int

func (c Counts) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

func (c Counts) equal(o Counts) bool {
	for k, v := range c {
		if o[k] != v {
			return false
		}
	}
	for k, v := range o {
		if c[k] != v {
			return false
		}
	}
	return true
}

// Failing is a test expected to fail or error in the sandbox, and why.
type Failing struct {
	Test    string `json:"test"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
}

// Crash is a test (or node id prefix) left out in the sandbox because it
// ends the interpreter there, and why; natively it runs.
type Crash struct {
	Test   string `json:"test"`
	Reason string `json:"reason"`
}

// Suite is one suite's expectation.
type Suite struct {
	Suite string `json:"suite"`
	// Files are the test files run, relative to the suite's test folder.
	Files []string `json:"files"`
	// WasmtimeFiles, where set, are the files run on wasmtime: its
	// outcomes matched wazero's test for test over all of Files, so a
	// share of them catches an engine difference without doubling CI's
	// time (matplotlib's whole run takes ~9 min on either).
	WasmtimeFiles []string `json:"wasmtime_files,omitempty"`
	// Deselect are node ids (or prefixes) left out on both sides, with
	// why: what no WASI sandbox can do.
	Deselect map[string]string `json:"deselect"`
	Crash    []Crash           `json:"crash"`
	Native   Counts            `json:"native"`
	// Sandbox is the same on wazero and on wasmtime.
	Sandbox Counts    `json:"sandbox"`
	Failing []Failing `json:"failing"`
}

// Expected is expected.json.
type Expected struct {
	Matplotlib string  `json:"matplotlib"`
	Pillow     string  `json:"pillow"`
	Measured   string  `json:"measured"`
	Suites     []Suite `json:"suites"`
}

func loadExpected(t *testing.T) *Expected {
	t.Helper()
	var e Expected
	dec := json.NewDecoder(strings.NewReader(string(expectedJSON)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	return &e
}

// Result is what runner.py prints.
type Result struct {
	Suite    string            `json:"suite"`
	Counts   Counts            `json:"counts"`
	Seconds  float64           `json:"seconds"`
	Outcomes map[string]string `json:"outcomes"`
	Details  map[string]string `json:"details"`
}

// onEngine is s as run on engine: on wasmtime, its WasmtimeFiles alone,
// and only the failures expected among them. partial says so: the
// counts are then not held to Sandbox's, which are for all of Files.
func onEngine(s Suite, engine string) (_ Suite, partial bool) {
	if engine != "wasmtime" || len(s.WasmtimeFiles) == 0 {
		return s, false
	}
	prefix := "tests/"
	if s.Suite == "pillow" {
		prefix = "Tests/"
	}
	s.Files = s.WasmtimeFiles
	var failing []Failing
	for _, f := range s.Failing {
		file, _, _ := strings.Cut(f.Test, "::")
		if slices.Contains(s.Files, strings.TrimPrefix(file, prefix)) {
			failing = append(failing, f)
		}
	}
	s.Failing = failing
	return s, true
}

// runnerCode is runner.py configured for s in the sandbox: its tree is
// found on sys.path, and the tests that crash there are left out too.
func runnerCode(s Suite) string {
	deselect := map[string]string{}
	for k, v := range s.Deselect {
		deselect[k] = v
	}
	for _, c := range s.Crash {
		deselect[c.Test] = c.Reason
	}
	cfg, _ := json.Marshal(map[string]any{"suite": s.Suite, "tree": "", "files": s.Files, "deselect": deselect})
	return "CONFIG = " + string(cfg) + "\n" + runnerPy
}

func parseResult(stdout string) (*Result, error) {
	i := strings.LastIndex(stdout, "\n"+mark)
	if i < 0 {
		return nil, errors.New("runner.py printed no result line (the interpreter ended before the end of the suite)")
	}
	line, _, _ := strings.Cut(stdout[i+1+len(mark):], "\n")
	var r Result
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, fmt.Errorf("runner.py's result line: %w", err)
	}
	return &r, nil
}

// treeDir is the folder scripts/charts-tests.sh unpacked the tests into,
// named by the sha256 of the matplotlib and Pillow sdists the own build in
// cacheDir was made from (build.json records them), and the build's
// matplotlib and Pillow versions.
func treeDir(t *testing.T, cacheDir string) (dir, mpl, pil string) {
	t.Helper()
	meta, err := os.ReadFile(filepath.Join(python.OwnDir(cacheDir), python.OwnRecord))
	if err != nil {
		t.Fatalf("these tests need the own build: run scripts/setup.sh (%v)", err)
	}
	var rec struct {
		Packages map[string]string `json:"packages"`
		Sources  map[string]string `json:"sources_sha256"`
	}
	if err := json.Unmarshal(meta, &rec); err != nil {
		t.Fatalf("the own build's %s: %v", python.OwnRecord, err)
	}
	mpl, pil = rec.Packages["matplotlib"], rec.Packages["pillow"]
	mplSum, pilSum := rec.Sources["matplotlib-"+mpl+".tar.gz"], rec.Sources["pillow-"+pil+".tar.gz"]
	if len(mplSum) < 16 || len(pilSum) < 16 {
		t.Fatalf("the own build's %s names no matplotlib and Pillow sdists: a build without the chart stage", python.OwnRecord)
	}
	dir = filepath.Join(cacheDir, "charts-tests", "tree-"+mplSum[:16]+"-"+pilSum[:16])
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		t.Fatalf("the chart suites' tests are not unpacked: run scripts/charts-tests.sh prepare (scripts/setup.sh does): %v", err)
	}
	return dir, mpl, pil
}

func cacheDir(t *testing.T) string {
	t.Helper()
	if d := testenv.FromEnv().CacheDir; d != "" {
		return d
	}
	d, err := python.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testWheels are pytest and its dependencies, as scripts/fetch-wheels.sh
// test pins them (airlock test mounts the same).
func testWheels(t *testing.T, cacheDir string) []string {
	t.Helper()
	ws, _ := filepath.Glob(filepath.Join(cacheDir, "testwheels", "*.whl"))
	if len(ws) == 0 {
		t.Fatalf("no pytest wheels under %s: run scripts/setup.sh", filepath.Join(cacheDir, "testwheels"))
	}
	return ws
}

// sandboxLimits fit the suites with room: matplotlib's image comparisons
// keep figures and their renderings in memory and write result_images.
var sandboxLimits = airlock.Limits{
	Timeout: 30 * time.Minute,
	Memory:  3 << 30,
	Output:  64 << 20,
	FSBytes: 1 << 30,
	FSFiles: 100000,
}

// TestChartSuitesInSandbox runs each suite as users run code (Sandbox.Run,
// the tests a read-only package) on the engine $AIRLOCK_ENGINE names.
func TestChartSuitesInSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes per suite")
	}
	ctx := context.Background()
	exp := loadExpected(t)
	cache := cacheDir(t)
	dir, mpl, pil := treeDir(t, cache)
	if mpl != exp.Matplotlib || pil != exp.Pillow {
		t.Fatalf("the own build has matplotlib %s and Pillow %s; expected.json is for %s and %s: re-measure and update it", mpl, pil, exp.Matplotlib, exp.Pillow)
	}
	pkgs := append(testWheels(t, cache), dir)
	sb, err := airlock.New(ctx, airlock.WithPython("own"), airlock.WithNotice(os.Stderr))
	if err != nil {
		t.Fatalf("airlock.New: %v", err)
	}
	t.Cleanup(func() { sb.Close(ctx) })
	for _, s := range exp.Suites {
		s, partial := onEngine(s, sb.Engine())
		t.Run(s.Suite, func(t *testing.T) {
			res, err := sb.Run(ctx, airlock.Request{Code: runnerCode(s), Packages: pkgs, Limits: sandboxLimits})
			if res == nil {
				t.Fatalf("no result: %v", err)
			}
			if err != nil {
				t.Fatalf("%v\nstdout (end):\n%s\nstderr (end):\n%s", err, tail(res.Stdout, 2000), tail(res.Stderr, 4000))
			}
			r, err := parseResult(string(res.Stdout))
			if err != nil {
				t.Fatalf("exit %d: %v\nstdout (end):\n%s\nstderr (end):\n%s", res.ExitCode, err, tail(res.Stdout, 2000), tail(res.Stderr, 4000))
			}
			check(t, s, r, partial)
		})
	}
}

// check holds a suite's result to its expectation; partial: to its
// expected failures alone (onEngine).
func check(t *testing.T, s Suite, r *Result, partial bool) {
	t.Helper()
	t.Logf("%s: %v in %.0f s (in the guest)", s.Suite, r.Counts, r.Seconds)
	expected := map[string]Failing{}
	for _, f := range s.Failing {
		expected[f.Test] = f
	}
	ids := make([]string, 0, len(r.Outcomes))
	for id := range r.Outcomes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		got := r.Outcomes[id]
		if f, ok := expected[id]; ok && f.Outcome == got {
			continue
		}
		t.Errorf("%s: %s, not expected in expected.json:\n%s", id, got, r.Details[id])
	}
	for _, f := range s.Failing {
		got, ok := r.Outcomes[f.Test]
		if !ok {
			got = "passed, skipped or not run"
		}
		if got != f.Outcome {
			t.Errorf("%s: expected to be %s (%s) but was %s: update expected.json", f.Test, f.Outcome, f.Reason, got)
		}
	}
	if !partial && !r.Counts.equal(s.Sandbox) {
		t.Errorf("%s: %v, expected.json has %v", s.Suite, r.Counts, s.Sandbox)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}
