package airlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/engine"
)

// C++ exceptions lowered to invoke_ (scripts/build-cxx-eh.sh builds
// cxx-eh/*.cpp against its libc++abi), on every engine compiled in: the
// guest's output exactly, many rounds, and a guest misusing the runtime
// ending as its own crash, never the host's.

const cxxehScript = "../../scripts/build-cxx-eh.sh"

// cxxehKeyFiles are build-cxx-eh.sh's cache key's inputs: the script,
// then scripts/cxx-eh/*, then cxx-eh/*.
func cxxehKeyFiles() ([]keyFile, error) {
	files := []keyFile{{cxxehScript, "scripts/build-cxx-eh.sh"}}
	for _, d := range []struct{ dir, name string }{{"../../scripts/cxx-eh", "scripts/cxx-eh/"}, {"cxx-eh", "internal/conformance/cxx-eh/"}} {
		more, err := dirKeyFiles(d.dir, d.name)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

// cxxehProgram reads one test program built for exactly these sources.
func cxxehProgram(t testing.TB, name string) []byte {
	t.Helper()
	files, err := cxxehKeyFiles()
	if err != nil {
		t.Fatal(err)
	}
	dir := stageDir(t, "cxx-eh", "scripts/build-cxx-eh.sh", files)
	wasm, err := os.ReadFile(filepath.Join(dir, "test", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func cxxehRun(t testing.TB, eng, name string, args []string, limits engine.Limits) *engine.Result {
	t.Helper()
	opts := moduleCacheOpts()
	opts.Engine = eng
	res, err := engine.RunModule(context.Background(), name+".wasm", cxxehProgram(t, name), engine.ModuleRequest{Args: args, Limits: limits}, opts)
	if res == nil {
		t.Fatalf("%s %v on %s: no result: %v", name, args, eng, err)
	}
	return res
}

// cxxehChecks is exceptions.cpp's output: one line per check, in order.
var cxxehChecks = []string{
	"catch by exact type",
	"catch by base class",
	"catch a pointer by base pointer",
	"catch (...)",
	"no throw returns",
	"rethrow (throw;) keeps the object",
	"throw inside a catch block",
	"a throw escaping a catch block replaces the first",
	"translate in catch (...) and rethrow",
	"translate falls to the base translator",
	"translate through exception_ptr",
	"destructors run while unwinding",
	"operator new throws std::bad_alloc",
	"std::runtime_error's what()",
	"catch by value copies",
	"caught by value",
	"uncaught_exceptions during unwinding",
	"every exception object destroyed",
	"the stack pointer is back",
	"memory did not grow after the first round",
}

func TestCXXExceptions(t *testing.T) {
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			for _, rounds := range []int{1, 2000} {
				res := cxxehRun(t, eng, "exceptions", []string{fmt.Sprint(rounds)}, engine.Limits{Timeout: 10 * time.Minute})
				var want strings.Builder
				for _, c := range cxxehChecks {
					want.WriteString(c + ": ok\n")
				}
				fmt.Fprintf(&want, "PASS: %d rounds\n", rounds)
				if res.Error != nil || res.ExitCode != 0 || string(res.Stdout) != want.String() || len(res.Stderr) != 0 {
					t.Errorf("%d rounds: error %v, exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", rounds, res.Error, res.ExitCode, res.Stdout, want.String(), res.Stderr)
				}
			}
		})
	}
}

// An exception nothing catches ends the run as a crash, after libc++abi
// names it; the guards on the way ran.
func TestCXXUncaught(t *testing.T) {
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			res := cxxehRun(t, eng, "uncaught", nil, engine.Limits{})
			wantOut := "before\nguard inner destroyed\nguard outer destroyed\n"
			wantErr := "libc++abi: terminating due to uncaught exception of type std::runtime_error: nobody catches this\n"
			if !errors.Is(res.Error, airlock.ErrCrash) || string(res.Stdout) != wantOut || string(res.Stderr) != wantErr {
				t.Errorf("error %v\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", res.Error, res.Stdout, wantOut, res.Stderr, wantErr)
			}
		})
	}
}

