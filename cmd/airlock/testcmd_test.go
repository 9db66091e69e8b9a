package main

import (
	"fmt"
	"os"
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
