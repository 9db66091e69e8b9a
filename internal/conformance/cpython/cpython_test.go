// Package cpython runs CPython's own regression tests (Lib/test from the
// Debian source tarball the own build was made from) inside the sandbox,
// and, under -tags airlock_wasmtime, on wasmtime's own WASI, and holds
// both to expected.json: per module unittest's counts, and every test
// expected to fail with the reason. A test that newly fails, or one
// expected to fail that passes, fails the Go test, so the file stays true.
package cpython

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
)

//go:embed runner.py
var runnerPy string

//go:embed expected.json
var expectedJSON []byte

// mark starts the line on which runner.py prints its result.
const mark = "@@cpython-result@@ "

// Counts are unittest's: tests run, failures, errors, skips.
type Counts struct {
	Run      int `json:"run"`
	Failures int `json:"failures"`
	Errors   int `json:"errors"`
	Skipped  int `json:"skipped"`
}

func (c Counts) String() string {
	return fmt.Sprintf("run %d, failures %d, errors %d, skipped %d", c.Run, c.Failures, c.Errors, c.Skipped)
}

// Failing is a test expected to fail: where ("airlock", "wasmtime"),
// how (unittest's "fail" or "error"), and why.
type Failing struct {
	Test    string   `json:"test"`
	Outcome string   `json:"outcome"`
	On      []string `json:"on"`
	Reason  string   `json:"reason"`
}

// Module is one test module's expectation.
type Module struct {
	Module string `json:"module"`
	// Tests, when set, is the subset run (unittest names); empty is the
	// whole module.
	Tests    []string  `json:"tests,omitempty"`
	Airlock  Counts    `json:"airlock"`
	Wasmtime Counts    `json:"wasmtime"`
	Failing  []Failing `json:"failing"`
	// threads tells runner.py that the guest starts threads
	// (TestCPythonThreadsInSandbox); expected.json's modules run without.
	threads bool
}

// Expected is expected.json.
type Expected struct {
	CPython  string   `json:"cpython"`
	Measured string   `json:"measured"`
	Modules  []Module `json:"modules"`
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

// Result is what runner.py prints for one module.
type Result struct {
	Counts
	Module   string            `json:"module"`
	Seconds  float64           `json:"seconds"`
	Outcomes map[string]string `json:"outcomes"`
	Details  map[string]string `json:"details"`
}

// runnerCode is runner.py configured for m, with the working directory
// the tests write their files in.
func runnerCode(m Module, cwd string) string {
	// Strings and lists only (no null): the JSON is a Python literal too.
	tests := m.Tests
	if tests == nil {
		tests = []string{}
	}
	cfg := map[string]any{"module": m.Module, "tests": tests, "cwd": cwd}
	if m.threads {
		cfg["threads"] = "yes"
	}
	text, _ := json.Marshal(cfg)
	return "CONFIG = " + string(text) + "\n" + runnerPy
}

// parseResult finds runner.py's line in stdout.
func parseResult(stdout string) (*Result, error) {
	i := strings.LastIndex(stdout, "\n"+mark)
	if i < 0 {
		return nil, errors.New("runner.py printed no result line (it died before the end of the module)")
	}
	line, _, _ := strings.Cut(stdout[i+1+len(mark):], "\n")
	var r Result
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, fmt.Errorf("runner.py's result line: %w", err)
	}
	return &r, nil
}

// testsDir is the Lib/test that scripts/cpython-tests.sh extracted from
// the tarball the own build in cacheDir was made from (build.json has its
// sha256), and the build's CPython version.
func testsDir(t *testing.T, cacheDir string) (dir, version string) {
	t.Helper()
	meta, err := os.ReadFile(filepath.Join(python.OwnDir(cacheDir), python.OwnRecord))
	if err != nil {
		t.Fatalf("these tests need the own build: run scripts/setup.sh (%v)", err)
	}
	var rec struct {
		PythonVersion string            `json:"python_version"`
		Sources       map[string]string `json:"sources_sha256"`
	}
	if err := json.Unmarshal(meta, &rec); err != nil {
		t.Fatalf("the own build's %s: %v", python.OwnRecord, err)
	}
	var sha string
	for name, sum := range rec.Sources {
		if strings.HasPrefix(name, "python3.13_") && strings.Contains(name, ".orig.tar.") && !strings.HasSuffix(name, ".asc") {
			sha = sum
		}
	}
	if sha == "" {
		t.Fatalf("the own build's %s names no python3.13 source tarball", python.OwnRecord)
	}
	dir = filepath.Join(cacheDir, "cpython-tests", sha, "test")
	if _, err := os.Stat(filepath.Join(dir, "__init__.py")); err != nil {
		t.Fatalf("CPython's Lib/test is not extracted: run scripts/cpython-tests.sh (scripts/setup.sh does): %v", err)
	}
	return dir, rec.PythonVersion
}

// cacheDir is the one the airlock command would use.
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

// check holds one module's result to its expectation on engine ("airlock"
// or "wasmtime").
func check(t *testing.T, engine string, m Module, want Counts, r *Result) {
	t.Helper()
	t.Logf("%s on %s: %v in %.1f s (in the guest)", m.Module, engine, r.Counts, r.Seconds)
	expected := map[string]Failing{}
	for _, f := range m.Failing {
		for _, on := range f.On {
			if on == engine {
				expected[f.Test] = f
			}
		}
	}
	ids := make([]string, 0, len(r.Outcomes))
	for id := range r.Outcomes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		got := r.Outcomes[id]
		if got != "fail" && got != "error" && got != "xpass" {
			continue
		}
		if f, ok := expected[id]; ok && f.Outcome == got {
			continue
		}
		t.Errorf("%s: %s on %s, not expected in expected.json:\n%s", id, got, engine, r.Details[id])
	}
	for _, f := range m.Failing {
		if _, ok := expected[f.Test]; !ok {
			continue
		}
		got, ran := r.Outcomes[f.Test]
		switch {
		case !ran:
			t.Errorf("%s: expected to %s on %s (%s) but did not run: update expected.json", f.Test, f.Outcome, engine, f.Reason)
		case got != f.Outcome:
			t.Errorf("%s: expected to %s on %s (%s) but was %s: update expected.json", f.Test, f.Outcome, engine, f.Reason, got)
		}
	}
	if r.Counts != want {
		t.Errorf("%s on %s: %v, expected.json has %v", m.Module, engine, r.Counts, want)
	}
}
