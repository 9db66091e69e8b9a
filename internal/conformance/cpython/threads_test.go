package cpython

import (
	"context"
	_ "embed"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// threadModules are CPython's thread tests (the process pool's classes
// in test_concurrent_futures are not the threads' and are left out of
// the native reference).
var threadModules = []string{
	"test.test_threading",
	"test.test_thread",
	"test.test_queue",
	"test.test_threading_local",
	"test.test_concurrent_futures.test_thread_pool",
	"test.test_concurrent_futures.test_future",
	"test.test_concurrent_futures.test_wait",
	"test.test_concurrent_futures.test_as_completed",
	"test.test_concurrent_futures.test_shutdown",
}

// threadsNativeJSON lists the tests that pass natively, per module
// (scripts/cpython-thread-tests.sh measures it).
//
//go:embed threads_native.json
var threadsNativeJSON []byte

// threadsFailing are the native passes that do not pass in the sandbox,
// with why. Anything else that does not pass fails this test, and so
// does one of these that passes.
var threadsFailing = map[string]string{
	"test.test_threading.SubinterpThreadingTests.test_threads_join":   "os.pipe: WASI has no pipes",
	"test.test_threading.SubinterpThreadingTests.test_threads_join_2": "os.pipe: WASI has no pipes",
}

// sandboxSkips are the reasons a natively passing test skips itself in
// the sandbox for what the sandbox has by design, not its threads:
// processes, fork, signals, and CPython's test-only C modules, which the
// own build leaves out.
var sandboxSkips = []string{
	"requires subprocess support",
	"requires working os.fork()",
	"platform doesn't support fork",
	"does not support the alarm signal",
	"subinterpreters required",
	"No module named '_testcapi'",
	"No module named '_testinternalcapi'",
	"No module named '_ctypes'",
}

// TestCPythonThreadsInSandbox runs CPython's thread tests in the sandbox
// and holds them to what passes natively: every difference is a skip for
// one of sandboxSkips or named in threadsFailing, and at least 95% of the
// native passes the sandbox can run pass.
func TestCPythonThreadsInSandbox(t *testing.T) {
	ctx := context.Background()
	var native struct {
		CPython string              `json:"cpython"`
		Passes  map[string][]string `json:"passes"`
	}
	if err := json.Unmarshal(threadsNativeJSON, &native); err != nil {
		t.Fatalf("threads_native.json: %v", err)
	}
	dir, version := testsDir(t, cacheDir(t))
	if version != native.CPython {
		t.Fatalf("the own build is CPython %s; threads_native.json is for %s: run scripts/cpython-thread-tests.sh", version, native.CPython)
	}
	sb, err := airlock.New(ctx, airlock.WithPython("own"), airlock.WithNotice(os.Stderr))
	if err != nil {
		t.Fatalf("airlock.New: %v", err)
	}
	t.Cleanup(func() { sb.Close(ctx) })
	if !sb.Threads() {
		t.Skip("this engine runs no threads (wasmtime): the tests would all skip")
	}
	passed, total, refused := 0, 0, 0
	for _, m := range threadModules {
		want, ok := native.Passes[m]
		if !ok {
			t.Fatalf("threads_native.json has no %s: run scripts/cpython-thread-tests.sh", m)
		}
		res, err := sb.Run(ctx, airlock.Request{
			Code:     runnerCode(Module{Module: m, threads: true}, python.Home),
			Packages: []string{dir},
			Limits:   sandboxLimits,
		})
		if err != nil {
			t.Fatalf("%s: %v\nstderr (end):\n%s", m, err, tail(res.Stderr, 4000))
		}
		r, err := parseResult(string(res.Stdout))
		if err != nil {
			t.Fatalf("%s: exit %d: %v\nstderr (end):\n%s", m, res.ExitCode, err, tail(res.Stderr, 4000))
		}
		modPassed, modRefused := passed, refused
		for _, id := range want {
			total++
			got, details := r.Outcomes[id], r.Details[id]
			if got == "" { // reported by its subtests only ("id [msg]", "id (params)")
				for sub, o := range r.Outcomes {
					if strings.HasPrefix(sub, id+" ") {
						got, details = o, r.Details[sub]
					}
				}
			}
			if got == "pass" {
				passed++
				if why, ok := threadsFailing[id]; ok {
					t.Errorf("%s passes, but threadsFailing says it does not (%s): update it", id, why)
				}
				continue
			}
			if _, ok := threadsFailing[id]; ok {
				continue
			}
			if got == "skip" && slices.ContainsFunc(sandboxSkips, func(why string) bool { return strings.Contains(details, why) }) {
				refused++
				continue
			}
			t.Errorf("%s: %q in the sandbox, passes natively:\n%s", id, got, details)
		}
		t.Logf("%s: %d native passes: %d pass in the sandbox, %d skip for a sandbox refusal (sandbox: %d run, %d failures, %d errors, %d skipped)",
			m, len(want), passed-modPassed, refused-modRefused, r.Run, r.Failures, r.Errors, r.Skipped)
	}
	runnable := total - refused
	t.Logf("the sandbox passes %d of the %d tests that pass natively (%.1f%%); %d skip for processes, fork, signals or test-only C modules; of the other %d, %.1f%% pass",
		passed, total, 100*float64(passed)/float64(total), refused, runnable, 100*float64(passed)/float64(runnable))
	if passed*100 < runnable*95 {
		t.Errorf("the sandbox passes %d of %d native passes it can run, under 95%%", passed, runnable)
	}
}
