package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
	"github.com/airlock-sandbox/airlock/server/client"
)

// testRunner runs unittest discovery inside the sandbox and prints one
// summary line the host parses (on stdout, after the runner's report on
// stderr).
const testRunner = `import sys, unittest
suite = unittest.TestLoader().discover(".", pattern=sys.argv_pattern, top_level_dir=".")
r = unittest.TextTestRunner(stream=sys.stderr, verbosity=sys.argv_verbosity).run(suite)
print("AIRLOCK-TEST ran=%d failures=%d errors=%d skipped=%d expected_failures=%d unexpected_successes=%d" % (
    r.testsRun, len(r.failures), len(r.errors), len(r.skipped), len(r.expectedFailures), len(r.unexpectedSuccesses)))
sys.exit(0 if r.wasSuccessful() else 1)
`

// pytestRunner runs pytest (mounted from the pinned test wheels) with a
// plugin that counts outcomes, then prints the same summary line and one
// JSON line of per-test outcomes for --json. WASI has no dup and no
// faulthandler: capture is sys-level, and the plugins that need either
// are off (and logging, whose plugin opens /dev/null). ARGS is the argument list.
const pytestRunner = `import json, sys, pytest
class _Tally:
    def __init__(self):
        self.n = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        self.tests = []
    def pytest_runtest_logreport(self, report):
        outcome = None
        if report.when == "call":
            outcome = "skipped" if report.skipped else report.outcome
        elif report.failed:
            outcome = "error"
        elif report.skipped and report.when == "setup":
            outcome = "skipped"
        if outcome:
            self.n[outcome] += 1
            self.tests.append({"id": report.nodeid, "outcome": outcome, "duration_s": round(report.duration, 6)})
tally = _Tally()
status = pytest.main(ARGS, plugins=[tally])
print("AIRLOCK-TEST ran=%d failures=%d errors=%d skipped=%d expected_failures=0 unexpected_successes=0" % (
    sum(tally.n.values()), tally.n["failed"], tally.n["error"], tally.n["skipped"]))
print("AIRLOCK-TEST-JSON " + json.dumps(tally.tests))
sys.exit(int(status))
`

var (
	testSummary = regexp.MustCompile(`AIRLOCK-TEST ran=(\d+) failures=(\d+) errors=(\d+) skipped=(\d+) expected_failures=(\d+) unexpected_successes=(\d+)\n?`)
	testJSON    = regexp.MustCompile(`AIRLOCK-TEST-JSON (.*)\n?`)
	// pytestStyle finds what only pytest runs: test functions at the top
	// of a module, or pytest itself imported.
	pytestStyle = regexp.MustCompile(`(?m)^(def test|async def test|import pytest|from pytest )`)
)

// junitPath is where pytest writes --junit's report inside the sandbox.
const junitPath = ".airlock-junit.xml"

// testWheelsDir is where scripts/fetch-wheels.sh test puts pytest.
func testWheelsDir(cacheDir string) string { return filepath.Join(cacheDir, "testwheels") }

// testCounts are a suite's outcomes, summed over its runs.
type testCounts struct {
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Errors   int           `json:"errors"`
	Skipped  int           `json:"skipped"`
	Tests    []testOutcome `json:"tests,omitempty"`
	Runner   string        `json:"runner"`
	Duration float64       `json:"duration_ms"`
}

type testOutcome struct {
	ID        string  `json:"id"`
	Outcome   string  `json:"outcome"`
	DurationS float64 `json:"duration_s"`
}

