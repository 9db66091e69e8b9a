package airlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type orderArgs struct {
	Customer string            `json:"customer"`
	Lines    []orderLine       `json:"lines"`
	Tags     map[string]string `json:"tags,omitempty"`
	Note     *string           `json:"note"`
}

type orderLine struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

type orderSummary struct {
	Customer string             `json:"customer"`
	Total    float64            `json:"total"`
	BySKU    map[string]float64 `json:"by_sku"`
	Tags     map[string]string  `json:"tags"`
	Note     *string            `json:"note"`
}

type blobArgs struct {
	Data []byte `json:"data"`
}

type ctxKey struct{}

// slept records what a deadline-bound tool saw when its context ended;
// waited, that it was called at all.
var (
	slept  atomic.Value
	waited atomic.Bool
)

var testTools = []hostfuncs.Function{
	hostfuncs.Func("echo", "Return the argument unchanged.", func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		return in, nil
	}),
	hostfuncs.Func("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}),
	hostfuncs.Func("order", "Total an order.", func(_ context.Context, in orderArgs) (orderSummary, error) {
		s := orderSummary{Customer: in.Customer, BySKU: map[string]float64{}, Tags: in.Tags, Note: in.Note}
		for _, l := range in.Lines {
			s.Total += float64(l.Qty) * l.Price
			s.BySKU[l.SKU] += float64(l.Qty) * l.Price
		}
		return s, nil
	}),
	hostfuncs.Func("reverse_bytes", "Reverse a byte string.", func(_ context.Context, in blobArgs) (hostfuncs.Bytes, error) {
		out := slices.Clone(in.Data)
		slices.Reverse(out)
		return out, nil
	}),
	hostfuncs.Func("fail", "Always fails.", func(_ context.Context, msg string) (any, error) {
		return nil, errors.New(msg)
	}),
	hostfuncs.Func("explode", "Panics.", func(_ context.Context, _ struct{}) (any, error) {
		var m map[string]int
		m["x"] = 1 // nil map write
		return nil, nil
	}),
	hostfuncs.Func("big", "Return n bytes of text.", func(_ context.Context, n int) (string, error) {
		return strings.Repeat("x", n), nil
	}),
	hostfuncs.Func("wait", "Wait for the run's deadline.", func(ctx context.Context, _ struct{}) (any, error) {
		waited.Store(true)
		<-ctx.Done()
		slept.Store(ctx.Err().Error())
		return nil, ctx.Err()
	}),
	hostfuncs.Func("whoami", "Report the call's context.", func(ctx context.Context, _ struct{}) (map[string]any, error) {
		info, ok := hostfuncs.CallInfo(ctx)
		if !ok {
			return nil, errors.New("no CallInfo")
		}
		_, hasDeadline := ctx.Deadline()
		return map[string]any{"run_id": info.RunID, "user": info.Values["user"], "tool": info.Func, "call": info.Call,
			"caller_value": ctx.Value(ctxKey{}), "deadline": hasDeadline}, nil
	}),
}

var (
	toolsOnce sync.Once
	toolsSB   *airlock.Sandbox
)

func toolSandbox(t testing.TB) *airlock.Sandbox {
	t.Helper()
	toolsOnce.Do(func() {
		var err error
		toolsSB, err = airlock.New(context.Background(), airlock.WithNotice(os.Stderr), airlock.WithHostFuncs(testTools...))
		if err != nil {
			panic(err)
		}
	})
	return toolsSB
}

func runTools(t *testing.T, ctx context.Context, req airlock.Request) (*airlock.Result, error) {
	t.Helper()
	if req.Limits.Timeout == 0 {
		req.Limits.Timeout = time.Minute // generous: CI machines are shared and loaded
	}
	res, err := toolSandbox(t).Run(ctx, req)
	if res == nil {
		t.Fatalf("nil Result (err %v)", err)
	}
	return res, err
}

