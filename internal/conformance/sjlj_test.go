package airlock_test

import (
	"fmt"
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
					res := cxxehRun(t, eng, prog.name, []string{fmt.Sprint(rounds)}, engine.Limits{Timeout: 10 * time.Minute})
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
	cases := []misuseCase{
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
	checkMisuse(t, "sjlj_misuse", cases)
}

// A guest longjmping in a loop forever stops at its deadline.
func TestSetjmpLongjmpForeverTimesOut(t *testing.T) { checkForeverTimesOut(t, "sjlj_misuse") }

// BenchmarkLongjmp reports, per engine, what a call costs plain, as an
// invoke_ round trip (its caller has called setjmp), and with a longjmp
// back to that setjmp every time (sjlj_bench.c times 100,000 of each
// inside the guest); the medians of b.N runs, in ns per call.
func BenchmarkLongjmp(b *testing.B) { benchInvokeFigures(b, "sjlj_bench") }
