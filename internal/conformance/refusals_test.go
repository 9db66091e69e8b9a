package airlock_test

import (
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// What the sandbox refuses must say so, in words a model reading the
// error can act on (python/refusals.py): the exception type code already
// catches, and a message that names the restriction and what to do.

// refusalProbe prints one line per attempt: label, exception type, and
// the message (for urllib, the URLError's reason type and message too).
const refusalProbe = `
import os, sys
def attempt(label, fn):
    try:
        fn()
        print(label + "|ALLOWED|")
    except BaseException as e:
        kind = type(e).__name__
        if hasattr(e, "reason") and isinstance(e.reason, BaseException):
            kind += "(" + type(e.reason).__name__ + ")"
        print(label + "|" + kind + "|" + str(e).replace("\n", " "))
def show(label, value):
    print(label + "|VALUE|" + str(value))
`

const (
	netMessage    = "airlock: network access is disabled in this sandbox (no sockets, no DNS, no HTTP)"
	procMessage   = "airlock: this sandbox cannot start processes"
	threadMessage = "airlock: cannot start another thread"
	pkgMessage    = "airlock: nothing can be installed in this sandbox (no pip, no network)"
)

type refusal struct {
	label, code string
	kind        string   // the exception's type name, as printed
	has         []string // substrings of its message
}

func checkRefusals(t *testing.T, s *airlock.Sandbox, cases []refusal) {
	t.Helper()
	var code strings.Builder
	code.WriteString(refusalProbe)
	for _, c := range cases {
		code.WriteString(c.code + "\n")
	}
	res, err := runOn(t, s, airlock.Request{Code: code.String()})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	got := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) == 3 {
			got[parts[0]] = [2]string{parts[1], parts[2]}
		}
	}
	for _, c := range cases {
		g, ok := got[c.label]
		if !ok {
			t.Errorf("%s: no result in stdout:\n%s", c.label, res.Stdout)
			continue
		}
		if g[0] != c.kind {
			t.Errorf("%s: raised %s (%s), want %s", c.label, g[0], g[1], c.kind)
		}
		for _, s := range c.has {
			if !strings.Contains(g[1], s) {
				t.Errorf("%s: message %q lacks %q", c.label, g[1], s)
			}
		}
	}
}

func runOn(t *testing.T, s *airlock.Sandbox, req airlock.Request) (*airlock.Result, error) {
	t.Helper()
	if s == sb {
		return run(t, req)
	}
	res, err := s.Run(t.Context(), req)
	if res == nil {
		t.Fatalf("Run returned a nil Result (err %v)", err)
	}
	return res, err
}

// Threads where a sandbox has none (wasmtime, the npm build): RuntimeError,
// as CPython raises when it cannot start one, saying why.
func threadRefusals(s *airlock.Sandbox) []refusal {
	if s.Threads() {
		return nil // TestThreadsRun
	}
	return []refusal{
		{"Thread.start", `import threading; attempt("Thread.start", lambda: threading.Thread(target=print).start())`,
			"RuntimeError", []string{threadMessage, "wasmtime", "npm", "sequentially"}},
		{"Timer", `attempt("Timer", lambda: threading.Timer(1, print).start())`, "RuntimeError", []string{threadMessage}},
		{"_thread", `import _thread; attempt("_thread", lambda: _thread.start_new_thread(print, ()))`, "RuntimeError", []string{threadMessage}},
		{"threads-left-refused", `show("threads-left-refused", threading.active_count())`, "VALUE", []string{"1"}},
	}
}

