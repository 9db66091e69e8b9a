package airlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// hostPrologue gives host attacks show (from catch) and raw, which writes
// bytes to /dev/airlock and prints what comes back (a frame, or nothing).
const hostPrologue = catch + `
import os
def raw(data):
    fd = os.open("/dev/airlock", os.O_RDWR)
    try:
        os.write(fd, data)
        head = os.read(fd, 8)
        if not head:
            print("no response")
            return
        body = os.read(fd, int(head, 16))
        import json
        print("frame", json.loads(body).get("error", {}).get("kind", "ok"))
    finally:
        os.close(fd)
def frame(payload):
    return b"%08x" % len(payload) + payload
`

// hostAttacks are attacks on the host-function device, run with the test
// tools registered: each must stay inside the run (an exception in the
// guest, a refused frame) and leave the device usable where the protocol
// allows it. The same table's outcome fields as attacks.
var hostAttacks = []attack{
	{name: "host/garbage-1mib", code: `raw(bytes(range(256)) * 4096); show(airlock.tools.add, 1, 2)`,
		want: "frame invalid_request\nok 3\n"},
	{name: "host/garbage-random-pieces", code: `import random
fd = os.open("/dev/airlock", os.O_WRONLY)
r = random.Random(7)
for _ in range(2000):
    os.write(fd, r.randbytes(r.randrange(1, 300)))
os.close(fd)
print("survived")`, want: "survived\n"},
	{name: "host/bad-json", code: `raw(frame(b'{"name": "add", "args": [1,'))
raw(frame(b'\xff\xfe\x00'))
raw(frame(b'{"name": "add", "args": [1e400, 2]}'))
raw(frame(b'{"name": "\x00\xff", "args": []}'))
raw(frame(b'{"name": "add", "args": {"a": 1}}'))
raw(frame(b'{"name": "add", "args": [1, 2], "name": "explode"}'))
show(airlock.tools.add, 1, 2)`,
		want: "frame invalid_request\nframe invalid_request\nframe invalid_arguments\nframe invalid_request\nframe invalid_request\nframe invalid_arguments\nok 3\n"},
	{name: "host/deep-json", code: `raw(frame(b'{"name": "echo", "args": [' + b"[" * 200000 + b"]" * 200000 + b"]}"))
show(airlock.tools.add, 1, 2)`, want: "frame invalid_request\nok 3\n"},
	{name: "host/oversize-request", code: `show(airlock.tools.echo, "x" * (2 << 20)); show(airlock.tools.add, 1, 2)`,
		limits: airlock.Limits{Memory: 128 << 20}, want: "PayloadTooLargeError payload_too_large | the request is 2097191 bytes; the limit is 1048576\nok 3\n"},
	{name: "host/oversize-result", code: `show(airlock.tools.big, 10**7); show(airlock.tools.add, 1, 2)`,
		want: "PayloadTooLargeError payload_too_large | big(): the result is 10000009 bytes; the limit is 1048576\nok 3\n"},
	{name: "host/header-claims-4gib", code: `fd = os.open("/dev/airlock", os.O_RDWR)
os.write(fd, b"ffffffff")
print(os.read(fd, 8) != b"")
for _ in range(64): os.write(fd, b"x" * 65536)
print("discarded")`, want: "True\ndiscarded\n"},
	{name: "host/call-flood", code: `n = 0
try:
    while True:
        airlock.tools.add(n, 1); n += 1
except airlock.TooManyCallsError:
    pass
for _ in range(2000):
    try:
        airlock.tools.add(1, 1)
    except airlock.TooManyCallsError:
        pass
print(n)`, limits: airlock.Limits{HostCalls: 100}, want: "100\n"},
	{name: "host/flood-of-list-ops", code: `for _ in range(300): raw(frame(b'{"op": "list"}'))
print("done")`, want: strings.Repeat("frame ok\n", 300) + "done\n"},
	{name: "host/read-without-request", code: `fd = os.open("/dev/airlock", os.O_RDONLY); print(os.read(fd, 100))`, want: "b''\n"},
	{name: "host/many-device-fds", code: `fds = [os.open("/dev/airlock", os.O_RDWR) for _ in range(50)]
for fd in fds: os.close(fd)
show(airlock.tools.add, 1, 2)`, want: "ok 3\n"},
	// The device is the host's file in /dev, which is read-only to the
	// run: it can neither remove it (and lose its tools) nor put a
	// directory in its place.
	{name: "host/remove-device", code: `show(airlock.tools.add, 1, 2)
attempt("remove", lambda: os.remove("/dev/airlock"))
show(airlock.tools.add, 2, 2)
attempt("mkdir", lambda: os.mkdir("/dev/airlock"))`, want: "ok 3\nremove OSError\nok 4\nmkdir FileExistsError\n"},
	{name: "host/after-remove-device", code: `print(os.path.isdir("/dev/airlock")); show(airlock.tools.add, 1, 2)`, want: "False\nok 3\n"},
	{name: "host/poison-guest-module", code: `import airlock as a, sys
a.call = None; a._encode = a._decode = lambda *x: 1/0; a.tools = None
sys.modules["airlock"] = None
print("poisoned")`, want: "poisoned\n"},
	{name: "host/after-poison", code: `show(airlock.tools.add, 1, 2)`, want: "ok 3\n"},
	{name: "host/tool-hangs-past-deadline", code: `show(airlock.tools.wait)`, limits: airlock.Limits{Timeout: 200 * time.Millisecond}, kind: airlock.KindTimeout},
}

func TestAdversarialHostFunctions(t *testing.T) {
	for _, a := range hostAttacks {
		t.Run(a.name, func(t *testing.T) {
			if a.limits.Timeout == 0 {
				a.limits.Timeout = time.Minute // shared, loaded CI machines
			}
			res, err := toolSandbox(t).Run(context.Background(), airlock.Request{Code: prologue + hostPrologue + a.code, Limits: a.limits})
			if res == nil {
				t.Fatalf("nil Result (err %v)", err)
			}
			a.check(t, res, err)
		})
	}
}
