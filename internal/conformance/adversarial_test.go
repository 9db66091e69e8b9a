package airlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// attack is one adversarial case: what a hostile or broken program tries,
// and the safe outcome the sandbox must produce. When kind is empty the
// program ran to its own exit, with status exit and stdout equal to want;
// otherwise the run must end with that error kind and stdout must start
// with want.
type attack struct {
	name   string
	code   string
	limits airlock.Limits
	kind   airlock.Kind
	exit   int
	want   string
}

// prologue's attempt prints the exception class an operation raised, or
// "ALLOWED" if it succeeded.
const prologue = `
import os, sys
def attempt(label, fn):
    try:
        fn()
        print(label, "ALLOWED")
    except BaseException as e:
        print(label, type(e).__name__)
`

var attacks = []attack{
	// Filesystem: nothing of the host is reachable, quotas hold.
	{name: "fs/etc-passwd", code: `attempt("read", lambda: open("/etc/passwd").read())`, want: "read FileNotFoundError\n"},
	{name: "fs/dotdot-escape", code: `attempt("read", lambda: open("../../../../../etc/passwd").read())`, want: "read FileNotFoundError\n"},
	{name: "fs/dotdot-at-root", code: `os.chdir("/../../.."); print(os.path.abspath(os.getcwd()), sorted(os.listdir(".")))`, want: "/ ['dev', 'home', 'opt', 'tmp']\n"},
	{name: "fs/proc-self", code: `attempt("proc", lambda: open("/proc/self/mem", "rb"))`, want: "proc FileNotFoundError\n"},
	// /dev/null discards (200 MiB, past any quota, stores nothing) and is
	// the only device listed; no other of the host's devices is there.
	{name: "fs/dev-null-discards", code: `f = open(os.devnull, "wb"); [f.write(b"x" * (1 << 20)) for _ in range(200)]; f.seek(0, 2); print(f.tell()); f.close()
print(open(os.devnull).read() == "", os.listdir("/dev"), os.stat(os.devnull).st_size, os.path.exists("/dev/random"))`, want: "0\nTrue ['null'] 0 False\n"},
	{name: "fs/symlink-out", code: `attempt("symlink", lambda: os.symlink("/etc/passwd", "p")); print(os.path.exists("p"))`, want: "symlink PermissionError\nFalse\n"},
	// Links resolve inside the memory filesystem only: ".." chains stop
	// at its root, loops end in ELOOP, devices are not reached through them.
	{name: "fs/symlink-dotdot-out", code: `os.symlink("../../../../../../etc/passwd", "p"); attempt("read", lambda: open("p").read()); print(os.readlink("p"), os.path.lexists("p"), os.path.exists("p"))`, want: "read FileNotFoundError\n../../../../../../etc/passwd True False\n"},
	{name: "fs/symlink-to-root", code: `os.symlink("../../../..", "r"); print(sorted(os.listdir("r")) == sorted(os.listdir("/")), os.path.realpath("r"))`, want: "True /\n"},
	{name: "fs/symlink-loop", code: `os.symlink("a", "b"); os.symlink("b", "a"); attempt("open", lambda: open("a"))
import errno; 
try: os.stat("a")
except OSError as e: print(e.errno == errno.ELOOP)`, want: "open OSError\nTrue\n"},
	{name: "fs/symlink-to-device", code: `os.symlink("../../dev/airlock-audit", "d"); attempt("abs", lambda: os.symlink("/dev/airlock-audit", "e"))
attempt("open", lambda: os.open("d", os.O_WRONLY)); print(os.path.exists("/dev/airlock-audit"))`, want: "abs PermissionError\nopen FileNotFoundError\nFalse\n"},
	{name: "fs/symlink-inside", code: `os.mkdir("d"); open("d/f", "w").write("hi"); os.symlink("d/f", "l"); os.symlink("d", "ld")
print(open("l").read(), os.listdir("ld"), os.path.islink("l"), os.lstat("l").st_size)
os.rename("l", "l2"); os.unlink("l2"); print(open("d/f").read(), os.path.exists("l2"))
import shutil; shutil.copytree("d", "c", symlinks=True); print(os.listdir("c"))`, want: "hi ['f'] True 3\nhi False\n['f']\n"},
	{name: "fs/hardlink-out", code: `attempt("link", lambda: os.link("/etc/passwd", "p"))`, want: "link FileNotFoundError\n"},
	{name: "fs/hardlink-inside", code: `open("a","w").write("x"); os.link("a","b"); print(open("b").read(), os.stat("a").st_nlink)`, want: "x 2\n"},
	{name: "fs/nul-in-path", code: `attempt("nul", lambda: open("a\0b", "w"))`, want: "nul ValueError\n"},
	{name: "fs/long-name", code: `attempt("long", lambda: open("n" * 300, "w"))`, want: "long OSError\n"},
	{name: "fs/long-path", code: `attempt("path", lambda: os.makedirs("/".join(["d" * 200] * 30)))`, want: "path OSError\n"},
	{name: "fs/deep-nesting", code: `for _ in range(1000):
    os.mkdir("d"); os.chdir("d")
print(len(os.getcwd()), os.path.isdir("/home/user/" + "/".join(["d"] * 1000)))`, want: "2010 True\n"},
	// A hole is not stored, but its size counts against the quota (every
	// file must be able to leave the sandbox whole): a terabyte file is
	// refused, as on a small disk, and the room stays for real files.
	{name: "fs/sparse-huge-file", code: `f = open("big", "wb"); attempt("truncate", lambda: f.truncate(10**12)); f.close()
print(os.path.getsize("big")); fd = os.open("big", os.O_WRONLY); attempt("ftruncate", lambda: os.ftruncate(fd, 2**40)); os.close(fd)
open("small", "wb").write(b"x" * 900000); print(os.path.getsize("small"))`, limits: airlock.Limits{FSBytes: 1 << 20}, want: "truncate OSError\n0\nftruncate OSError\n900000\n"},
	// CPython's test_io large_file_ops: past 2 GiB, with a quota that
	// holds the file's size (its holes are not stored).
	{name: "fs/large-file-ops", code: `LARGE = 2**31
with open("lf", "w+b") as f:
    assert f.seek(LARGE) == LARGE and f.write(b"xxx") == 3 and f.tell() == LARGE + 3
    assert f.seek(-1, 1) == LARGE + 2 and f.truncate() == LARGE + 2
    assert f.seek(0, 2) == LARGE + 2 and f.truncate(LARGE + 1) == LARGE + 1
    assert f.seek(-1, 2) == LARGE and f.read(2) == b"x"
    f.seek(LARGE - 10); print(f.read(12))
print(os.path.getsize("lf")); os.remove("lf")`, limits: airlock.Limits{FSBytes: 3 << 30}, want: "b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00x'\n2147483649\n"},
	{name: "fs/sparse-quota", code: `f = open("s", "wb")
for i in range(1, 200):
    f.seek(i * 2**24); f.write(b"y" * 8000)
f.flush()`, limits: airlock.Limits{FSBytes: 1 << 20}, kind: airlock.KindFSQuota},
	{name: "fs/seek-and-write-far", code: `f = open("far", "wb"); f.seek(2**40); attempt("write", lambda: (f.write(b"x"), f.flush()))`, want: "write OSError\n"},
	{name: "fs/many-tiny-files", code: `i = 0
while True:
    open(f"f{i}", "w").close(); i += 1`, limits: airlock.Limits{FSFiles: 200}, kind: airlock.KindFSQuota},
	{name: "fs/fill-bytes", code: `f = open("x", "wb")
while True: f.write(b"x" * 65536)`, limits: airlock.Limits{FSBytes: 4 << 20}, kind: airlock.KindFSQuota},
	{name: "fs/quota-exact-edge", code: `open("x", "wb").write(b"x" * 1000000); print(os.path.getsize("x"))`, limits: airlock.Limits{FSBytes: 1000000}, want: "1000000\n"},
	{name: "fs/rename-into-self", code: `os.mkdir("d"); attempt("rename", lambda: os.rename("d", "d/e"))`, want: "rename OSError\n"},
	// tempfile retries only on EEXIST: O_CREAT|O_EXCL on a directory says so.
	{name: "fs/excl-on-dir", code: `os.mkdir("d"); attempt("open", lambda: os.open("d", os.O_RDWR | os.O_CREAT | os.O_EXCL))
attempt("rdwr", lambda: os.open("d", os.O_RDWR)); fd = os.open("d", os.O_RDONLY); print(os.fstat(fd).st_nlink); os.close(fd)`, want: "open FileExistsError\nrdwr IsADirectoryError\n2\n"},
	{name: "fs/rmdir-root", code: `attempt("rmdir", lambda: os.rmdir("/"))`, want: "rmdir OSError\n"},
	{name: "fs/unicode-names", code: `open("ünï😀", "w").close(); print(os.listdir("."))`, want: "['ünï😀']\n"},
	// Heavy cases get a generous timeout: the -O0 build is slow and CI
	// machines are shared; the outcome, not the speed, is under test.
	{name: "fs/scandir-5000", code: `[open(f"{i:05}", "w").close() for i in range(5000)]; print(len(list(os.scandir("."))))`, limits: airlock.Limits{Timeout: time.Minute}, want: "5000\n"},
	{name: "fs/sqlite-outside", code: `import sqlite3
attempt("sqlite", lambda: sqlite3.connect("/etc/shadow.db").execute("create table t(x)"))`, want: "sqlite OperationalError\n"},

	// Network: there is no way out, and the errors say so (python/refusals.py;
	// the messages are checked in refusals_test.go).
	{name: "net/connect", code: `import socket
attempt("connect", lambda: socket.create_connection(("127.0.0.1", 22), timeout=1))`, want: "connect PermissionError\n"},
	{name: "net/socket-object", code: `import socket
attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("10.0.0.1", 80)))`, want: "socket PermissionError\n"},
	{name: "net/dns", code: `import socket
attempt("dns", lambda: socket.getaddrinfo("example.com", 443))`, want: "dns PermissionError\n"},
	{name: "net/urllib", code: `import urllib.request
attempt("http", lambda: urllib.request.urlopen("http://169.254.169.254/latest/meta-data/", timeout=1))`, want: "http URLError\n"},
	{name: "net/fromfd-every-fd", code: `import socket
ok = 0
for fd in range(16):
    try:
        socket.socket(fileno=fd).send(b"x"); ok += 1
    except BaseException:
        pass
print("sent on", ok)`, want: "sent on 0\n"},
	{name: "net/subprocess", code: `import subprocess
attempt("spawn", lambda: subprocess.run(["sh", "-c", "id"]))`, want: "spawn PermissionError\n"},
	{name: "net/os-system", code: `attempt("system", lambda: os.system("id"))`, want: "system AttributeError\n"},
	{name: "net/fork", code: `attempt("fork", lambda: os.fork())`, want: "fork AttributeError\n"},
	{name: "net/ctypes", code: `attempt("ctypes", lambda: __import__("ctypes"))`, want: "ctypes ModuleNotFoundError\n"},

	// CPU: every loop ends at the deadline.
	{name: "cpu/busy-loop", code: `while True: pass`, limits: airlock.Limits{Timeout: time.Second}, kind: airlock.KindTimeout},
	{name: "cpu/loop-in-c", code: `import itertools
for _ in itertools.count(): pass`, limits: airlock.Limits{Timeout: time.Second}, kind: airlock.KindTimeout},
	{name: "cpu/regex-backtracking", code: `import re
re.match(r"(a+)+$", "a" * 64 + "b")`, limits: airlock.Limits{Timeout: time.Second}, kind: airlock.KindTimeout},
	{name: "cpu/bigint-power", code: `x = 10**10**8
print(len(str(x)))`, limits: airlock.Limits{Timeout: time.Second, Memory: 128 << 20}, kind: airlock.KindTimeout},
	{name: "cpu/sleep-forever", code: `import time
time.sleep(10**6)`, limits: airlock.Limits{Timeout: time.Second}, kind: airlock.KindTimeout},
	// A thread bomb: past the cap (wazero) or at the first (wasmtime, npm),
	// a start raises.
	{name: "cpu/threads", code: `import threading, time
attempt("thread", lambda: [threading.Thread(target=time.sleep, args=(5,), daemon=True).start() for _ in range(10**4)])`,
		want: "thread RuntimeError\n"},
	{name: "cpu/recursion", code: `def f(): f()
attempt("recurse", f)`, want: "recurse RecursionError\n"},
	{name: "cpu/c-recursion", code: `sys.setrecursionlimit(10**7)
l = []
for _ in range(10**5): l = [l]
attempt("repr", lambda: repr(l))`, want: "repr RecursionError\n"},

	// Memory: the cap holds, whatever the allocation pattern.
	{name: "mem/bytearray-512m", code: `x = bytearray(512 << 20)`, limits: airlock.Limits{Memory: 64 << 20}, kind: airlock.KindMemoryLimit},
	// 2 GiB is past what wasm32's allocator will even ask for: the guest
	// refuses itself (MemoryError, exit 1) before reaching the cap.
	{name: "mem/bytearray-2g", code: `x = bytearray(2**31 - 1)`, limits: airlock.Limits{Memory: 64 << 20}, exit: 1},
	{name: "mem/list-growth", code: `x = []
while True: x.append(bytearray(1 << 20))`, limits: airlock.Limits{Memory: 64 << 20}, kind: airlock.KindMemoryLimit},
	{name: "mem/string-repeat", code: `x = "x" * (2**30)`, limits: airlock.Limits{Memory: 64 << 20}, kind: airlock.KindMemoryLimit},
	{name: "mem/dict-bomb", code: `d = {i: str(i) for i in range(10**8)}`, limits: airlock.Limits{Memory: 64 << 20, Timeout: 60 * time.Second}, kind: airlock.KindMemoryLimit},
	{name: "mem/caught-and-survived", code: `try:
    x = bytearray(1 << 30)
except MemoryError:
    print("survived")`, limits: airlock.Limits{Memory: 64 << 20}, want: "survived\n"},
	{name: "mem/grow-to-4g", code: `chunks = []
try:
    while True: chunks.append(bytearray(32 << 20))
except MemoryError:
    pass
print(len(chunks) >= 6)`, limits: airlock.Limits{Memory: 256 << 20, Timeout: time.Minute}, want: "True\n"},

	// Output: floods are cut at the cap, exactly, and end the run.
	{name: "out/stdout-flood", code: `while True: print("x" * 100)`, limits: airlock.Limits{Output: 4096}, kind: airlock.KindOutputLimit},
	{name: "out/stderr-flood", code: `while True: sys.stderr.write("y" * 100)`, limits: airlock.Limits{Output: 4096}, kind: airlock.KindOutputLimit},
	{name: "out/one-huge-line", code: `print("z" * 10**7)`, limits: airlock.Limits{Output: 1 << 20}, kind: airlock.KindOutputLimit},
	{name: "out/raw-fd-write", code: `while True: os.write(1, b"w" * 4096)`, limits: airlock.Limits{Output: 10000}, kind: airlock.KindOutputLimit},
	{name: "out/binary", code: `sys.stdout.buffer.write(bytes(range(256))); sys.stdout.flush()`, want: string(allBytes())},
	{name: "out/closed-stdout", code: `os.close(1)
try:
    print("gone")
except OSError:
    sys.stderr.write("EBADF\n")`, want: ""},

	// WASI calls with hostile arguments, through what Python can reach.
	{name: "wasi/lseek-negative", code: `fd = os.open("f", os.O_CREAT | os.O_RDWR); attempt("seek", lambda: os.lseek(fd, -1, os.SEEK_SET))`, want: "seek OSError\n"},
	{name: "wasi/lseek-overflow", code: `fd = os.open("f", os.O_CREAT | os.O_RDWR); os.lseek(fd, 2**62, 0); attempt("seek", lambda: os.lseek(fd, 2**62, os.SEEK_CUR))`, want: "seek OSError\n"},
	{name: "wasi/pread-far", code: `fd = os.open("f", os.O_CREAT | os.O_RDWR); print(os.pread(fd, 10, 2**62))`, want: "b''\n"},
	{name: "wasi/readv-many-iovecs", code: `fd = os.open("f", os.O_CREAT | os.O_RDWR); attempt("readv", lambda: os.readv(fd, [bytearray(1)] * 5000))`, want: "readv OSError\n"},
	{name: "wasi/writev-many-iovecs", code: `attempt("writev", lambda: os.writev(1, [b""] * 5000))`, want: "writev OSError\n"},
	// EBADF, as wasmtime answers a read of a directory descriptor (Linux:
	// EISDIR); open() of a directory still raises IsADirectoryError.
	{name: "wasi/read-dir-fd", code: `fd = os.open(".", os.O_RDONLY); attempt("read", lambda: os.read(fd, 10)); attempt("open", lambda: open("."))`, want: "read OSError\nopen IsADirectoryError\n"},
	{name: "wasi/huge-read-length", code: `fd = os.open("f", os.O_CREAT | os.O_RDWR); print(len(os.read(fd, 2**30)))`, limits: airlock.Limits{Memory: 64 << 20}, kind: airlock.KindMemoryLimit},
	{name: "wasi/bad-fds", code: `for fd in (-1, 3000, 2**31 - 1):
    attempt(str(fd), lambda: os.fstat(fd))`, want: "-1 OSError\n3000 OSError\n2147483647 OSError\n"},
	{name: "wasi/close-preopen", code: `os.close(3)
attempt("open", lambda: open("/home/user/x", "w"))`, want: "open OSError\n"},
	{name: "wasi/fd-exhaustion", code: `fds = []
try:
    while True: fds.append(os.open("f", os.O_CREAT | os.O_RDONLY))
except OSError as e:
    print(e.strerror, len(fds) > 100)`, want: "No file descriptors available True\n"},
	{name: "wasi/utime-extremes", code: `open("t","w").close(); os.utime("t", ns=(0, 2**62)); print(os.stat("t").st_mtime_ns)
attempt("utime", lambda: os.utime("t", ns=(2**63 - 1, -2**63)))`, want: "4611686018427387904\nutime OSError\n"},
	{name: "wasi/truncate-negative", code: `open("t","w").close(); attempt("truncate", lambda: os.truncate("t", -1))`, want: "truncate OSError\n"},
	{name: "wasi/stdio-is-not-a-tty", code: `print(os.isatty(0), os.isatty(1), os.isatty(2))`, want: "False False False\n"},
	{name: "wasi/fstat-stdin", code: `import stat; print(stat.S_ISCHR(os.fstat(0).st_mode))`, want: "True\n"},

	// Cross-run leakage is covered by TestNothingCarriesOverBetweenRuns;
	// here a run tries to poison the interpreter for the next one.
	{name: "leak/poison-builtins", code: `import builtins; builtins.print = None; builtins.open = None`, want: ""},
	{name: "leak/after-poison", code: `print("print works", open is not None)`, want: "print works True\n"},
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// ownBuildWant is what an attack sees differently on the own build (make
// python): the read-only /usr that holds its stdlib.
// /opt holds the packages' note (and the default packages' zip) in every
// run: packagesInfoPath in the root package's defaultpackages.go.
var ownBuildWant = map[string]string{"fs/dotdot-at-root": "/ ['dev', 'home', 'opt', 'tmp', 'usr']\n"}

func TestAdversarial(t *testing.T) {
	if len(attacks) < 60 {
		t.Fatalf("the adversarial suite has %d cases; it promises at least 60", len(attacks))
	}
	for _, a := range attacks {
		if w, ok := ownBuildWant[a.name]; ok && sb.Info().Build == "own" {
			a.want = w
		}
		t.Run(a.name, func(t *testing.T) {
			if !strings.HasPrefix(a.name, "leak/") {
				t.Parallel()
			}
			res, err := run(t, airlock.Request{Code: prologue + a.code, Limits: a.limits})
			a.check(t, res, err)
		})
	}
}

// check asserts the attack's safe outcome on what its run returned.
func (a attack) check(t *testing.T, res *airlock.Result, err error) {
	t.Helper()
	if a.kind == "" {
		if err != nil || res.ExitCode != a.exit || string(res.Stdout) != a.want {
			t.Fatalf("want exit %d and stdout %q; got err=%v exit=%d stdout=%q\nstderr:\n%s",
				a.exit, a.want, err, res.ExitCode, res.Stdout, res.Stderr)
		}
		return
	}
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Kind != a.kind {
		t.Fatalf("want error kind %s; got err=%v exit=%d stdout=%q\nstderr:\n%s",
			a.kind, err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.HasPrefix(string(res.Stdout), a.want) {
		t.Fatalf("stdout %q does not start with %q", res.Stdout, a.want)
	}
}