// A guest misusing the runtime: each way ends as that run's crash or its
// own clean exit, with the output below; the host carries on.
func TestCXXMisuse(t *testing.T) {
	cases := []misuseCase{
		{mode: "bad-slot", crash: engine.ErrInvokeTarget},
		{mode: "null-slot", crash: engine.ErrInvokeTarget},
		{mode: "wrong-type", crash: engine.ErrInvokeTarget},
		{mode: "unwind-outside-invoke", stdout: "unwind returned 0\n"},
		{mode: "unwind-without-exception", stdout: "threw 1\nmatch 0\n"},
		// The guest's own load of its garbage "type" traps.
		{mode: "garbage-catch", crash: airlock.ErrCrash, stdout: "idle match 0\nthrew 1\n"},
		{mode: "throw-outside-invoke", crash: airlock.ErrCrash, stderr: "libc++abi: terminating due to uncaught exception of type int\n"},
		// Bounded recursion through invoke_ runs; unbounded stops at the
		// depth limit (or wasmtime's stack, whichever is first).
		{mode: "nest", args: []string{"900"}, stdout: "nest 900\nreturned\n"},
		{mode: "nest", crash: airlock.ErrCrash},
		{mode: "exit-in-invoke", exit: 7},
	}
	checkMisuse(t, "misuse", cases)
}

// A guest catching exceptions in a loop forever stops at its deadline.
func TestCXXCatchForeverTimesOut(t *testing.T) { checkForeverTimesOut(t, "misuse") }

// BenchmarkCXXInvoke reports, per engine, what a call costs plain, as an
// invoke_ round trip through the host, and when it throws and is caught
// (bench.cpp times 100,000 of each inside the guest); the medians of b.N
// runs, in ns per call.
func BenchmarkCXXInvoke(b *testing.B) { benchInvokeFigures(b, "bench") }

// libcxxChecks is libcxx.cpp's output: exceptions thrown by libc++'s
// compiled code, each caught as its type.
var libcxxChecks = []string{
	"std::stoi throws invalid_argument",
	"std::stoi throws out_of_range",
	"std::stod throws invalid_argument",
	"std::stoi parses what it can",
	"std::string::at throws out_of_range",
	"std::string::substr throws out_of_range",
	"std::vector::at throws out_of_range",
	"std::vector::reserve throws length_error",
	"std::regex throws regex_error",
	"a stream with exceptions() throws ios_base::failure",
	"std::system_error's what() names its code",
	"std::string's allocation throws bad_alloc",
	"an empty std::function throws bad_function_call",
	"std::call_once rethrows and runs again",
	"throw_with_nested and rethrow_if_nested",
	"memory did not grow after the first round",
}

func TestCXXLibcxxThrows(t *testing.T) {
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			for _, rounds := range []int{1, 500} {
				// 64 MiB: the 1.5 GB string cannot be had.
				res := cxxehRun(t, eng, "libcxx", []string{fmt.Sprint(rounds)}, engine.Limits{Timeout: 10 * time.Minute, Memory: 64 << 20})
				var want strings.Builder
				for _, c := range libcxxChecks {
					want.WriteString(c + ": ok\n")
				}
				fmt.Fprintf(&want, "PASS: %d rounds\n", rounds)
				if res.Error != nil || res.ExitCode != 0 || string(res.Stdout) != want.String() || len(res.Stderr) != 0 {
					t.Errorf("%d rounds: error %v, exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", rounds, res.Error, res.ExitCode, res.Stdout, want.String(), res.Stderr)
				}
			}
		})
	}
}

// misuseCase is a guest program's misuse of exceptions or setjmp and how
// its run must end.
type misuseCase struct {
	mode   string
	args   []string
	exit   int
	crash  error  // nil: the guest exits with exit
	stdout string // exactly
	stderr string // a prefix
}

// checkMisuse runs program with each case's mode on every engine: each
// ends as that run's crash or its own clean exit, and the host carries on.
func checkMisuse(t *testing.T, program string, cases []misuseCase) {
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			for _, c := range cases {
				res := cxxehRun(t, eng, program, append([]string{c.mode}, c.args...), engine.Limits{Timeout: time.Minute})
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

// checkForeverTimesOut runs program's "forever" mode, a loop of throws or
// longjmps, with a 1 s timeout on every engine: it stops at its deadline.
func checkForeverTimesOut(t *testing.T, program string) {
	for _, eng := range engine.Engines() {
		t.Run(eng, func(t *testing.T) {
			start := time.Now()
			res := cxxehRun(t, eng, program, []string{"forever"}, engine.Limits{Timeout: time.Second})
			if !errors.Is(res.Error, airlock.ErrTimeout) || time.Since(start) > 20*time.Second {
				t.Errorf("error %v after %v, want a timeout after ~1s", res.Error, time.Since(start))
			}
		})
	}
}

// benchInvokeFigures runs program, which times 100,000 calls of each kind
// inside the guest and prints "NAME NS" lines, b.N times per engine, and
// reports each figure's median in ns per call.
func benchInvokeFigures(b *testing.B, program string) {
	for _, eng := range engine.Engines() {
		b.Run(eng, func(b *testing.B) {
			figures := map[string][]float64{}
			for range b.N {
				res := cxxehRun(b, eng, program, []string{"100000"}, engine.Limits{Timeout: 5 * time.Minute})
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
