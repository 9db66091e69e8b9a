package airlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// sb is shared: compiling python.wasm once per test process is the cost
// worth paying once, and sharing it is itself what Sandbox promises.
var sb *airlock.Sandbox

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	sb, err = airlock.New(ctx, append(suiteOptions(), airlock.WithNotice(os.Stderr))...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "airlock tests need python.wasm: run scripts/setup.sh first:", err)
		os.Exit(1)
	}
	code := m.Run()
	sb.Close(ctx)
	os.Exit(code)
}

func run(t *testing.T, req airlock.Request) (*airlock.Result, error) {
	t.Helper()
	res, err := sb.Run(context.Background(), req)
	if res == nil {
		t.Fatalf("Run returned a nil Result (err %v)", err)
	}
	if (err == nil) != (res.Error == nil) {
		t.Fatalf("Run's error %v disagrees with Result.Error %v", err, res.Error)
	}
	return res, err
}

// mustRun runs code that must succeed with exit status 0 and returns stdout.
func mustRun(t *testing.T, req airlock.Request) string {
	t.Helper()
	res, err := run(t, req)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run failed: err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func TestHelloWorld(t *testing.T) {
	out := mustRun(t, airlock.Request{Code: `print("hello, world")`})
	if out != "hello, world\n" {
		t.Fatalf("stdout = %q", out)
	}
}

func TestExitCodesAndExceptions(t *testing.T) {
	cases := []struct {
		name       string
		code       string
		exit       int
		stderrHas  []string
		stdoutWant string
	}{
		{"clean", "print(1)", 0, nil, "1\n"},
		{"sys.exit(3)", "import sys; print('a'); sys.exit(3)", 3, nil, "a\n"},
		{"sys.exit(None)", "import sys; sys.exit()", 0, nil, ""},
		{"sys.exit(str)", "import sys; sys.exit('bye now')", 1, []string{"bye now"}, ""},
		{"raise", "def f():\n    raise ValueError('boom')\nf()\n", 1,
			[]string{"Traceback (most recent call last):", `File "<main>", line 3, in <module>`, "raise ValueError('boom')", "ValueError: boom"}, ""},
		{"syntax error", "def (:\n", 1, []string{"SyntaxError"}, ""},
		{"os._exit", "import os; os._exit(7)", 7, nil, ""},
		{"exit 256 wraps", "import sys; sys.exit(256)", 0, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(t, airlock.Request{Code: tc.code})
			if err != nil {
				t.Fatalf("unexpected sandbox error: %v", err)
			}
			if res.ExitCode != tc.exit {
				t.Fatalf("exit = %d, want %d; stderr:\n%s", res.ExitCode, tc.exit, res.Stderr)
			}
			if string(res.Stdout) != tc.stdoutWant {
				t.Fatalf("stdout = %q, want %q", res.Stdout, tc.stdoutWant)
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(string(res.Stderr), s) {
					t.Fatalf("stderr lacks %q:\n%s", s, res.Stderr)
				}
			}
			if strings.Contains(string(res.Stderr), "_airlock") {
				t.Fatalf("traceback shows the prelude:\n%s", res.Stderr)
			}
		})
	}
}

func TestStdin(t *testing.T) {
	out := mustRun(t, airlock.Request{
		Code:  "import sys\ndata = sys.stdin.read()\nprint(len(data), data.upper())",
		Stdin: []byte("abc\ndef"),
	})
	if out != "7 ABC\nDEF\n" {
		t.Fatalf("stdout = %q", out)
	}
	out = mustRun(t, airlock.Request{Code: "print(input('? '))", Stdin: []byte("typed\n")})
	if out != "? typed\n" {
		t.Fatalf("input(): stdout = %q", out)
	}
	// Buffered C stdio (PYTHONUNBUFFERED empty, so a fresh interpreter)
	// reads stdin ahead; the interactive loop that calls the prelude must
	// still not take in the code or the program's stdin after its line.
	out = mustRun(t, airlock.Request{
		Code:  "import sys\nprint(sys.stdin.read().upper())",
		Env:   map[string]string{"PYTHONUNBUFFERED": ""},
		Stdin: []byte("abc\ndef\n" + strings.Repeat("x", 5000)),
	})
	if out != "ABC\nDEF\n"+strings.Repeat("X", 5000)+"\n" {
		t.Fatalf("buffered stdio: stdout = %.60q...", out)
	}
}