// Both builds (npm 3.12, own 3.13), both modes, every engine.
func TestRefusalsSayWhy(t *testing.T) {
	checkRefusals(t, sb, append(threadRefusals(sb), []refusal{
		// Network: PermissionError, an OSError, so code that handles a
		// failed connection (OSError, URLError) handles this one.
		{"create_connection", `import socket; attempt("create_connection", lambda: socket.create_connection(("example.com", 80), timeout=1))`,
			"PermissionError", []string{netMessage, "files", "help(airlock.tools)"}},
		{"create_connection-ip", `attempt("create_connection-ip", lambda: socket.create_connection(("127.0.0.1", 80), timeout=1))`,
			"PermissionError", []string{netMessage}},
		{"getaddrinfo", `attempt("getaddrinfo", lambda: socket.getaddrinfo("example.com", 443))`, "PermissionError", []string{netMessage}},
		{"gethostbyname", `attempt("gethostbyname", lambda: socket.gethostbyname("example.com"))`, "PermissionError", []string{netMessage}},
		{"socket-connect", `attempt("socket-connect", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("10.0.0.1", 80)))`,
			"PermissionError", []string{netMessage}},
		{"create_server", `attempt("create_server", lambda: socket.create_server(("", 8000)))`, "PermissionError", []string{netMessage}},
		{"urlopen-http", `import urllib.request; attempt("urlopen-http", lambda: urllib.request.urlopen("http://example.com/", timeout=1))`,
			"URLError(PermissionError)", []string{"<urlopen error " + netMessage}},
		{"urlopen-https", `attempt("urlopen-https", lambda: urllib.request.urlopen("https://example.com/", timeout=1))`,
			"URLError(PermissionError)", []string{"<urlopen error " + netMessage}},
		{"urlopen-is-oserror", `
def f():
    try:
        urllib.request.urlopen("https://example.com/")
    except OSError as e:
        raise ValueError("caught as OSError") from None
attempt("urlopen-is-oserror", f)`, "ValueError", []string{"caught as OSError"}},
		{"http.client", `import http.client; attempt("http.client", lambda: http.client.HTTPConnection("example.com", timeout=1).request("GET", "/"))`,
			"PermissionError", []string{netMessage}},
		{"HTTPSConnection", `attempt("HTTPSConnection", lambda: http.client.HTTPSConnection("example.com"))`,
			"AttributeError", []string{"no attribute 'HTTPSConnection'", netMessage}},
		{"socketpair", `attempt("socketpair", lambda: socket.socketpair())`, "PermissionError", []string{"airlock: ", "no sockets"}},
		// A socket for an existing descriptor is not the network: it
		// fails as before (descriptor 1 is stdout, not a socket).
		{"socket-fileno", `attempt("socket-fileno", lambda: socket.socket(fileno=1).send(b"x"))`, "OSError", nil},

		// Processes.
		{"subprocess.run", `import subprocess; attempt("subprocess.run", lambda: subprocess.run(["ls", "-l"]))`,
			"PermissionError", []string{procMessage, "do the work in Python"}},
		{"subprocess.Popen-shell", `attempt("subprocess.Popen-shell", lambda: subprocess.Popen("echo hi", shell=True))`,
			"PermissionError", []string{procMessage}},
		{"check_output", `attempt("check_output", lambda: subprocess.check_output(["uname", "-a"]))`, "PermissionError", []string{procMessage}},
		{"os.popen", `attempt("os.popen", lambda: os.popen("ls").read())`, "PermissionError", []string{procMessage}},
		{"os.execl", `attempt("os.execl", lambda: os.execl("/bin/ls", "ls"))`, "PermissionError", []string{procMessage}},
		{"os.execvp", `attempt("os.execvp", lambda: os.execvp("ls", ["ls"]))`, "PermissionError", []string{procMessage}},
		// Code probing for a tool catches FileNotFoundError, what a program
		// that is not installed raises: a refused one is that too.
		{"probe", `
def probe():
    try:
        subprocess.run(["latex", "--version"], capture_output=True)
    except FileNotFoundError as e:
        raise ValueError("no latex: " + str(e))
attempt("probe", probe)`, "ValueError", []string{"no latex: " + procMessage}},
		{"probe-popen", `
try:
    os.popen("fc-list").read()
except FileNotFoundError as e:
    print("probe-popen|caught|" + str(e))`, "caught", []string{procMessage}},
		// Absent on WASI, and still absent (feature tests keep working),
		// but the AttributeError says why.
		{"os.system", `attempt("os.system", lambda: os.system("ls"))`, "AttributeError", []string{"no attribute 'system'", procMessage}},
		{"os.fork", `attempt("os.fork", lambda: os.fork())`, "AttributeError", []string{"no attribute 'fork'", procMessage}},
		{"os.execv", `attempt("os.execv", lambda: os.execv("/bin/ls", ["ls"]))`, "AttributeError", []string{"no attribute 'execv'", procMessage}},
		{"os.spawnv", `attempt("os.spawnv", lambda: os.spawnv(0, "/bin/ls", ["ls"]))`, "AttributeError", []string{"no attribute 'spawnv'", procMessage}},
		{"os.posix_spawn", `attempt("os.posix_spawn", lambda: os.posix_spawn("/bin/ls", ["ls"], {}))`, "AttributeError", []string{procMessage}},
		{"hasattr", `show("hasattr", [hasattr(os, n) for n in ("fork", "system", "execv", "no_such_thing")])`,
			"VALUE", []string{"[False, False, False, False]"}},
		{"os-other-attribute", `attempt("os-other-attribute", lambda: os.no_such_thing)`, "AttributeError", []string{"module 'os' has no attribute 'no_such_thing'"}},

		{"threads-left", `import threading; show("threads-left", threading.active_count())`, "VALUE", []string{"1"}},

		// Installing packages: pip run any way says how packages get here.
		{"pip-module", `attempt("pip-module", lambda: subprocess.run([sys.executable, "-m", "pip", "install", "requests"]))`,
			"PermissionError", []string{pkgMessage, "no pip", "airlock.WithPackages", "Request.Packages", "--package"}},
		{"pip-shell", `attempt("pip-shell", lambda: subprocess.check_call("pip install requests", shell=True))`, "PermissionError", []string{pkgMessage}},
		{"pip3-popen", `attempt("pip3-popen", lambda: os.popen("pip3 install numpy"))`, "PermissionError", []string{pkgMessage}},
		{"pip3.13", `attempt("pip3.13", lambda: subprocess.run(["/usr/bin/pip3.13", "install", "x"]))`, "PermissionError", []string{pkgMessage}},
		{"import-pip", `attempt("import-pip", lambda: __import__("pip"))`, "ModuleNotFoundError", []string{"No module named 'pip'"}},
		// No finder raises: a module that is not there is still not found.
		{"find_spec", `import importlib.util; show("find_spec", [importlib.util.find_spec(n) for n in ("pip", "scrapy", "no_such_module")])`,
			"VALUE", []string{"[None, None, None]"}},
	}...))
}