func TestHostToolsRoundTrip(t *testing.T) {
	cases := []struct{ name, code, want string }{
		{"add positional", `print(airlock.call("add", 2, 3))`, "5"},
		{"add keywords", `print(airlock.tools.add(b=40, a=2))`, "42"},
		{"add mixed", `print(airlock.tools.add(1, b=2))`, "3"},
		{"nested json", `
doc = {"a": [1, 2.5, {"b": None, "c": [True, False]}], "big": 2**62, "neg": -7, "s": "x\ty\n\"q\""}
print(airlock.tools.echo(doc) == doc)`, "True"},
		{"tuple as list", `print(airlock.call("echo", (1, (2, 3))))`, "[1, [2, 3]]"},
		{"unicode", `
s = "héllo, 世界 🐍 \u0000 \u2028 zwj👩‍👩‍👧"
print(airlock.tools.echo(s) == s, airlock.tools.echo({s: s}) == {s: s})`, "True True"},
		{"struct in, struct out", `
r = airlock.tools.order("ann", [{"sku": "a", "qty": 2, "price": 1.5}, {"sku": "b", "qty": 1, "price": 10}], tags={"k": "v"})
print(r["customer"], r["total"], sorted(r["by_sku"].items()), r["tags"], r["note"])`, "ann 13 [('a', 3), ('b', 10)] {'k': 'v'} None"},
		{"bytes both ways", `
data = bytes(range(256)) * 3
print(airlock.tools.reverse_bytes(data) == data[::-1], airlock.tools.reverse_bytes(bytearray(b"ab")))`, "True b'ba'"},
		{"bytes through echo stay base64", `print(airlock.tools.echo(b"hi"))`, "aGk="},
		{"list and docstrings", `
print(airlock.tools.add.__doc__)
import inspect; print(inspect.signature(airlock.tools.add))
print(sorted(n for n in dir(airlock.tools) if not n.startswith("_")))`,
			"Add two integers.\n(a: int, b: int)\n['add', 'big', 'echo', 'explode', 'fail', 'order', 'reverse_bytes', 'wait', 'whoami']"},
		{"help lists tools", `
import pydoc
text = pydoc.render_doc(airlock.tools, renderer=pydoc.plaintext)
print("add(a: int, b: int)" in text, "Total an order." in text, "reverse_bytes(data: bytes)" in text)`, "True True True"},
		{"many calls", `print(sum(airlock.tools.add(i, 1) for i in range(500)))`, "125250"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := runTools(t, context.Background(), airlock.Request{Code: "import airlock\n" + tc.code})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
			}
			if got := strings.TrimSpace(string(res.Stdout)); got != tc.want {
				t.Fatalf("stdout:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// catch prints the exception's class, its HostError kind and message.
const catch = `
import airlock
def show(f, *a, **k):
    try:
        r = f(*a, **k)
        print("ok", repr(r)[:60])
    except airlock.HostError as e:
        print(type(e).__name__, e.kind, "|", e)
`

func TestHostToolErrors(t *testing.T) {
	cases := []struct {
		name, code string
		limits     airlock.Limits
		want       []string // substrings of stdout
	}{
		{"go error", `show(airlock.tools.fail, "boom: ünïcode")`, airlock.Limits{}, []string{"HostError error | boom: ünïcode"}},
		{"panic is recovered", `show(airlock.tools.explode); show(airlock.tools.add, 1, 2)`, airlock.Limits{},
			[]string{"HostError panic | explode(): the host tool panicked: assignment to entry in nil map", "ok 3"}},
		{"unknown tool by call", `show(airlock.call, "nope")`, airlock.Limits{}, []string{`UnknownToolError unknown_tool | no host tool "nope" in this run (available: add, big,`}},
		{"unknown tool by attribute", `show(lambda: airlock.tools.nope); print(hasattr(airlock.tools, "nope"))`, airlock.Limits{},
			[]string{`UnknownToolError unknown_tool | no host tool 'nope' in this run`, "False"}},
		{"bad arguments", `
show(airlock.tools.add, 1)
show(airlock.tools.add, 1, 2, 3)
show(airlock.tools.add, 1, a=2)
show(airlock.tools.add, 1, c=2)
show(airlock.tools.add, "x", 2)
show(airlock.tools.big)
show(airlock.tools.echo, float("nan"))
show(airlock.tools.echo, object())
try:
    airlock.tools.add("x", 2)
except TypeError as e:
    print("is a TypeError")`, airlock.Limits{}, []string{
			`ArgumentError invalid_arguments | add(): missing required argument "b"`,
			"add(): takes at most 2 positional arguments but 3 were given",
			`add(): got multiple values for argument "a"`,
			`add(): got an unexpected keyword argument "c"`,
			`add(): argument "a": cannot use a JSON string as int`,
			"big(): takes exactly one positional argument (0 positional, 0 keyword given)",
			"ArgumentError invalid_arguments | arguments cannot be sent as JSON: Out of range float values are not JSON compliant",
			"ArgumentError", "cannot be sent to the host as JSON",
			"is a TypeError",
		}},
		{"request over the cap", `show(airlock.tools.echo, "x" * 5000); show(airlock.tools.add, 1, 2)`, airlock.Limits{HostPayload: 4096},
			[]string{"PayloadTooLargeError payload_too_large | the request is 5039 bytes; the limit is 4096", "ok 3"}},
		{"result over the cap", `show(airlock.tools.big, 5000); show(airlock.tools.big, 10)`, airlock.Limits{HostPayload: 4096},
			[]string{"PayloadTooLargeError payload_too_large | big(): the result is 5009 bytes; the limit is 4096", "ok 'xxxxxxxxxx'"}},
		{"too many calls", `
for i in range(6):
    show(airlock.tools.add, i, 0)`, airlock.Limits{HostCalls: 5},
			[]string{"ok 4", "TooManyCallsError too_many_calls | add(): this run has made its 5 allowed host calls"}},
		{"malformed frames by hand", `
import os
fd = os.open("/dev/airlock", os.O_RDWR)
def raw(frame):
    os.write(fd, frame)
    n = int(os.read(fd, 8), 16)
    print(os.read(fd, n).decode())
def req(payload):
    raw(b"%08x" % len(payload) + payload)
raw(b"zzzzzzzz{}")
req(b"{nope")
req(b"[]")
req(b'{"op":"fly"}')
req(b"{}")
raw(b"00000000")
print(repr(os.read(fd, 10)))
import os.path, stat
st = os.stat("/dev/airlock")
print(os.path.exists("/dev/airlock"), stat.S_ISCHR(st.st_mode))
try:
    os.lseek(fd, 0, 0)
except OSError as e:
    print("seek:", e.errno == 70)
show(airlock.tools.add, 20, 22)`, airlock.Limits{}, []string{
			`{"error":{"kind":"invalid_request","message":"malformed request: a frame starts with its length as 8 hex digits, not \"zzzzzzzz\""}}`,
			`"malformed request: invalid character 'n' looking for beginning of object key string"`,
			`"malformed request: json: cannot unmarshal array into Go value of type hostfuncs.request"`,
			`"malformed request: unknown op \"fly\""`,
			`"malformed request: no \"name\""`,
			`"malformed request: the payload is empty"`,
			"b''",
			"True True",
			"seek: True",
			"ok 42",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := runTools(t, context.Background(), airlock.Request{Code: catch + tc.code, Limits: tc.limits})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(res.Stdout), w) {
					t.Errorf("stdout lacks %q:\n%s", w, res.Stdout)
				}
			}
		})
	}
}

func TestHostToolDeadline(t *testing.T) {
	// The deadline must fall while the tool waits: a fresh interpreter on
	// a loaded machine can take most of a short timeout to start, so a run
	// that never reached the tool is tried again with a longer one.
	for timeout := 2 * time.Second; ; timeout *= 2 {
		slept.Store("")
		waited.Store(false)
		start := time.Now()
		res, err := runTools(t, context.Background(), airlock.Request{
			Code:   catch + "show(airlock.tools.wait)\nprint('after')",
			Limits: airlock.Limits{Timeout: timeout},
		})
		if !errors.Is(err, airlock.ErrTimeout) {
			t.Fatalf("err = %v, want a timeout\n%s%s", err, res.Stdout, res.Stderr)
		}
		if !waited.Load() && timeout < 16*time.Second {
			t.Logf("the run timed out after %v before it called the tool; again with twice the timeout", time.Since(start))
			continue
		}
		// The call returns at the deadline without waiting for the tool
		// (hostfuncs.Device), whose goroutine records what it saw soon after.
		got := slept.Load()
		for wait := time.Now(); got == "" && time.Since(wait) < 5*time.Second; got = slept.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		if got != context.DeadlineExceeded.Error() {
			t.Fatalf("the tool's context ended with %q", got)
		}
		if d := time.Since(start); d > timeout+8*time.Second {
			t.Fatalf("the run took %v with a timeout of %v", d, timeout)
		}
		return
	}
}

// A session call that uses a tool advances the session like any other:
// the guest keeps no descriptor of the device open past the call.
func TestHostToolInSession(t *testing.T) {
	ctx := context.Background()
	s, err := toolSandbox(t).NewSession(ctx, airlock.SessionOptions{Tools: []string{"add"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for i, want := range []string{"3\n", "10\n"} {
		code := "import airlock\nx = airlock.tools.add(1, 2)\nprint(x)"
		if i > 0 {
			code = "print(airlock.tools.add(x, 7))"
		}
		res, err := s.Run(ctx, airlock.Request{Code: code})
		if err != nil || res.RolledBack || string(res.Stdout) != want {
			t.Fatalf("call %d: %v, rolled back %v, stdout %q stderr %q", i, err, res.RolledBack, res.Stdout, res.Stderr)
		}
	}
}

// The device counts against the file quota: one too small for it is an
// invalid request, not a run without its tools (or a quota error blamed on
// a program that never touched the filesystem).
func TestHostToolDeviceNeedsRoomInTheFileQuota(t *testing.T) {
	ctx := context.Background()
	res, err := runTools(t, ctx, airlock.Request{Code: "import sys; sys.exit(2)", Limits: airlock.Limits{FSFiles: 5}})
	if !errors.Is(err, airlock.ErrInvalidRequest) || !strings.Contains(err.Error(), "no room for /dev/airlock") {
		t.Fatalf("a 5-file quota: %v (exit %d)", err, res.ExitCode)
	}
	// /dev/null, which every run has, counts too.
	res, err = runTools(t, ctx, airlock.Request{Code: "import sys; sys.exit(2)", Limits: airlock.Limits{FSFiles: 6}})
	if !errors.Is(err, airlock.ErrInvalidRequest) || !strings.Contains(err.Error(), "no room for /dev/null") {
		t.Fatalf("a 6-file quota: %v (exit %d)", err, res.ExitCode)
	}
	res, err = runTools(t, ctx, airlock.Request{Code: "import airlock; print(airlock.tools.add(1, 2))", Limits: airlock.Limits{FSFiles: 7}})
	if err != nil || string(res.Stdout) != "3\n" {
		t.Fatalf("a 7-file quota: %v, stdout %q stderr %q", err, res.Stdout, res.Stderr)
	}
}

func TestHostToolContext(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "from-caller")
	code := `
import airlock, json
a = airlock.tools.whoami()
b = airlock.tools.whoami()
print(json.dumps([a, b], sort_keys=True))`
	var ids []string
	for range 2 {
		res, err := runTools(t, ctx, airlock.Request{Code: code, Values: map[string]any{"user": "ann"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
		}
		var got []map[string]any
		if err := json.Unmarshal(res.Stdout, &got); err != nil {
			t.Fatal(err, string(res.Stdout))
		}
		for i, g := range got {
			if g["user"] != "ann" || g["tool"] != "whoami" || g["call"] != float64(i+1) || g["caller_value"] != "from-caller" || g["deadline"] != true {
				t.Fatalf("call %d saw %v", i, g)
			}
		}
		if got[0]["run_id"] != got[1]["run_id"] || len(got[0]["run_id"].(string)) != 32 {
			t.Fatalf("run ids %v %v", got[0]["run_id"], got[1]["run_id"])
		}
		ids = append(ids, got[0]["run_id"].(string))
	}
	if ids[0] == ids[1] {
		t.Fatalf("two runs share the id %s", ids[0])
	}
}

func TestHostToolAllowList(t *testing.T) {
	code := catch + `
print(sorted(n for n in dir(airlock.tools) if not n.startswith("_")))
show(lambda: airlock.tools.add(1, 2))
show(airlock.call, "echo", 1)`
	cases := []struct {
		name  string
		tools []string
		want  []string
	}{
		{"all", nil, []string{"'whoami'", "ok 3", "ok 1"}},
		{"only add", []string{"add"}, []string{"['add']", "ok 3", `UnknownToolError unknown_tool | no host tool "echo" in this run (available: add)`}},
		{"none", []string{}, []string{"[]", "UnknownToolError unknown_tool | no host tools are available in this run", `no host tool "echo" in this run (available: none)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := runTools(t, context.Background(), airlock.Request{Code: code, Tools: tc.tools})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(res.Stdout), w) {
					t.Errorf("stdout lacks %q:\n%s", w, res.Stdout)
				}
			}
		})
	}
	t.Run("unknown name", func(t *testing.T) {
		_, err := runTools(t, context.Background(), airlock.Request{Code: "pass", Tools: []string{"add", "rm_rf"}})
		if !errors.Is(err, airlock.ErrInvalidRequest) || !strings.Contains(err.Error(), `"rm_rf"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no registry", func(t *testing.T) {
		res, err := run(t, airlock.Request{Code: catch + "show(airlock.call, 'add', 1, 2)\nprint(dir(airlock.tools))"})
		if err != nil || !strings.Contains(string(res.Stdout), "UnknownToolError unknown_tool | no host tools are available in this run") {
			t.Fatalf("err=%v\n%s%s", err, res.Stdout, res.Stderr)
		}
		_, err = run(t, airlock.Request{Code: "pass", Tools: []string{"add"}})
		if !errors.Is(err, airlock.ErrInvalidRequest) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestHostToolsConcurrentRuns(t *testing.T) {
	const runs = 8
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := fmt.Sprintf(`
import airlock
ids = set()
total = 0
for j in range(50):
    total += airlock.tools.add(%d, j)
    ids.add(airlock.tools.whoami()["run_id"])
print(total, len(ids), airlock.tools.echo({"run": %d})["run"])`, i, i)
			res, err := toolSandbox(t).Run(context.Background(), airlock.Request{Code: code, Values: map[string]any{"user": i}, Limits: airlock.Limits{Timeout: time.Minute}})
			want := fmt.Sprintf("%d 1 %d\n", 50*i+49*50/2, i)
			if err != nil || string(res.Stdout) != want {
				errs <- fmt.Errorf("run %d: err=%v stdout=%q want %q stderr=%s", i, err, res.Stdout, want, res.Stderr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHostToolRegistration(t *testing.T) {
	ok := func(context.Context, struct{}) (int, error) { return 0, nil }
	cases := []struct {
		name  string
		tools []hostfuncs.Function
	}{
		{"duplicate", []hostfuncs.Function{hostfuncs.Func("a", "", ok), hostfuncs.Func("a", "", ok)}},
		{"not an identifier", []hostfuncs.Function{hostfuncs.Func("a-b", "", ok)}},
		{"keyword", []hostfuncs.Function{hostfuncs.Func("class", "", ok)}},
		{"underscore", []hostfuncs.Function{hostfuncs.Func("_x", "", ok)}},
		{"empty", []hostfuncs.Function{hostfuncs.Func("", "", ok)}},
		{"zero Tool", []hostfuncs.Function{{}}},
		{"chan argument", []hostfuncs.Function{hostfuncs.Func("c", "", func(context.Context, chan int) (int, error) { return 0, nil })}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := airlock.New(context.Background(), airlock.WithHostFuncs(tc.tools...))
			if !errors.Is(err, hostfuncs.ErrInvalidFunc) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
