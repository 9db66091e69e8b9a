package airlock_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/engine"
)

// setjmp/longjmp lowered to invoke_ (scripts/build-cxx-eh.sh builds
// cxx-eh/sjlj*.c against its runtime), on every engine compiled in, as
// cxxeh_test.go does for C++ exceptions: the guest's output exactly, many
// rounds, and misuse ending as the guest's own crash or exit.

// sjljChecks is sjlj.c's output: one line per check, in order.
var sjljChecks = []string{
	"setjmp returns longjmp's value",
	"longjmp(env, 0) makes setjmp return 1",
	"longjmp across 50 frames",
	"longjmp back to the same setjmp ten times",
	"nested: longjmp to the inner setjmp",
	"nested: longjmp past the inner to the outer setjmp",
	"two setjmps in one function",
	"longjmp from a callback through libc's qsort",
	"longjmp called through a function pointer",
	"sigsetjmp/siglongjmp and _setjmp/_longjmp",
	"setjmp never jumped to",
	"the heap is untouched by a longjmp",
	"the stack pointer is back",
	"memory did not grow after the first round",
}

// sjljMixedChecks is sjlj_mixed.cpp's.
var sjljMixedChecks = []string{
	"a longjmp passes catch (...) by",
	"an exception passes a setjmp's function by",
	"catch and setjmp in one function",
}

func TestSetjmpLongjmp(t *testing.T) {
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			for _, prog := range []struct {
				name   string
				checks []string
			}{{"sjlj", sjljChecks}, {"sjlj_mixed", sjljMixedChecks}} {
				for _, rounds := range []int{1, 2000} {
					res := cxxehRun(t, eng, prog.name, []string{fmt.Sprint(rounds)}, airlock.Limits{Timeout: 10 * time.Minute})
					var want strings.Builder
					for _, c := range prog.checks {
						want.WriteString(c + ": ok\n")
					}
					fmt.Fprintf(&want, "PASS: %d rounds\n", rounds)
					if res.Error != nil || res.ExitCode != 0 || string(res.Stdout) != want.String() || len(res.Stderr) != 0 {
						t.Errorf("%s, %d rounds: error %v, exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", prog.name, rounds, res.Error, res.ExitCode, res.Stdout, want.String(), res.Stderr)
					}
				}
			}
		})
	}
}

// A guest misusing setjmp/longjmp: each way ends as that run's crash or
// its own clean exit; the host carries on.
func TestSetjmpLongjmpMisuse(t *testing.T) {
	const noSetjmp = "longjmp: no active setjmp to return to"
	cases := []struct {
		mode   string
		args   []string
		exit   int
		crash  error  // nil: the guest exits with exit
		stdout string // exactly
		stderr string // a prefix
	}{
		{mode: "no-setjmp", crash: airlock.ErrCrash, stdout: "before\n", stderr: noSetjmp},
		{mode: "stale", crash: airlock.ErrCrash, stderr: noSetjmp},
		// The guest's own load of the jmp_buf past its memory traps.
		{mode: "garbage-env", crash: airlock.ErrCrash},
		// Bounded recursion through invoke_ runs (each level's jmp_buf
		// on the guest's 64 KiB stack); unbounded ends when that stack
		// or the host's depth limit runs out, whichever is first.
		{mode: "nest", args: []string{"250"}, stdout: "nest 250\nreturned\n"},
		{mode: "nest", crash: airlock.ErrCrash},
		{mode: "exit-in-invoke", exit: 7},
	}
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			for _, c := range cases {
				res := cxxehRun(t, eng, "sjlj_misuse", append([]string{c.mode}, c.args...), airlock.Limits{Timeout: time.Minute})
				name := strings.Join(append([]string{c.mode}, c.args...), " ")
				if c.crash == nil {
					if res.Error != nil || res.ExitCode != c.exit {
						t.Errorf("%s: error %v, exit %d, want %d; stderr %s", name, res.Error, res.ExitCode, c.exit, res.Stderr)
					}
				} else if !errors.Is(res.Error, c.crash) || !errors.Is(res.Error, airlock.ErrCrash) {
					t.Errorf("%s: error %v, want a crash with %v", name, res.Error, c.crash)
				}
				if string(res.Stdout) != c.stdout || !strings.HasPrefix(string(res.Stderr), c.stderr) {
					t.Errorf("%s: stdout %q, want %q; stderr %q, want it to start %q", name, res.Stdout, c.stdout, res.Stderr, c.stderr)
				}
			}
		})
	}
}

// A guest longjmping in a loop forever stops at its deadline.
func TestSetjmpLongjmpForeverTimesOut(t *testing.T) {
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			start := time.Now()
			res := cxxehRun(t, eng, "sjlj_misuse", []string{"forever"}, airlock.Limits{Timeout: time.Second})
			if !errors.Is(res.Error, airlock.ErrTimeout) || time.Since(start) > 20*time.Second {
				t.Errorf("error %v after %v, want a timeout after ~1s", res.Error, time.Since(start))
			}
		})
	}
}

// BenchmarkLongjmp reports, per engine, what a call costs plain, as an
// invoke_ round trip (its caller has called setjmp), and with a longjmp
// back to that setjmp every time (sjlj_bench.c times 100,000 of each
// inside the guest); the medians of b.N runs, in ns per call.
func BenchmarkLongjmp(b *testing.B) {
	for _, eng := range engine.Engines() {
		b.Run(eng, func(b *testing.B) {
			figures := map[string][]float64{}
			for range b.N {
				res := cxxehRun(b, eng, "sjlj_bench", []string{"100000"}, airlock.Limits{Timeout: 5 * time.Minute})
				if res.Error != nil || res.ExitCode != 0 {
					b.Fatalf("error %v, exit %d, stderr %s", res.Error, res.ExitCode, res.Stderr)
				}
				for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
					var name string
					var ns float64
					if _, err := fmt.Sscanf(line, "%s %g", &name, &ns); err != nil {
						b.Fatalf("line %q: %v", line, err)
					}
					figures[name] = append(figures[name], ns)
				}
			}
			for name, v := range figures {
				slices.Sort(v)
				b.ReportMetric(v[len(v)/2], name+"-ns/call")
			}
		})
	}
}