func TestFilesInAndOut(t *testing.T) {
	res, err := run(t, airlock.Request{
		Code: `
import os
print(os.getcwd())
print(open("data.txt").read())
print(open("/tmp/abs.txt").read())
with open("out.txt", "w") as f:
    f.write("written")
os.makedirs("sub/dir")
open("sub/dir/x.bin", "wb").write(bytes(range(256)))
open("/tmp/scratch", "w").write("not reported: outside /home/user")
`,
		Files: map[string][]byte{"data.txt": []byte("input file"), "/tmp/abs.txt": []byte("absolute"), "same.txt": []byte("unchanged")},
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
	}
	if string(res.Stdout) != "/home/user\ninput file\nabsolute\n" {
		t.Fatalf("stdout = %q", res.Stdout)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Path] = string(f.Data)
		if int64(len(f.Data)) != f.Size {
			t.Fatalf("%s: size %d but %d bytes", f.Path, f.Size, len(f.Data))
		}
	}
	if len(got) != 2 || got["/home/user/out.txt"] != "written" || len(got["/home/user/sub/dir/x.bin"]) != 256 {
		t.Fatalf("files = %v", res.Files)
	}
}

func TestStdlibOnTheMemoryFilesystem(t *testing.T) {
	out := mustRun(t, airlock.Request{Code: `
import os, pathlib, shutil, tempfile, zipfile, sqlite3, json, glob

p = pathlib.Path("proj")
(p / "a" / "b").mkdir(parents=True)
(p / "a" / "b" / "f.txt").write_text("hello")
(p / "top.json").write_text(json.dumps({"k": [1, 2]}))
print(sorted(str(x) for x in p.rglob("*")))
shutil.copytree("proj", "copy")
shutil.move("copy/top.json", "copy/moved.json")
print(sorted(os.listdir("copy")), os.path.getsize("copy/moved.json"))
shutil.rmtree("copy")
print(os.path.exists("copy"))

with tempfile.TemporaryDirectory() as d:
    fn = os.path.join(d, "t")
    open(fn, "w").write("x" * 10)
    print(d.startswith("/tmp"), os.stat(fn).st_size)
with tempfile.TemporaryFile() as tf:
    tf.write(b"unlinked but open")
    tf.seek(0)
    print(tf.read())

with zipfile.ZipFile("z.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("inner.txt", "zipped " * 100)
with zipfile.ZipFile("z.zip") as z:
    print(z.namelist(), len(z.read("inner.txt")))

con = sqlite3.connect("/home/user/db.sqlite")
con.execute("create table t (x integer, y text)")
con.executemany("insert into t values (?, ?)", [(i, str(i)) for i in range(100)])
con.commit()
con.close()
con = sqlite3.connect("db.sqlite")
print(con.execute("select count(*), sum(x) from t").fetchone())
con.close()

os.rename("proj/top.json", "proj/renamed.json")
os.remove("proj/renamed.json")
os.rmdir("proj/a/b") if not os.listdir("proj/a/b") else None
print(sorted(glob.glob("proj/**", recursive=True)))
st = os.stat("db.sqlite")
print(st.st_size > 0, oct(st.st_mode)[:4])
`})
	want := `['proj/a', 'proj/a/b', 'proj/a/b/f.txt', 'proj/top.json']
['a', 'moved.json'] 13
False
True 10
b'unlinked but open'
['inner.txt'] 700
(100, 4950)
['proj/', 'proj/a', 'proj/a/b', 'proj/a/b/f.txt']
True 0o10
`
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestNoHostFilesReachable(t *testing.T) {
	out := mustRun(t, airlock.Request{Code: `
import os
for p in ["/etc/passwd", "../../../../etc/passwd", "/proc/self/environ", "/root", "/home/user/../../etc/hostname", "/work", "/usr/bin/env"]:
    print(p, os.path.exists(p))
print(sorted(os.listdir("/")))
print(os.listdir("/home/user/../.."))
print(os.path.realpath("/home/user/../../../.."))
`})
	want := `/etc/passwd False
../../../../etc/passwd False
/proc/self/environ False
/root False
/home/user/../../etc/hostname False
/work False
/usr/bin/env False
`
	if !strings.HasPrefix(out, want) {
		t.Fatalf("stdout:\n%s", out)
	}
	rest := strings.TrimPrefix(out, want)
	if !strings.Contains(rest, "'home'") || !strings.Contains(rest, "'tmp'") || strings.Contains(rest, "etc") || strings.Contains(rest, "proc") {
		t.Fatalf("root listing shows more than the sandbox: %s", rest)
	}
}

func TestNoNetwork(t *testing.T) {
	out := mustRun(t, airlock.Request{Code: `
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", 80))
    print("connected")
except Exception as e:
    print("refused", type(e).__name__)
try:
    socket.getaddrinfo("example.com", 80)
    print("resolved")
except Exception as e:
    print("no dns", type(e).__name__)
try:
    import urllib.request
    urllib.request.urlopen("http://127.0.0.1:1/", timeout=1)
    print("fetched")
except Exception as e:
    print("no http", type(e).__name__)
`})
	for _, bad := range []string{"connected", "resolved", "fetched"} {
		if strings.Contains(out, bad+"\n") {
			t.Fatalf("network reachable:\n%s", out)
		}
	}
	if strings.Count(out, "\n") != 3 {
		t.Fatalf("stdout:\n%s", out)
	}
}

func TestTimeout(t *testing.T) {
	start := time.Now()
	// 5 s leaves the fresh-interpreter mode time to start on a loaded
	// machine and print before the loop: the test is about what is kept.
	res, err := run(t, airlock.Request{Code: "print('started')\nwhile True: pass", Limits: airlock.Limits{Timeout: 5 * time.Second}})
	if !errors.Is(err, airlock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Kind != airlock.KindTimeout {
		t.Fatalf("errors.As: %v", err)
	}
	if string(res.Stdout) != "started\n" {
		t.Fatalf("partial stdout lost: %q", res.Stdout)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("timeout took %s to stop the run", d)
	}
	// time.sleep is interrupted too, not slept through.
	_, err = run(t, airlock.Request{Code: "import time; time.sleep(60)", Limits: airlock.Limits{Timeout: 2 * time.Second}})
	if !errors.Is(err, airlock.ErrTimeout) {
		t.Fatalf("sleep: err = %v", err)
	}
}

func TestCallerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	res, err := sb.Run(ctx, airlock.Request{Code: "while True: pass"})
	if !errors.Is(err, context.Canceled) || res.Error.Kind != airlock.KindTimeout {
		t.Fatalf("err = %v", err)
	}
}

func TestMemoryLimit(t *testing.T) {
	cases := map[string]string{
		"bytearray": "x = bytearray(200 * 1024 * 1024)\nprint('allocated')",
		"list":      "x = []\nwhile True:\n    x.append('y' * 100000)",
		"caught":    "try:\n    x = bytearray(200 * 1024 * 1024)\nexcept MemoryError:\n    print('caught')\n    raise",
	}
	for name, code := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := run(t, airlock.Request{Code: code, Limits: airlock.Limits{Memory: 64 << 20}})
			if !errors.Is(err, airlock.ErrMemoryLimit) {
				t.Fatalf("err = %v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
			}
			if res.PeakMemory > 64<<20 {
				t.Fatalf("peak memory %d above the cap", res.PeakMemory)
			}
			if strings.Contains(string(res.Stdout), "allocated") {
				t.Fatal("allocation beyond the cap succeeded")
			}
		})
	}
	// A program that recovers from MemoryError and exits 0 succeeded.
	out := mustRun(t, airlock.Request{
		Code:   "try:\n    x = bytearray(200 * 1024 * 1024)\nexcept MemoryError:\n    print('recovered')",
		Limits: airlock.Limits{Memory: 64 << 20},
	})
	if out != "recovered\n" {
		t.Fatalf("stdout = %q", out)
	}
	// A cap below what CPython needs to start is reported, not a crash.
	_, err := run(t, airlock.Request{Code: "pass", Limits: airlock.Limits{Memory: 1 << 20}})
	if !errors.Is(err, airlock.ErrMemoryLimit) {
		t.Fatalf("tiny cap: err = %v", err)
	}
}

