package cpython

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
)

func init() { testenv.Defaults = testenv.FromEnv }

// sandboxLimits fit the largest module with room (test_shutil peaks at
// ~600 MB of host memory, test_io writes files of tens of MB, and its
// large_file_ops makes a sparse file past 2 GiB, whose size the quota
// counts though its holes take no memory); the defaults are for agents'
// programs, not a regression suite.
var sandboxLimits = airlock.Limits{
	Timeout: 10 * time.Minute,
	Memory:  2 << 30,
	Output:  64 << 20,
	FSBytes: 4 << 30,
	FSFiles: 100000,
}

// TestCPythonInSandbox runs each module as users run code: Sandbox.Run,
// with Lib/test as a read-only package (mounted once, not copied), in the
// sandbox's memory filesystem and WASI, on the engine $AIRLOCK_ENGINE
// names (the WASI is Airlock's on either).
func TestCPythonInSandbox(t *testing.T) {
	ctx := context.Background()
	exp := loadExpected(t)
	dir, version := testsDir(t, cacheDir(t))
	sb, err := airlock.New(ctx, airlock.WithPython("own"), airlock.WithNotice(os.Stderr))
	if err != nil {
		t.Fatalf("airlock.New: %v", err)
	}
	t.Cleanup(func() { sb.Close(ctx) })
	if version != exp.CPython {
		t.Fatalf("the own build is CPython %s; expected.json is for %s: re-measure and update it", version, exp.CPython)
	}
	for _, m := range exp.Modules {
		t.Run(m.Module, func(t *testing.T) {
			res, err := sb.Run(ctx, airlock.Request{
				Code:     runnerCode(m, python.Home),
				Packages: []string{dir},
				Limits:   sandboxLimits,
			})
			if res == nil {
				t.Fatalf("%s: no result: %v", m.Module, err)
			}
			if err != nil {
				t.Fatalf("%s: %v\nstderr (end):\n%s", m.Module, err, tail(res.Stderr, 4000))
			}
			r, err := parseResult(string(res.Stdout))
			if err != nil {
				t.Fatalf("%s: exit %d: %v\nstderr (end):\n%s", m.Module, res.ExitCode, err, tail(res.Stderr, 4000))
			}
			check(t, "airlock", m, m.Airlock, r)
		})
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}
