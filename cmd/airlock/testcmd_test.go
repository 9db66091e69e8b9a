package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func writeSuite(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTestCommand(t *testing.T) {
	var many strings.Builder
	many.WriteString("import unittest\nfrom pkg.calc import add\n\nclass T(unittest.TestCase):\n")
	for i := range 50 {
		fmt.Fprintf(&many, "    def test_%d(self):\n        self.assertEqual(add(%d, 1), %d)\n", i, i, i+1)
	}
	passing := writeSuite(t, map[string]string{
		"pkg/__init__.py": "", "pkg/calc.py": "def add(a, b):\n    return a + b\n",
		"test_calc.py": many.String(), ".hidden/test_x.py": "raise SystemExit(9)\n",
	})
	code, stdout, stderr := cli(t, "", "test", passing)
	if code != 0 || !strings.HasPrefix(stdout, "50 passed, 0 failed, 0 errors, 0 skipped (50 tests) in ") || !strings.Contains(stderr, "Ran 50 tests") {
		t.Fatalf("passing suite: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	failing := writeSuite(t, map[string]string{
		"test_mixed.py": `import unittest
class T(unittest.TestCase):
    def test_ok(self): pass
    def test_fail(self): self.assertEqual(1, 2)
    def test_error(self): {}["missing"]
    @unittest.skip("later")
    def test_skip(self): pass
`,
	})
	code, stdout, stderr = cli(t, "", "test", "-v", failing)
	if code != 1 || !strings.HasPrefix(stdout, "1 passed, 1 failed, 1 errors, 1 skipped (4 tests) in ") ||
		!strings.Contains(stderr, "AssertionError: 1 != 2") || !strings.Contains(stderr, "KeyError: 'missing'") {
		t.Fatalf("failing suite: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	empty := writeSuite(t, map[string]string{"main.py": "print(1)\n"})
	if code, stdout, _ := cli(t, "", "test", empty); code != 1 || !strings.HasPrefix(stdout, "0 passed") {
		t.Fatalf("no tests: exit %d, %s", code, stdout)
	}
	if code, _, _ := cli(t, "", "test"); code != exitUsage {
		t.Fatalf("no DIR: exit %d", code)
	}
}

// needTestWheels fetches pytest into the cache, as set-up does, when it
// is not there yet.
func needTestWheels(t *testing.T) {
	t.Helper()
	dir := os.Getenv("AIRLOCK_CACHE_DIR")
	if dir == "" {
		var err error
		if dir, err = os.UserCacheDir(); err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(dir, "airlock")
	}
	if out, err := exec.Command("bash", "../../scripts/fetch-wheels.sh", "test", testWheelsDir(dir)).CombinedOutput(); err != nil {
		t.Fatalf("fetch-wheels.sh test: %v\n%s", err, out)
	}
}

// pytest-style suites run on pytest (unittest would skip their functions
// silently), with -k, --json, --junit and --isolate.
func TestTestCommandPytest(t *testing.T) {
	needTestWheels(t)
	suite := writeSuite(t, map[string]string{
		"conftest.py": "import pytest\n@pytest.fixture\ndef answer():\n    return 42\n",
		"test_a.py": `import pytest, sys
sys.modules["leak"] = sys  # at import: pytest imports every file before running any test
def test_fixture(answer): assert answer == 42
def test_fail(): assert 1 + 1 == 3
@pytest.mark.skip(reason="later")
def test_skip(): pass
@pytest.mark.parametrize("n", [1, 2, 3])
def test_param(n): assert n > 0
def test_more(): pass
`,
		"sub/test_b.py": "import sys\ndef test_isolated():\n    assert 'leak' not in sys.modules\n",
	})
	code, stdout, _ := cli(t, "", "test", suite)
	// Without --isolate the files share one interpreter: the leak fails b.
	if code != 1 || !strings.Contains(stdout, "5 passed, 2 failed, 0 errors, 1 skipped (8 tests) in ") || !strings.Contains(stdout, "assert (1 + 1) == 3") {
		t.Fatalf("pytest suite: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = cli(t, "", "test", "--isolate", suite)
	if code != 1 || !strings.Contains(stdout, "6 passed, 1 failed, 0 errors, 1 skipped (8 tests) in ") {
		t.Fatalf("--isolate: exit %d\n%s", code, stdout)
	}
	junit := filepath.Join(t.TempDir(), "report.xml")
	code, stdout, _ = cli(t, "", "test", "--json", "-k", "param or fixture", "--junit", junit, suite)
	var res testCounts
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 || res.Passed != 4 || res.Failed != 0 || len(res.Tests) != 4 || res.Runner != "pytest" {
		t.Fatalf("--json -k: exit %d, %v\n%s", code, err, stdout)
	}
	if xml, err := os.ReadFile(junit); err != nil || !strings.Contains(string(xml), `<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="4"`) {
		t.Fatalf("--junit: %v\n%.300s", err, xml)
	}
	// unittest suites keep the unittest runner; -k needs pytest.
	unit := writeSuite(t, map[string]string{"test_u.py": "import unittest\nclass T(unittest.TestCase):\n    def test_x(self): pass\n"})
	if code, stdout, stderr := cli(t, "", "test", unit); code != 0 || !strings.HasPrefix(stdout, "1 passed") || !strings.Contains(stderr, "Ran 1 test") {
		t.Fatalf("unittest suite: %d %s %s", code, stdout, stderr)
	}
	if code, _, stderr := cli(t, "", "test", "-k", "x", unit); code != exitUsage || !strings.Contains(stderr, "--runner pytest") {
		t.Fatalf("-k on unittest: %d %s", code, stderr)
	}
	// No pytest in the cache: said so, not skipped.
	if code, _, stderr := cli(t, "", "test", "--cache-dir", t.TempDir(), suite); code != exitAirlock || !strings.Contains(stderr, "scripts/fetch-wheels.sh test") {
		t.Fatalf("no pytest: %d %s", code, stderr)
	}
}