func TestOutputLimit(t *testing.T) {
	for _, stream := range []string{"stdout", "stderr"} {
		t.Run(stream, func(t *testing.T) {
			res, err := run(t, airlock.Request{
				Code:   fmt.Sprintf("import sys\nwhile True:\n    sys.%s.write('x' * 1000)", stream),
				Limits: airlock.Limits{Output: 10000, Timeout: 10 * time.Second},
			})
			if !errors.Is(err, airlock.ErrOutputLimit) {
				t.Fatalf("err = %v", err)
			}
			got := res.Stdout
			if stream == "stderr" {
				got = res.Stderr
			}
			if len(got) != 10000 || strings.Trim(string(got), "x") != "" {
				t.Fatalf("kept %d bytes, want exactly the 10000-byte cap", len(got))
			}
		})
	}
}

func TestFSQuota(t *testing.T) {
	res, err := run(t, airlock.Request{
		Code:   "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * 65536)",
		Limits: airlock.Limits{FSBytes: 1 << 20},
	})
	if !errors.Is(err, airlock.ErrFSQuota) {
		t.Fatalf("bytes: err = %v stderr=%s", err, res.Stderr)
	}
	if !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("the guest did not see ENOSPC:\n%s", res.Stderr)
	}
	res, err = run(t, airlock.Request{
		Code:   "i = 0\nwhile True:\n    open(f'f{i}', 'w').close()\n    i += 1",
		Limits: airlock.Limits{FSFiles: 50},
	})
	if !errors.Is(err, airlock.ErrFSQuota) {
		t.Fatalf("files: err = %v stderr=%s", err, res.Stderr)
	}
}

