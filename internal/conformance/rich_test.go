package airlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

func rich(code string) airlock.Request { return airlock.Request{Code: code, RichOutput: true} }

func mimes(d airlock.Display) string {
	var out []string
	for _, it := range d.Items {
		out = append(out, it.MIME)
	}
	return strings.Join(out, ",")
}

// The last expression's value comes back as a notebook shows it.
func TestRichOutputValue(t *testing.T) {
	cases := []struct{ code, value string }{
		{"x = 2\nx * 21", "42"},
		{"'a' + 'b'", "'ab'"},
		{"import decimal\ndecimal.Decimal('1.5') * 2", "Decimal('3.0')"},
		{"print('side')\nNone", ""},
		{"x = 1", ""},
		{"for i in range(2):\n    i", ""}, // not an expression statement at the top
		{"[1, 2]  # a comment", "[1, 2]"},
		// Where the last statement starts is the compiler's to say: lines in
		// column 0 inside brackets, strings and continuations, and ";".
		{"def f(a,\n      b):\n    return a + b\nf(1,\n  2)\n# done\n", "3"},
		{"sum([\n1,\n2,\n])", "3"},
		{"max(1,\n2)", "2"},
		{"x = 1; x", "1"},
		{"s = '''\nabc\n'''\ns.strip()", "'abc'"},
		{"t = '''\nx\n'''", ""},
		{"y = 1 + \\\n2\ny", "3"},
		{"y = 1 + \\\n2", ""},
		{"if True:\n    5", ""},
		{"import os", ""},
		{"from __future__ import annotations\nx: int = 3\nx", "3"},
		{"# -*- coding: latin-1 -*-\n'\xe9'", "'é'"},
	}
	for _, tc := range cases {
		res := mustRunResult(t, rich(tc.code))
		if res.Value != tc.value || len(res.Displays) != 0 {
			t.Errorf("%q: value %q, displays %d; want %q", tc.code, res.Value, len(res.Displays), tc.value)
		}
	}
	// Without RichOutput, as in a script: nothing.
	if res := mustRunResult(t, airlock.Request{Code: "6 * 7"}); res.Value != "" || string(res.Stdout) != "" {
		t.Errorf("plain run: value %q, stdout %q", res.Value, res.Stdout)
	}
	// Errors read as without it: a syntax error, and one in the last expression.
	for _, code := range []string{"x = (", "x = 1\n1 / 0", "def f():\n    return 1 / 0\n\nf(\n)", "x = 1\nx +"} {
		plain, _ := run(t, airlock.Request{Code: code})
		got, _ := run(t, rich(code))
		if got.ExitCode != 1 || string(got.Stderr) != string(plain.Stderr) || got.Value != "" {
			t.Errorf("%q: exit %d, stderr\n%s\nwant\n%s", code, got.ExitCode, got.Stderr, plain.Stderr)
		}
	}
}

const richClass = `
class Chart:
    def _repr_html_(self): return "<b>chart</b>"
    def _repr_png_(self): return b"\x89PNG\r\n\x1a\nfake"
    def _repr_json_(self): return {"points": 3}
    def __repr__(self): return "Chart()"
`

func TestRichOutputDisplays(t *testing.T) {
	res := mustRunResult(t, rich(richClass+`
import airlock
airlock.display(Chart())
airlock.display({"k": 1}, b"\x89PNG\r\n\x1a\nraw")
Chart()`))
	if len(res.Displays) != 4 || res.Value != "Chart()" {
		t.Fatalf("displays %+v, value %q", res.Displays, res.Value)
	}
	want := []struct {
		value bool
		mimes string
	}{{false, "image/png,text/html,application/json,text/plain"}, {false, "text/plain"}, {false, "image/png,text/plain"},
		{true, "image/png,text/html,application/json,text/plain"}}
	for i, w := range want {
		if d := res.Displays[i]; d.Value != w.value || mimes(d) != w.mimes {
			t.Errorf("display %d: value %v, %s; want %v, %s", i, d.Value, mimes(d), w.value, w.mimes)
		}
	}
	if d := res.Displays[0]; string(d.Items[1].Data) != "<b>chart</b>" || string(d.Items[2].Data) != `{"points": 3}` || d.Text() != "Chart()" {
		t.Errorf("forms %+v", d.Items)
	}
	if string(res.Displays[2].Items[0].Data) != "\x89PNG\r\n\x1a\nraw" {
		t.Errorf("bytes display %q", res.Displays[2].Items[0].Data)
	}
	// Without RichOutput display() prints the repr.
	plain := mustRunResult(t, airlock.Request{Code: richClass + "import airlock\nairlock.display(Chart(), 5)"})
	if string(plain.Stdout) != "Chart()\n5\n" || len(plain.Displays) != 0 {
		t.Errorf("plain display: %q, %d displays", plain.Stdout, len(plain.Displays))
	}
}