func cmdTest(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fset, f := newTestFlags(stderr)
	positional, err := parseInterleaved(fset, args)
	if stop, code, err := flagResult(fset, stderr, err); stop {
		return code, err
	}
	if len(positional) != 1 {
		fset.Usage()
		return exitUsage, usageError{"give exactly one DIR"}
	}
	if *f.watch && !watching(ctx) {
		return watchRun(ctx, positional[0], *f.clear, true, &f.common, nil, stdout, stderr,
			func(ctx context.Context) (int, error) { return cmdTest(ctx, args, stdout, stderr) })
	}
	vars, err := f.env.env()
	if err != nil {
		return exitUsage, err
	}
	files, err := readTree(positional[0], airlock.DefaultLimits().FSBytes)
	if err != nil {
		return 1, err
	}
	kind, err := chooseRunner(*f.runnerName, files)
	if err != nil {
		return exitUsage, err
	}
	if kind == "unittest" && (*f.keyword != "" || *f.junit != "") {
		return exitUsage, usageError{"-k and --junit need the pytest runner (--runner pytest)"}
	}
	opts, packages, preimport, err := f.pytest(kind)
	if err != nil {
		return 1, err
	}
	// The suite's runs go to a warm server where there is one (see
	// warm.go), else to a Sandbox of this process's, made on first need.
	warm, err := warmFor(ctx, &f.common, *f.timeout, packages, preimport)
	if err != nil {
		return exitUsage, err
	}
	local := &localRunner{open: func() (*airlock.Sandbox, error) { return f.common.sandbox(ctx, stderr, opts...) }}
	defer local.close()
	suite := &suiteRunner{local: local}
	if warm != nil && warm.present() {
		suite.runners = append(suite.runners, warmRunner{warm})
	} else if err := local.load(); err != nil {
		// Loaded before the suite's clock starts, as it always was.
		return 1, err
	}
	suite.runners = append(suite.runners, local)
	start := time.Now()
	counts, status, err := f.runSuite(ctx, suite, kind, files, vars, stdout, stderr)
	if err != nil {
		return status, err
	}
	if local.opened() && warm != nil {
		warm.start() // for the next suite
	}
	counts.Duration = float64(time.Since(start).Microseconds()) / 1000
	if *f.asJSON {
		printTestJSON(stdout, counts)
	} else {
		fmt.Fprintf(stdout, "%d passed, %d failed, %d errors, %d skipped (%d tests) in %s\n",
			counts.Passed, counts.Failed, counts.Errors, counts.Skipped, counts.total(), time.Since(start).Round(time.Millisecond))
	}
	if counts.total() == 0 {
		return max(status, 1), nil
	}
	return status, nil
}

// testFlags are airlock test's flags.
type testFlags struct {
	common                                 commonFlags
	env                                    envFlags
	memory                                 *sizeFlag
	pattern, runnerName, keyword, junit    *string
	asJSON, isolate, verbose, watch, clear *bool
	timeout                                *time.Duration
}

func newTestFlags(stderr io.Writer) (*flag.FlagSet, *testFlags) {
	fset := flag.NewFlagSet("airlock test", flag.ContinueOnError)
	fset.SetOutput(io.Discard) // flagResult prints help and errors
	f := &testFlags{
		pattern:    fset.String("pattern", "test*.py", "unittest discovery pattern"),
		runnerName: fset.String("runner", "auto", "auto (pytest when the suite has pytest-style tests or a conftest.py, else unittest), pytest or unittest"),
		keyword:    fset.String("k", "", "pytest: run only the tests matching this expression"),
		junit:      fset.String("junit", "", "pytest: write a JUnit XML report to this `file`"),
		asJSON:     fset.Bool("json", false, "print the outcomes as one JSON object"),
		isolate:    fset.Bool("isolate", false, "run each test file in a fresh instance of its own (a restore costs milliseconds)"),
		verbose:    fset.Bool("v", false, "list every test"),
		timeout:    fset.Duration("timeout", 60*time.Second, "wall-clock limit of the whole suite (of each file with --isolate)"),
		memory:     &sizeFlag{airlock.DefaultLimits().Memory},
		watch:      fset.Bool("watch", false, "re-run on every change under DIR (Ctrl-C stops)"),
		clear:      fset.Bool("clear", false, "with --watch, clear the screen before each run"),
	}
	f.common.register(fset)
	f.env.register(fset)
	fset.Var(f.memory, "memory", "memory limit (e.g. 256MiB)")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "usage: airlock test [flags] DIR   (pytest or unittest in the sandbox; DIR becomes /home/user)")
		printDefaults(fset)
	}
	return fset, f
}