func TestNothingCarriesOverBetweenRuns(t *testing.T) {
	mustRun(t, airlock.Request{Code: `
import sys, builtins, json
open("left.txt", "w").write("x")
open("/tmp/left.txt", "w").write("x")
sys.modules["json"].dumps = None
builtins.leak = 42
sys.path.append("/leak")
`})
	out := mustRun(t, airlock.Request{Code: `
import os, sys, builtins, json
print(os.path.exists("left.txt"), os.path.exists("/tmp/left.txt"), hasattr(builtins, "leak"), "/leak" in sys.path, json.dumps([1]))
`})
	if out != "False False False False [1]\n" {
		t.Fatalf("state carried over: %q", out)
	}
}

func TestConcurrentRunsAreIsolated(t *testing.T) {
	const n = 4
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Run(context.Background(), airlock.Request{
				Code: fmt.Sprintf(`
import os
open("mine.txt", "w").write("%d")
x = sum(range(20000))
print(sorted(os.listdir(".")), open("mine.txt").read(), x)
`, i),
			})
			errs[i] = err
			if res != nil {
				outs[i] = string(res.Stdout)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		want := fmt.Sprintf("['mine.txt'] %d 199990000\n", i)
		if errs[i] != nil || outs[i] != want {
			t.Fatalf("run %d: err=%v stdout=%q want %q", i, errs[i], outs[i], want)
		}
	}
}

