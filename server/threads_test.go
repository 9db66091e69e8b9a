package server

import (
	"strings"
	"testing"
)

// Threads through serve: the three snippets in one request, the
// request's thread limit clamped to the server's, and a deadlock's kind
// on the wire.
func TestRunWithThreads(t *testing.T) {
	if !sb.Threads() {
		t.Skip("this engine runs no threads (wasmtime)")
	}
	url, _, _ := start(t, Config{})
	code := `
import threading, queue
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(4) as ex:
    print(sum(ex.map(lambda x: x * x, range(10))))
q = queue.Queue()
def produce():
    for i in range(3): q.put(i)
    q.put(None)
got = []
def consume():
    while (v := q.get()) is not None: got.append(v)
c = threading.Thread(target=consume); p = threading.Thread(target=produce)
c.start(); p.start(); p.join(); c.join()
n = 0
lock = threading.Lock()
def bump():
    global n
    for _ in range(1000):
        with lock: n += 1
ts = [threading.Thread(target=bump) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(got, n)
`
	res := decodeResult(t, post(t, url+"/v1/run", "", runJSON(t, code, RunLimits{})))
	if res.Error != nil || res.ExitCode != 0 || res.Stdout != "285\n[0, 1, 2] 4000\n" {
		t.Fatalf("result %+v", res)
	}

	r := post(t, url+"/v1/run", "", runJSON(t, `
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(1,), daemon=True).start(); n += 1
except RuntimeError as e:
    print(n, str(e).split(":")[1])`, RunLimits{Threads: 1000}))
	res = decodeResult(t, r)
	if res.Error != nil || res.Stdout != "64  cannot start another thread\n" || !strings.Contains(r.header.Get("Airlock-Limits-Clamped"), "threads") {
		t.Fatalf("clamped header %q, result %+v", r.header.Get("Airlock-Limits-Clamped"), res)
	}

	res = decodeResult(t, post(t, url+"/v1/run", "", runJSON(t, `import threading; threading.Event().wait()`, RunLimits{})))
	if res.Error == nil || res.Error.Kind != "deadlock" {
		t.Fatalf("result %+v, want a deadlock error", res)
	}
}
