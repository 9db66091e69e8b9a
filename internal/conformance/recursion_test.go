package airlock_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// Deep recursion ends as Python's RecursionError, never as a crash of the
// interpreter, wherever CPython guards it; what native CPython runs, runs.

// recursionCases each print "RecursionError" when CPython's guard stops
// them (and "finished" if they complete, which would be a failure here).
var recursionCases = map[string]string{
	"json.dumps": "import json\nl = []\nfor _ in range(10000): l = [l]\njson.dumps(l)",
	"json.loads": "import json\njson.loads('[' * 100000 + ']' * 100000)",
	"repr":       "l = []\nfor _ in range(10000): l = [l]\nrepr(l)",
	"dict-repr":  "d = {}\nfor _ in range(10000): d = {1: d}\nrepr(d)",
	"deepcopy":   "import copy\nl = []\nfor _ in range(10000): l = [l]\ncopy.deepcopy(l)",
	"pickle":     "import pickle\nl = []\nfor _ in range(10000): l = [l]\npickle.dumps(l)",
	"re":         "import re\nre.compile('(' * 2000 + 'a' + ')' * 2000)",
	"compare":    "a = []; b = []\nfor _ in range(10000): a = [a]; b = [b]\na == b",
	"python":     "def f(n): return f(n + 1)\nf(0)",
	"compile":    "compile('+'.join(['1'] * 200000), '<s>', 'eval')",
}

func recursionProgram(body string, limit int) string {
	prefix := "import sys\n"
	if limit > 0 {
		prefix += fmt.Sprintf("sys.setrecursionlimit(%d)\n", limit)
	}
	indented := "    " + strings.ReplaceAll(body, "\n", "\n    ")
	return prefix + "try:\n" + indented + "\n    print('finished')\nexcept RecursionError as e:\n    print('RecursionError:', e)\n"
}

func checkRecursionError(t *testing.T, s *airlock.Sandbox, name, code string) {
	t.Helper()
	res, err := runOn(t, s, airlock.Request{Code: code, Limits: airlock.Limits{Timeout: time.Minute}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: a crash, not a RecursionError: err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", name, err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.HasPrefix(string(res.Stdout), "RecursionError: maximum recursion depth exceeded") {
		t.Fatalf("%s: stdout = %q, want a RecursionError", name, res.Stdout)
	}
}

// Both builds, both modes, every engine; Python's default limit.
func TestDeepRecursionIsARecursionError(t *testing.T) {
	for name, body := range recursionCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkRecursionError(t, sb, name, recursionProgram(body, 0))
		})
	}
}

// What native CPython 3.13 runs, the own build runs: recursion through C
// (lru_cache, a class's __init__, itertools) as deep as natively, and,
// with Python's limit lifted, CPython's C recursion guard (5000 for WASI)
// still ends it before the stack does, on every engine (wasmtime's stack
// limit: engine/wasmtime/stack.go). The npm build (-O0, 512 KiB stack) does
// not: ~50 levels of lru_cache crash it (docs/engines.md).
func TestDeepRecursionOwnBuild(t *testing.T) {
	s := ownSandbox(t)
	out := mustRunOn(t, s, `
import functools, sys
def f(n): return 0 if n == 0 else 1 + f(n - 1)
print(f(800))
@functools.lru_cache(maxsize=None)
def g(n): return 0 if n == 0 else 1 + g(n - 1)
print(g(300))
g.cache_clear()
print(g(900))
class Node:
    def __init__(self, n):
        self.child = Node(n - 1) if n else None
Node(450)  # two frames a level (__init__ and its shim): 500 natively
print("nodes")
`)
	if out != "800\n300\n900\nnodes\n" {
		t.Fatalf("stdout = %q", out)
	}
	unbounded := map[string]string{
		"lru_cache": "import functools\n@functools.lru_cache(None)\ndef f(n): return f(n + 1)\nf(0)",
		"starmap":   "import itertools\ndef f(): return list(itertools.starmap(f, [()]))\nf()",
		"exec":      "def f(): exec('f()')\nf()",
		"getattr":   "class A:\n    def __getattr__(self, name): return getattr(A(), name)\nA().x",
		"str":       "class A:\n    def __str__(self): return str(A())\nstr(A())",
		"sorted":    "def f(x): return sorted([x], key=f)\nf(1)",
		"generator": "def g(): yield next(g())\nnext(g())",
		"repr":      "l = []\nfor _ in range(100000): l = [l]\nrepr(l)",
		"json":      "import json\nl = []\nfor _ in range(100000): l = [l]\njson.dumps(l)",
	}
	for name, body := range unbounded {
		t.Run(name, func(t *testing.T) {
			checkRecursionError(t, s, name, recursionProgram(body, 1_000_000))
		})
	}
}

// Recursion CPython does not guard (hashing a deeply nested tuple) ends
// at the engine's stack limit: a crash of that run, never of the host,
// even where the threads wasm runs on have small stacks (here: a child
// process whose stack rlimit is 2 MiB, as glibc gives threads when the
// limit is unlimited). wasmtime's limit was once larger than such a
// thread's stack, and the host died of SIGSEGV.
func TestUnguardedRecursionCannotCrashTheHost(t *testing.T) {
	const childEnv = "AIRLOCK_TEST_SMALL_STACK_CHILD"
	if os.Getenv(childEnv) == "1" {
		res, err := run(t, airlock.Request{
			Code:   "t = ()\nfor _ in range(10**6): t = (t,)\nprint('built', flush=True)\nhash(t)\nprint('hashed')",
			Limits: airlock.Limits{Timeout: time.Minute, Memory: 512 << 20},
		})
		if !errors.Is(err, airlock.ErrCrash) || string(res.Stdout) != "built\n" {
			t.Fatalf("err = %v, stdout %q, want a crash after building the tuple\nstderr:\n%s", err, res.Stdout, res.Stderr)
		}
		// The sandbox goes on.
		if out := mustRun(t, airlock.Request{Code: "print('next')"}); out != "next\n" {
			t.Fatalf("next run: %q", out)
		}
		return
	}
	if testing.Short() {
		t.Skip("-short: starts a child test process")
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &old); err != nil {
		t.Fatal(err)
	}
	small := old
	small.Cur = 2 << 20
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnguardedRecursionCannotCrashTheHost$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// The child's threads get their stack size from the rlimit it starts
	// with; this process's threads keep theirs.
	if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &small); err != nil {
		t.Fatal(err)
	}
	err := cmd.Start()
	if rerr := syscall.Setrlimit(syscall.RLIMIT_STACK, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child with 2 MiB thread stacks on %s: %v\n%s", sb.Engine(), err, out.String())
	}
	if !strings.Contains(out.String(), "--- PASS: TestUnguardedRecursionCannotCrashTheHost") {
		t.Fatalf("child did not pass:\n%s", out.String())
	}
}