func TestDeterministic(t *testing.T) {
	code := `
import random, time, os, uuid
print(random.random(), time.time(), os.urandom(4).hex(), hash("abc"), uuid.uuid4())
`
	a := mustRun(t, airlock.Request{Code: code, Deterministic: true, Seed: 7})
	b := mustRun(t, airlock.Request{Code: code, Deterministic: true, Seed: 7})
	c := mustRun(t, airlock.Request{Code: code, Deterministic: true, Seed: 8})
	if a != b {
		t.Fatalf("same seed, different output:\n%s%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same output: %s", a)
	}
	r1 := mustRun(t, airlock.Request{Code: code})
	r2 := mustRun(t, airlock.Request{Code: code})
	if r1 == r2 {
		t.Fatalf("non-deterministic runs printed the same randomness: %s", r1)
	}
	if !strings.Contains(a, " 946684800.") {
		t.Fatalf("fake clock does not start at 2000-01-01: %s", a)
	}
}

func TestEnv(t *testing.T) {
	out := mustRun(t, airlock.Request{
		Code: "import os; print(os.environ['GREETING'], os.environ['HOME'], 'AIRLOCK_CACHE_DIR' in os.environ, 'PATH' in os.environ)",
		Env:  map[string]string{"GREETING": "hi there"},
	})
	if out != "hi there /home/user False False\n" {
		t.Fatalf("stdout = %q", out)
	}
}

func TestInvalidRequests(t *testing.T) {
	cases := map[string]airlock.Request{
		"negative timeout": {Code: "pass", Limits: airlock.Limits{Timeout: -1}},
		"negative memory":  {Code: "pass", Limits: airlock.Limits{Memory: -5}},
		"env with =":       {Code: "pass", Env: map[string]string{"A=B": "c"}},
		"env with NUL":     {Code: "pass", Env: map[string]string{"A": "c\x00"}},
		"file NUL":         {Code: "pass", Files: map[string][]byte{"a\x00b": nil}},
		"file root":        {Code: "pass", Files: map[string][]byte{"/": nil}},
		"file over dir":    {Code: "pass", Files: map[string][]byte{"/home/user": []byte("x")}},
		"code too big":     {Code: strings.Repeat("#", 17<<20)},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := run(t, req)
			if !errors.Is(err, airlock.ErrInvalidRequest) {
				t.Fatalf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}
	// Files beyond the quota are the quota's business, not a malformed request.
	_, err := run(t, airlock.Request{Code: "pass", Files: map[string][]byte{"big": make([]byte, 2<<20)}, Limits: airlock.Limits{FSBytes: 1 << 20}})
	if !errors.Is(err, airlock.ErrFSQuota) {
		t.Fatalf("oversized input file: err = %v", err)
	}
}

func TestRecursionIsCaught(t *testing.T) {
	// Deep recursion in C (repr of a deeply nested list) with Python's limit
	// raised: the interpreter's C-stack guard, or else the engine's stack
	// check, ends the run cleanly; the host never sees it.
	res, err := run(t, airlock.Request{
		Code: "import sys\nsys.setrecursionlimit(10**6)\nl = []\nfor _ in range(10**5): l = [l]\nprint(len(repr(l)))",
	})
	if err == nil && res.ExitCode == 0 {
		t.Fatalf("100000-deep repr succeeded: %s", res.Stdout)
	}
	if err != nil && !errors.Is(err, airlock.ErrCrash) {
		t.Fatalf("err = %v", err)
	}
	out := mustRun(t, airlock.Request{Code: "def f(n): return f(n+1)\ntry:\n    f(0)\nexcept RecursionError:\n    print('RecursionError')"})
	if out != "RecursionError\n" {
		t.Fatalf("stdout = %q", out)
	}
}

func TestRunAfterCloseIsAnError(t *testing.T) {
	closed, err := airlock.New(context.Background(), airlock.WithSnapshots(true))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close(context.Background())
	// A deterministic run needs the fresh-interpreter module, which a
	// closed Sandbox must not load; it fails instead of crashing.
	res, err := closed.Run(context.Background(), airlock.Request{Code: "pass", Deterministic: true})
	if err == nil || res == nil {
		t.Fatalf("run after Close: res=%v err=%v", res, err)
	}
}