// pytest is what the pytest runner adds to the Sandbox: pytest's wheels,
// imported in the snapshot image once rather than per run. The unittest
// runner adds nothing.
func (f *testFlags) pytest(kind string) (opts []airlock.Option, packages, preimport []string, err error) {
	if kind != "pytest" {
		return nil, nil, nil, nil
	}
	cacheDir := f.common.cacheDir
	if cacheDir == "" {
		if cacheDir, err = python.CacheDir(); err != nil {
			return nil, nil, nil, err
		}
	}
	wheels, _ := filepath.Glob(filepath.Join(testWheelsDir(cacheDir), "*.whl"))
	if len(wheels) == 0 {
		return nil, nil, nil, fmt.Errorf("the suite needs pytest, which is not in %s: run scripts/fetch-wheels.sh test (scripts/setup.sh does), or --runner unittest", testWheelsDir(cacheDir))
	}
	packages, preimport = wheels, []string{"pytest"}
	return []airlock.Option{airlock.WithPackages(packages...), airlock.WithPreimport(preimport...)}, packages, preimport, nil
}

// suiteRunner runs a suite's requests on the first of runners that serves
// them, and on local alone once local has run one.
type suiteRunner struct {
	runners []runner
	local   *localRunner
}

func (s *suiteRunner) run(ctx context.Context, req airlock.Request) (*airlock.Result, error) {
	if s.local.opened() {
		s.runners = []runner{s.local} // once here, the suite stays here
	}
	res, err := runFirst(ctx, s.runners, req, nil)
	var apiErr *client.APIError
	switch {
	case errors.Is(err, errRunCancelled):
		return &airlock.Result{ExitCode: -1, Error: &airlock.Error{Kind: airlock.KindTimeout, Message: "the run was cancelled"}}, nil
	case errors.As(err, &apiErr):
		return &airlock.Result{ExitCode: -1, Error: &airlock.Error{Kind: airlock.Kind(apiErr.Kind), Message: apiErr.Message}}, nil
	case err != nil:
		return nil, err
	}
	return fromResult(res), nil // the error is res.Error, which add prints
}

// runSuite runs the suite, whole or (--isolate) a file per run, and
// counts its outcomes; status is the worst run's, or the exit status of
// an error.
func (f *testFlags) runSuite(ctx context.Context, suite *suiteRunner, kind string, files map[string][]byte, vars map[string]string, stdout, stderr io.Writer) (counts testCounts, status int, err error) {
	targets := []string{""} // the whole suite in one run
	if *f.isolate {
		targets = testFiles(files, *f.pattern)
	}
	counts = testCounts{Runner: kind}
	for _, target := range targets {
		code := unittestCode(*f.pattern, *f.verbose, target)
		if kind == "pytest" {
			code = pytestCode(*f.verbose, *f.keyword, *f.junit != "", target)
		}
		res, err := suite.run(ctx, airlock.Request{
			Code: code, Filename: "<airlock test>", Files: files, Env: vars,
			Limits: airlock.Limits{Timeout: *f.timeout, Memory: f.memory.n},
		})
		if err != nil {
			return counts, 1, err
		}
		st, err := counts.add(res, *f.asJSON, stdout, stderr)
		if err != nil {
			return counts, st, err
		}
		status = max(status, st)
		if *f.junit != "" {
			writeJUnit(*f.junit, res, len(targets) > 1, target, stderr)
		}
	}
	return counts, status, nil
}

func (c *testCounts) total() int { return c.Passed + c.Failed + c.Errors + c.Skipped }