// The own build's stdlib has multiprocessing, concurrent.futures and a
// working asyncio (the npm build has none of the first two, and its
// asyncio loop cannot start).
func TestRefusalsSayWhyOwnBuild(t *testing.T) {
	s := ownSandbox(t)
	threads := []refusal{
		{"mp.ThreadPool", `import multiprocessing.pool; attempt("mp.ThreadPool", lambda: multiprocessing.pool.ThreadPool(2))`,
			"RuntimeError", []string{"multiprocessing.pool.ThreadPool needs multiprocessing's locks", "ThreadPoolExecutor"}},
	}
	if !s.Threads() { // wasmtime
		threads = append(threads, []refusal{
			{"ThreadPoolExecutor", `import concurrent.futures as cf; attempt("ThreadPoolExecutor", lambda: cf.ThreadPoolExecutor().submit(print))`, "RuntimeError", []string{threadMessage}},
			{"asyncio-to_thread", `import asyncio; attempt("asyncio-to_thread", lambda: asyncio.run(asyncio.to_thread(print)))`,
				"RuntimeError", []string{threadMessage}},
		}...)
	}
	checkRefusals(t, s, append(threads, []refusal{
		{"mp.Process", `import multiprocessing; attempt("mp.Process", lambda: multiprocessing.Process(target=print).start())`,
			"PermissionError", []string{procMessage, "multiprocessing"}},
		{"mp.Pool", `attempt("mp.Pool", lambda: multiprocessing.Pool(2))`, "PermissionError", []string{procMessage}},
		{"mp.pool.Pool", `import multiprocessing.pool; attempt("mp.pool.Pool", lambda: multiprocessing.pool.Pool(2))`, "PermissionError", []string{procMessage}},
		{"mp.Queue", `attempt("mp.Queue", lambda: multiprocessing.Queue())`, "PermissionError", []string{procMessage}},
		{"ProcessPoolExecutor", `import concurrent.futures as cf; attempt("ProcessPoolExecutor", lambda: cf.ProcessPoolExecutor().submit(print))`,
			"PermissionError", []string{procMessage}},
		{"asyncio-open_connection", `import asyncio; attempt("asyncio-open_connection", lambda: asyncio.run(asyncio.open_connection("example.com", 80)))`,
			"PermissionError", []string{netMessage}},
		{"asyncio-open_connection-ip", `attempt("asyncio-open_connection-ip", lambda: asyncio.run(asyncio.open_connection("127.0.0.1", 80)))`,
			"PermissionError", []string{netMessage}},
		// asyncio without the network still works.
		{"asyncio-sleep", `
async def two():
    await asyncio.gather(asyncio.sleep(0), asyncio.sleep(0))
    raise ValueError("gathered")
attempt("asyncio-sleep", lambda: asyncio.run(two()))`, "ValueError", []string{"gathered"}},
	}...))
}

