package airlock_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// Threads (engine/threads.go): green threads in the own build on wazero.
// On a sandbox without them, a start raises RuntimeError saying why
// (TestRefusalsSayWhy).

func threadsSandbox(t *testing.T) *airlock.Sandbox {
	t.Helper()
	s := ownSandbox(t)
	if !s.Threads() {
		t.Skip("this suite's engine runs no threads (wasmtime): TestThreadsRefusedWithoutThem covers it")
	}
	return s
}

// What the issue tried as an agent would, and the rest of threading's
// surface, in one run.
func TestThreadsRun(t *testing.T) {
	s := threadsSandbox(t)
	out := mustRunOn(t, s, `
import threading, queue, time, asyncio, _thread
from concurrent.futures import ThreadPoolExecutor

with ThreadPoolExecutor(4) as ex:
    print("map", list(ex.map(lambda x: x * x, range(8))))

q = queue.Queue()
got = []
def produce():
    for i in range(5):
        q.put(i)
    q.put(None)
def consume():
    while (v := q.get()) is not None:
        got.append(v)
c = threading.Thread(target=consume); p = threading.Thread(target=produce)
c.start(); p.start(); p.join(); c.join()
print("queue", got)

n = 0
lock = threading.Lock()
def bump():
    global n
    for _ in range(20000):
        with lock:
            n += 1
ts = [threading.Thread(target=bump) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("counter", n)

start = time.monotonic()
ts = [threading.Thread(target=time.sleep, args=(0.3,)) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("sleeps overlap", time.monotonic() - start < 0.9)

ev = threading.Event()
threading.Timer(0.05, ev.set).start()
print("timer", ev.wait(5))
print("to_thread", asyncio.run(asyncio.to_thread(sum, [1, 2, 3])))

counts = [0, 0]
stop = False
def spin(i):
    while not stop:
        counts[i] += 1
a = threading.Thread(target=spin, args=(0,)); b = threading.Thread(target=spin, args=(1,))
a.start(); b.start(); time.sleep(0.2); stop = True; a.join(); b.join()
print("both spun", counts[0] > 0 and counts[1] > 0)

local = threading.local(); local.v = "main"; seen = []
def f():
    local.v = "thread"; seen.append(local.v)
t = threading.Thread(target=f); t.start(); t.join()
print("local", local.v, seen)

cond = threading.Condition(); items = []
def wait_item():
    with cond:
        cond.wait_for(lambda: items)
        seen.append(items[0])
t = threading.Thread(target=wait_item); t.start(); time.sleep(0.02)
with cond:
    items.append(42); cond.notify()
t.join()
print("condition", seen[-1])
sem = threading.Semaphore(1)
print("semaphore", sem.acquire(), sem.acquire(timeout=0.02))
rl = threading.RLock()
with rl:
    with rl:
        print("rlock ok")
done = []
_thread.start_new_thread(done.append, (1,))
while not done:
    time.sleep(0.001)
print("_thread", done)
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print("active", threading.active_count())
`)
	for _, want := range []string{
		"map [0, 1, 4, 9, 16, 25, 36, 49]", "queue [0, 1, 2, 3, 4]", "counter 80000", "sleeps overlap True",
		"timer True", "to_thread 6", "both spun True", "local main ['thread']", "condition 42",
		"semaphore True False", "rlock ok", "_thread [1]", "active 2",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// A thread's exception is printed as CPython prints it; the run goes on.
func TestThreadsExceptionInThread(t *testing.T) {
	s := threadsSandbox(t)
	res, err := s.Run(t.Context(), airlock.Request{Code: `
import threading
def boom(): raise ValueError("from the thread")
t = threading.Thread(target=boom); t.start(); t.join()
print("main goes on")`})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "main goes on\n" ||
		!strings.Contains(string(res.Stderr), "ValueError: from the thread") {
		t.Fatalf("err=%v exit=%d stdout=%q stderr=%q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
}

// Every limit holds with threads, each ends the run with its kind, and
// nothing of a run outlives it.
func TestThreadsLimits(t *testing.T) {
	s := threadsSandbox(t)
	before := runtime.NumGoroutine()
	cases := []struct {
		name, code string
		limits     airlock.Limits
		kind       airlock.Kind // "" for a run that completes
		stdout     string
	}{
		{name: "cap", limits: airlock.Limits{Threads: 3}, stdout: "3 airlock: cannot start another thread", code: `
import threading, time
started = []
try:
    for _ in range(10):
        t = threading.Thread(target=time.sleep, args=(30,), daemon=True); t.start(); started.append(t)
except RuntimeError as e:
    print(len(started), e)`},
		{name: "bomb", stdout: "64 airlock: cannot start another thread", code: `
import threading, time
def bomb():
    try:
        threading.Thread(target=bomb, daemon=True).start()
    except RuntimeError as e:
        print(threading.active_count() - 1, e)
    time.sleep(0.5)
bomb()`},
		{name: "deadlock", kind: airlock.KindDeadlock, code: `
import threading, time
a, b = threading.Lock(), threading.Lock()
def other():
    with b:
        time.sleep(0.02)
        with a: pass
t = threading.Thread(target=other); t.start()
with a:
    time.sleep(0.02)
    with b: pass`},
		{name: "waits-alone-forever", kind: airlock.KindDeadlock, code: `
import threading
threading.Event().wait()`},
		{name: "never-yields", kind: airlock.KindTimeout, limits: airlock.Limits{Timeout: 2 * time.Second}, code: `
import threading
def spin():
    while True: pass
t = threading.Thread(target=spin); t.start(); t.join()`},
		{name: "deadline-while-threads-churn", kind: airlock.KindTimeout, limits: airlock.Limits{Timeout: 2 * time.Second}, code: `
import threading, time
lock = threading.Lock()
def churn():
    while True:
        t = threading.Thread(target=time.sleep, args=(0.001,)); t.start(); t.join()
        with lock:
            pass
for _ in range(8):
    threading.Thread(target=churn, daemon=True).start()
while True:
    with lock:
        pass`},
		{name: "memory", limits: airlock.Limits{Memory: 128 << 20}, stdout: "MemoryError in thread", code: `
import threading
def eat():
    x = []
    try:
        while True: x.append(bytearray(8 << 20))
    except MemoryError:
        x.clear(); print("MemoryError in thread")
t = threading.Thread(target=eat); t.start(); t.join()`},
		{name: "output", kind: airlock.KindOutputLimit, limits: airlock.Limits{Output: 64 << 10}, code: `
import threading
def shout():
    for _ in range(100000): print("x" * 100)
ts = [threading.Thread(target=shout) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()`},
		// A thread's C stack (2 MiB, no guard page) holds CPython's C
		// recursion limit: deep C recursion ends in RecursionError.
		{name: "c-recursion-in-thread", stdout: "RecursionError RecursionError\n[1, 2]", code: `
import threading, sys, json
sys.setrecursionlimit(10**7)
got = []
def deep():
    l = []
    for _ in range(10**5): l = [l]
    for f in (repr, json.dumps):
        try:
            f(l)
        except RecursionError:
            got.append("RecursionError")
t = threading.Thread(target=deep); t.start(); t.join()
print(*got)
print([1, 2])`},
		// The main thread's sleep ends with the run: a run still asleep
		// would end at the deadline (timeout) instead.
		{name: "exit-in-thread", code: `
import threading, os, time
threading.Thread(target=os._exit, args=(7,)).start()
time.sleep(30)
print("not reached")`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := s.Run(t.Context(), airlock.Request{Code: c.code, Limits: c.limits})
			if res == nil {
				t.Fatalf("no result (err %v)", err)
			}
			if c.kind == "" {
				if err != nil || !strings.HasPrefix(string(res.Stdout), c.stdout) {
					t.Fatalf("err=%v exit=%d stdout=%q stderr=%q", err, res.ExitCode, res.Stdout, res.Stderr)
				}
				if c.name == "exit-in-thread" && res.ExitCode != 7 {
					t.Fatalf("exit %d, want 7 (os._exit in a thread ends the run)", res.ExitCode)
				}
				return
			}
			var ae *airlock.Error
			if !errors.As(err, &ae) || ae.Kind != c.kind {
				t.Fatalf("err=%v, want kind %s; stdout=%q stderr=%q", err, c.kind, res.Stdout, res.Stderr)
			}
		})
	}
	// The runs' goroutines (one per thread, the timers') are gone.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Fatalf("%d goroutines after the runs, %d before", n, before)
	}
	// And the next run starts clean.
	if out := mustRunOn(t, s, "import threading; print(threading.active_count())"); out != "1\n" {
		t.Fatalf("a fresh run has %q threads", out)
	}
}

// A session call's threads end with the call: the next call starts
// with the main thread only, and a thread that was done is joined.
func TestThreadsInSession(t *testing.T) {
	s := threadsSandbox(t)
	if !s.Snapshots() {
		t.Skip("sessions need snapshots")
	}
	sess, err := s.NewSession(t.Context(), airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(t.Context())
	res, err := sess.Run(t.Context(), airlock.Request{Code: `
import threading
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(3) as ex:
    total = sum(ex.map(lambda x: x + 1, range(10)))
print(total)`})
	if err != nil || string(res.Stdout) != "55\n" {
		t.Fatalf("err=%v stdout=%q stderr=%q", err, res.Stdout, res.Stderr)
	}
	if strings.Contains(string(res.Stderr), "stopped") {
		t.Fatalf("a call whose threads all ended says some were stopped: %q", res.Stderr)
	}
	res, err = sess.Run(t.Context(), airlock.Request{Code: `print(total * 2, threading.active_count())
threading.Thread(target=threading.Event().wait, daemon=True).start()`})
	if err != nil || string(res.Stdout) != "110 1\n" ||
		!strings.Contains(string(res.Stderr), "airlock: 1 thread(s) still running when this call ended were stopped") {
		t.Fatalf("err=%v stdout=%q stderr=%q", err, res.Stdout, res.Stderr)
	}
	// A thread reading stdin reads it; only the main thread pauses there.
	res, err = sess.Run(t.Context(), airlock.Request{Stdin: []byte("from stdin\n"), Code: `
import sys
got = []
t = threading.Thread(target=lambda: got.append(sys.stdin.readline())); t.start(); t.join()
print(got)`})
	if err != nil || string(res.Stdout) != "['from stdin\\n']\n" {
		t.Fatalf("a thread reading stdin: err=%v stdout=%q stderr=%q", err, res.Stdout, res.Stderr)
	}
	res, err = sess.Run(t.Context(), airlock.Request{Code: `print(threading.active_count())`})
	if err != nil {
		t.Fatalf("err=%v stderr=%q", err, res.Stderr)
	}
	t.Logf("after a call whose thread was stopped: threading.active_count() = %s", res.Stdout)
}

// The fan-out agents reach for threads for: HTTP calls over an allowed
// host from a thread pool, each answered and each in the run's record.
func TestThreadsHTTPFanOut(t *testing.T) {
	srv := newNetServers(t, echoHandler())
	s := netSandbox(t, srv, nil)
	if !s.Threads() {
		t.Skip("this suite's engine runs no threads (wasmtime)")
	}
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}}
	out, res := mustNet(t, s, airlock.Request{Network: pol, Code: fmt.Sprintf(`
import urllib.request
from concurrent.futures import ThreadPoolExecutor
def get(i):
    return urllib.request.urlopen(%q + "/item?i=%%d" %% i).read().decode()
with ThreadPoolExecutor(4) as ex:
    for line in ex.map(get, range(8)):
        print(line)
`, srv.plain.URL)})
	var want strings.Builder
	for i := range 8 {
		fmt.Fprintf(&want, "GET /item i=%d body=\"\"\n", i)
	}
	if out != want.String() {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want.String())
	}
	if len(res.Network) != 8 {
		t.Fatalf("%d decisions recorded, want 8: %+v", len(res.Network), res.Network)
	}
}