// add reads one run's summary into c and prints its report; it returns
// the run's status.
func (c *testCounts) add(res *airlock.Result, asJSON bool, stdout, stderr io.Writer) (int, error) {
	out := testJSON.ReplaceAll(testSummary.ReplaceAll(res.Stdout, nil), nil)
	if asJSON {
		stderr.Write(out) // stdout is the JSON's
	} else {
		stdout.Write(out)
	}
	stderr.Write(res.Stderr)
	if res.Error != nil {
		fmt.Fprintln(stderr, "airlock:", res.Error)
		return exitStatus(res), nil
	}
	m := testSummary.FindSubmatch(res.Stdout)
	if m == nil {
		fmt.Fprintf(stderr, "no summary from the test runner (exit %d)\n", res.ExitCode)
		return max(processStatus(res.ExitCode), 1), nil
	}
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(string(m[i+1]))
	}
	ran, failed, errs, skipped := n[0], n[1], n[2], n[3]
	c.Passed += ran - failed - errs - skipped - n[5]
	c.Failed += failed + n[5]
	c.Errors += errs
	c.Skipped += skipped
	if j := testJSON.FindSubmatch(res.Stdout); j != nil {
		var tests []testOutcome
		if json.Unmarshal(j[1], &tests) == nil {
			c.Tests = append(c.Tests, tests...)
		}
	}
	if res.ExitCode != 0 {
		return max(processStatus(res.ExitCode), 1), nil
	}
	return 0, nil
}

func printTestJSON(w io.Writer, c testCounts) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(c)
}

// chooseRunner resolves --runner: auto takes pytest for a suite with a
// conftest.py or pytest-style tests (which unittest would skip silently).
func chooseRunner(runner string, files map[string][]byte) (string, error) {
	switch runner {
	case "pytest", "unittest":
		return runner, nil
	case "auto":
		for name, data := range files {
			base := path.Base(name)
			if base == "conftest.py" || strings.HasSuffix(base, ".py") && (strings.HasPrefix(base, "test") || strings.HasSuffix(base, "_test.py")) && pytestStyle.Match(data) {
				return "pytest", nil
			}
		}
		return "unittest", nil
	}
	return "", usageError{fmt.Sprintf("--runner %q: auto, pytest or unittest", runner)}
}

// testFiles are the suite's test files, for --isolate, sorted.
func testFiles(files map[string][]byte, pattern string) []string {
	var out []string
	for name := range files {
		base := path.Base(name)
		if ok, _ := path.Match(pattern, base); ok && strings.HasSuffix(base, ".py") || strings.HasSuffix(base, "_test.py") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func unittestCode(pattern string, verbose bool, target string) string {
	if target != "" {
		pattern = path.Base(target)
	}
	verbosity := 1
	if verbose {
		verbosity = 2
	}
	return strings.NewReplacer("sys.argv_pattern", strconv.Quote(pattern), "sys.argv_verbosity", strconv.Itoa(verbosity)).Replace(testRunner)
}

func pytestCode(verbose bool, keyword string, junit bool, target string) string {
	args := []string{"-p", "no:cacheprovider", "-p", "no:faulthandler", "-p", "no:logging", "--capture=sys", "-o", "console_output_style=classic"}
	if verbose {
		args = append(args, "-v")
	} else {
		args = append(args, "-q")
	}
	if keyword != "" {
		args = append(args, "-k", keyword)
	}
	if junit {
		args = append(args, "--junitxml="+junitPath)
	}
	if target != "" {
		args = append(args, target)
	}
	list, _ := json.Marshal(args) // a JSON list of strings is a Python list
	return strings.Replace(pytestRunner, "ARGS", string(list), 1)
}

// writeJUnit copies pytest's report out of the run; with --isolate each
// file's goes next to FILE, named by the test file.
func writeJUnit(dst string, res *airlock.Result, many bool, target string, stderr io.Writer) {
	for _, f := range res.Files {
		if f.Path != "/home/user/"+junitPath {
			continue
		}
		if many {
			ext := filepath.Ext(dst)
			dst = strings.TrimSuffix(dst, ext) + "-" + strings.NewReplacer("/", "_", ".py", "").Replace(target) + ext
		}
		if err := os.WriteFile(dst, f.Data, 0o644); err != nil {
			fmt.Fprintf(stderr, "airlock: --junit: %v\n", err)
		}
		return
	}
	fmt.Fprintln(stderr, "airlock: --junit: pytest wrote no report")
}

// readTree reads the regular files under dir, skipping hidden entries and
// __pycache__, keyed by slash path relative to dir.
func readTree(dir string, maxBytes int64) (map[string][]byte, error) {
	files := map[string][]byte{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || name == "__pycache__") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += int64(len(data)); total > maxBytes {
			return fmt.Errorf("%s holds more than %d bytes", dir, maxBytes)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	return files, err
}