// Displays stay within the run's output limit and count; a guest that
// writes the device itself gets errors, and nothing malformed is kept.
func TestRichOutputBounds(t *testing.T) {
	req := rich(`import airlock
airlock.display("x" * 1000)
try:
    airlock.display("y" * 10000)
except RuntimeError as e:
    print("refused:", e)
try:
    airlock.display(1)
except RuntimeError:
    print("later refused too")
`)
	req.Limits.Output = 4096
	res := mustRunResult(t, req)
	if len(res.Displays) != 1 || !res.DisplaysTruncated || !strings.Contains(string(res.Stdout), "refused: airlock.display: this run's rich output passed its cap") ||
		!strings.Contains(string(res.Stdout), "later refused too") {
		t.Fatalf("displays %d, truncated %v, stdout %s", len(res.Displays), res.DisplaysTruncated, res.Stdout)
	}
	res = mustRunResult(t, rich("import airlock\nfor i in range(70):\n    try:\n        airlock.display(i)\n    except RuntimeError:\n        print('stopped at', i)\n        break"))
	if len(res.Displays) != 64 || !res.DisplaysTruncated || string(res.Stdout) != "stopped at 64\n" {
		t.Fatalf("count cap: %d displays, truncated %v, %q", len(res.Displays), res.DisplaysTruncated, res.Stdout)
	}
	hostile := map[string]string{
		"not hex":         `b"zzzzzzzz"`,
		"no newline":      `b"00000004abcd"`,
		"bad kind":        `b"%08x" % len(body(b'{"kind": "evil", "items": [["text/plain", 1]]}', b"x")) + body(b'{"kind": "evil", "items": [["text/plain", 1]]}', b"x")`,
		"size past data":  `frame(b'{"kind": "display", "items": [["text/plain", 99]]}', b"x")`,
		"data left over":  `frame(b'{"kind": "display", "items": [["text/plain", 1]]}', b"xyz")`,
		"no text/plain":   `frame(b'{"kind": "display", "items": [["image/png", 1]]}', b"x")`,
		"bad mime":        `frame(b'{"kind": "display", "items": [["text/plain\\r\\nX: y", 1]]}', b"x")`,
		"negative size":   `frame(b'{"kind": "display", "items": [["text/plain", -1]]}', b"x")`,
		"frame too large": `b"ffffffff" + b"x" * 100`,
	}
	for name, frame := range hostile {
		code := `import os
def body(head, data): return head + b"\n" + data
def frame(head, data):
    b = body(head, data)
    return b"%08x" % len(b) + b
fd = os.open("/dev/airlock-display", os.O_WRONLY)
data = ` + frame + `
try:
    n = os.write(fd, data)
    os.write(fd, data[n:] or b"00000000")
    print("accepted")
except OSError as e:
    print("refused", e.errno)
import airlock
try:
    airlock.display(1)
    print("display after")
except RuntimeError:
    print("display refused")`
		res := mustRunResult(t, rich(code))
		if len(res.Displays) != 0 || strings.Contains(string(res.Stdout), "accepted") || !strings.Contains(string(res.Stdout), "display refused") {
			t.Errorf("%s: %d displays, stdout %q, stderr %s", name, len(res.Displays), res.Stdout, res.Stderr)
		}
	}
}

// A session call collects rich output as a run does.
func TestSessionRichOutput(t *testing.T) {
	s := newSession(t, snapshotSandbox(t), airlock.SessionOptions{})
	ctx := context.Background()
	if _, err := s.Run(ctx, airlock.Request{Code: "x = 40"}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, rich("import airlock\nairlock.display('shown')\nx + 2"))
	if err != nil || res.Value != "42" || len(res.Displays) != 1 || res.Displays[0].Text() != "'shown'" {
		t.Fatalf("session: %v, %+v", err, res)
	}
}

// The host's mode variables (rich output here) tell the prelude how to
// run the code; they are not the program's environment. (AIRLOCK_PACKAGES
// is the image's own: it was in the environment the image was made in.)
func TestRichOutputModeNotInEnviron(t *testing.T) {
	res := mustRunResult(t, rich("import os\nsorted(k for k in os.environ if k in ('AIRLOCK_RICH', 'AIRLOCK_NET', 'AIRLOCK_SESSION', 'AIRLOCK_INTERACTIVE', 'AIRLOCK_RESEED'))"))
	if res.Value != "[]" {
		t.Errorf("os.environ holds %s", res.Value)
	}
	req := rich("import os\nos.environ['GREETING']")
	req.Env = map[string]string{"GREETING": "hi"}
	if res := mustRunResult(t, req); res.Value != "'hi'" {
		t.Errorf("the program's own variable: %q", res.Value)
	}
}