// An uncaught ModuleNotFoundError ends with a note that says what can be
// imported here and how the host adds packages.
func TestMissingModuleHint(t *testing.T) {
	cases := []struct{ code, want, note string }{
		{"import no_such_module_anywhere", "ModuleNotFoundError: No module named 'no_such_module_anywhere'", pkgMessage},
		{"import pip", "ModuleNotFoundError: No module named 'pip'", pkgMessage},
		{"import ensurepip\nensurepip.bootstrap()", "ensurepip", pkgMessage},
		{"import sklearn.linear_model", "ModuleNotFoundError: No module named 'sklearn'", pkgMessage},
		{"import ssl", "ModuleNotFoundError: No module named", netMessage},
		{"import ctypes", "ModuleNotFoundError: No module named", "airlock: the standard library module"},
	}
	for _, c := range cases {
		t.Run(strings.Fields(c.code)[1], func(t *testing.T) {
			res, err := run(t, airlock.Request{Code: c.code})
			if err != nil || res.ExitCode != 1 {
				t.Fatalf("err=%v exit=%d, want exit 1\nstderr:\n%s", err, res.ExitCode, res.Stderr)
			}
			stderr := string(res.Stderr)
			i := strings.Index(stderr, c.want)
			if i < 0 {
				t.Fatalf("stderr lacks %q:\n%s", c.want, stderr)
			}
			// The note follows the exception's line, the last thing printed.
			if !strings.Contains(stderr[i:], "\n"+c.note) || !strings.Contains(stderr, "Traceback (most recent call last):") {
				t.Fatalf("stderr lacks the note %q after %q:\n%s", c.note, c.want, stderr)
			}
			if strings.Contains(stderr, "_airlock") {
				t.Fatalf("traceback shows the prelude:\n%s", stderr)
			}
		})
	}
	// A caught one carries no note, and neither does a module the
	// program itself failed to write.
	out := mustRun(t, airlock.Request{Code: "try:\n    import scrapy\nexcept ImportError as e:\n    print(getattr(e, '__notes__', None))"})
	if out != "None\n" {
		t.Fatalf("caught ModuleNotFoundError: stdout = %q, want no notes", out)
	}
	res, err := run(t, airlock.Request{Code: "raise ModuleNotFoundError('custom')"})
	if err != nil || res.ExitCode != 1 || strings.Contains(string(res.Stderr), "airlock:") {
		t.Fatalf("a ModuleNotFoundError without a module name: err=%v exit=%d stderr:\n%s", err, res.ExitCode, res.Stderr)
	}
}

// A refusal's traceback names where it was raised ("<airlock sandbox>"),
// not a line of the run's own code.
func TestRefusalTraceback(t *testing.T) {
	res, err := run(t, airlock.Request{Code: "import subprocess\nsubprocess.run(['ls'])\n"})
	if err != nil || res.ExitCode != 1 {
		t.Fatalf("err=%v exit=%d\nstderr:\n%s", err, res.ExitCode, res.Stderr)
	}
	stderr := string(res.Stderr)
	for _, want := range []string{`File "<main>", line 2, in <module>`, `File "<airlock sandbox>"`, "PermissionError: " + procMessage} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "_airlock") {
		t.Fatalf("traceback shows the prelude:\n%s", stderr)
	}
}

// The refusals are the guest's own: a program that undoes them gets
// CPython's errors back, and the next run has them again.
func TestRefusalsUndoneByTheProgram(t *testing.T) {
	out := mustRun(t, airlock.Request{Code: `
import socket
del socket.getaddrinfo
try:
    socket.getaddrinfo("example.com", 80)
except AttributeError:
    print("undone")
`})
	if out != "undone\n" {
		t.Fatalf("stdout = %q", out)
	}
	checkRefusals(t, sb, []refusal{
		{"again", `import socket; attempt("again", lambda: socket.getaddrinfo("example.com", 80))`, "PermissionError", []string{netMessage}},
	})
}
