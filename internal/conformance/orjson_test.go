package airlock_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// orjson is linked into the own build (scripts/orjson/build-orjson.sh:
// Debian's Rust for wasm32-wasip1, a static library), its Python side in
// the stdlib zip.

// orjsonProgram does real work with orjson, numpy arrays included; each
// line is label|value.
const orjsonProgram = `import dataclasses, datetime, enum, sys, uuid
def show(label, value):
    print(label + "|" + str(value))

import orjson
show("dumps", orjson.dumps({"a": [1, 2.5, None, True, "é\u2028"], "b": {"c": -(2**63)}}))
show("loads", orjson.loads(b'{"a": [1, 2.5, null, true, "\\u00e9\\ud83d\\ude00"], "n": 18446744073709551615, "f": 1e-7}'))
show("roundtrip", orjson.loads(orjson.dumps({"x": [1, [2, [3, {"y": "z"}]]]})) == {"x": [1, [2, [3, {"y": "z"}]]]})
show("floats", orjson.dumps([0.1, 1e30, -0.0, 5e-324, 1.7976931348623157e308, 3.141592653589793, float("nan"), float("inf")]))
show("ints", orjson.dumps([2**53, -(2**53), 2**64 - 1, -(2**63)]))
try:
    orjson.dumps(2**64)
except orjson.JSONEncodeError as e:
    show("int-overflow", (type(e).__name__, str(e)))
try:
    orjson.dumps(2**53, option=orjson.OPT_STRICT_INTEGER)
except orjson.JSONEncodeError as e:
    show("strict-int", (str(e), orjson.dumps(2**53 - 1, option=orjson.OPT_STRICT_INTEGER)))
show("options", orjson.dumps({"b": 1, "a": [1, 2]}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE))
show("non-str-keys", orjson.dumps({1: "a", 2.5: "b", None: "c", datetime.date(2026, 12, 5): "e"}, option=orjson.OPT_NON_STR_KEYS))
tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
show("datetime", orjson.dumps([datetime.datetime(2026, 12, 5, 17, 30, 1, 123456, tzinfo=tz), datetime.datetime(2026, 1, 2, 3, 4, 5), datetime.date(2026, 12, 5), datetime.time(23, 59, 58, 7)]))
show("datetime-utc", orjson.dumps(datetime.datetime(2026, 12, 5, 17, 30, tzinfo=datetime.timezone.utc), option=orjson.OPT_UTC_Z | orjson.OPT_OMIT_MICROSECONDS))
show("naive-utc", orjson.dumps(datetime.datetime(2026, 12, 5, 17, 30, 0, 5), option=orjson.OPT_NAIVE_UTC))
@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str = "p"
class Color(enum.Enum):
    RED = "red"
class Level(enum.IntEnum):
    HIGH = 3
show("dataclass-uuid-enum", orjson.dumps([Point(1, 2.5), uuid.UUID("12345678-1234-5678-1234-567812345678"), Color.RED, Level.HIGH]))
class MyStr(str):
    pass
show("subclass", (orjson.dumps({"k": MyStr("v")}), orjson.dumps({MyStr("k"): 1}, option=orjson.OPT_NON_STR_KEYS)))
show("default", orjson.dumps({"s": {1, 2, 3}, "c": 1 + 2j}, default=lambda o: sorted(o) if isinstance(o, set) else [o.real, o.imag]))
show("fragment", orjson.dumps({"raw": orjson.Fragment(b'{"pre":"made"}')}))
try:
    orjson.dumps({"c": 1 + 2j})
except orjson.JSONEncodeError as e:
    show("encode-error", (type(e).__name__, isinstance(e, TypeError), str(e)))
try:
    orjson.loads('{"a": [1, 2,]}')
except orjson.JSONDecodeError as e:
    show("decode-error", (type(e).__name__, isinstance(e, ValueError), e.msg, e.pos, e.lineno, e.colno))
for bad in (b"\xff", "[1", "NaN", '{"a" 1}', "", b'"\xed\xa0\x80"'):
    try:
        orjson.loads(bad)
        show("bad", "accepted")
    except orjson.JSONDecodeError as e:
        show("bad-" + repr(bad), e.msg)
deep = [[]]
for _ in range(300):
    deep = [deep]
try:
    orjson.dumps(deep)
except orjson.JSONEncodeError as e:
    show("deep", str(e))
try:
    orjson.loads("[" * 2000 + "]" * 2000)
except orjson.JSONDecodeError as e:
    show("deep-loads", e.msg)
big = {"k%d" % i: [i, str(i) * 3, i / 7] for i in range(20000)}
blob = orjson.dumps(big, option=orjson.OPT_SORT_KEYS)
show("big", (len(blob), orjson.loads(blob) == big, blob[:40]))
show("inputs", (orjson.loads(bytearray(b"[1]")), orjson.loads(memoryview(b"[2]")), orjson.loads("[3]")))

import numpy as np
show("numpy", orjson.dumps({"i8": np.array([[1, -2], [3, 4]], dtype=np.int64), "f4": np.array([0.5, 1.25], dtype=np.float32),
    "b": np.array([True, False]), "u1": np.arange(3, dtype=np.uint8), "f8": np.linspace(0, 1, 3), "i4": np.int32(7), "f2": np.float16(1.5),
    "dt": np.array(["2026-12-05T17:30:00"], dtype="datetime64[s]")}, option=orjson.OPT_SERIALIZE_NUMPY))
try:
    orjson.dumps(np.arange(4, dtype=np.int64)[::2], option=orjson.OPT_SERIALIZE_NUMPY)
except orjson.JSONEncodeError as e:
    show("numpy-noncontig", str(e))
show("numpy-default", orjson.dumps(np.arange(4, dtype=np.int64)[::2], option=orjson.OPT_SERIALIZE_NUMPY, default=lambda a: a.tolist()))
show("version", orjson.__version__)
show("builtin", [m for m in sys.builtin_module_names if m.startswith("orjson")])
show("origin", (orjson.orjson.__spec__.origin, orjson.__file__.startswith("/usr/local/lib/python313.zip")))
`

// orjsonNative is orjsonProgram's output from orjson 3.11.5's wheel on
// x86-64 Linux (CPython 3.11, numpy 2.4), but for the lines that say where
// the module comes from.
var orjsonNative = []string{
	`dumps|b'{"a":[1,2.5,null,true,"\xc3\xa9\xe2\x80\xa8"],"b":{"c":-9223372036854775808}}'`,
	`loads|{'a': [1, 2.5, None, True, 'é😀'], 'n': 18446744073709551615, 'f': 1e-07}`,
	`roundtrip|True`,
	`floats|b'[0.1,1e30,-0.0,5e-324,1.7976931348623157e308,3.141592653589793,null,null]'`,
	`ints|b'[9007199254740992,-9007199254740992,18446744073709551615,-9223372036854775808]'`,
	`int-overflow|('TypeError', 'Integer exceeds 64-bit range')`,
	`strict-int|('Integer exceeds 53-bit range', b'9007199254740991')`,
	`options|b'{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'`,
	`non-str-keys|b'{"1":"a","2.5":"b","null":"c","2026-12-05":"e"}'`,
	`datetime|b'["2026-12-05T17:30:01.123456+05:30","2026-01-02T03:04:05","2026-12-05","23:59:58.000007"]'`,
	`datetime-utc|b'"2026-12-05T17:30:00Z"'`,
	`naive-utc|b'"2026-12-05T17:30:00.000005+00:00"'`,
	`dataclass-uuid-enum|b'[{"x":1,"y":2.5,"label":"p"},"12345678-1234-5678-1234-567812345678","red",3]'`,
	`subclass|(b'{"k":"v"}', b'{"k":1}')`,
	`default|b'{"s":[1,2,3],"c":[1.0,2.0]}'`,
	`fragment|b'{"raw":{"pre":"made"}}'`,
	`encode-error|('TypeError', True, 'Type is not JSON serializable: complex')`,
	`decode-error|('JSONDecodeError', True, 'trailing comma is not allowed', 11, 1, 12)`,
	`bad-b'\xff'|str is not valid UTF-8: surrogates not allowed`,
	`bad-'[1'|unexpected end of data`,
	`bad-'NaN'|unexpected character`,
	`bad-'{"a" 1}'|unexpected character`,
	`bad-''|Input is a zero-length, empty document`,
	`bad-b'"\xed\xa0\x80"'|str is not valid UTF-8: surrogates not allowed`,
	`deep|Recursion limit reached`,
	`deep-loads|array and object recursion depth exceeded`,
	`big|(981621, True, b'{"k0":[0,"000",0.0],"k1":[1,"111",0.1428')`,
	`inputs|([1], [2], [3])`,
	`numpy|b'{"i8":[[1,-2],[3,4]],"f4":[0.5,1.25],"b":[true,false],"u1":[0,1,2],"f8":[0.0,0.5,1.0],"i4":7,"f2":1.5,"dt":["2026-12-05T17:30:00"]}'`,
	`numpy-noncontig|numpy array is not C contiguous; use ndarray.tolist() in default`,
	`numpy-default|b'[0,2]'`,
}

// orjsonBuild is what the build's own lines say in the sandbox.
var orjsonBuild = map[string]string{
	"version": "3.11.5",
	"builtin": "['orjson.orjson']",
	"origin":  "('built-in', True)",
}

// The same program, the native wheel's output: in a fresh interpreter and
// resumed from the snapshot image.
func TestOrjsonEndToEnd(t *testing.T) {
	own := orjsonSandbox(t, ownSandbox(t))
	checkLabelled(t, mustRunOn(t, orjsonSandbox(t, freshSandbox(t)), orjsonProgram), orjsonNative, orjsonBuild)
	if !own.Snapshots() {
		t.Skip("no snapshots here: checked in a fresh interpreter only")
	}
	checkLabelled(t, mustRunOn(t, own, orjsonProgram), orjsonNative, orjsonBuild)
}

// orjsonSandbox is s, skipping on the npm fallback (no compiled packages
// at all); the own build without orjson fails.
func orjsonSandbox(t *testing.T, s *airlock.Sandbox) *airlock.Sandbox {
	t.Helper()
	has := strings.Contains(strings.Join(s.Info().Libraries, " "), "orjson")
	switch {
	case !has && s.Info().Build == "own":
		t.Fatalf("the own build has no orjson built in (libraries: %v): scripts/build-python.sh's orjson stage did not run", s.Info().Libraries)
	case !has:
		t.Skipf("the %s build has no orjson built in (libraries: %v)", s.Info().Build, s.Info().Libraries)
	}
	return s
}

// An output orjson.dumps cannot grow its buffer for (past the run's
// memory limit) ends the run with Rust's allocation-failure message, which
// the sandbox reports as the memory limit, not with writes through a null
// pointer into the interpreter's memory (scripts/orjson/patches); the
// sandbox goes on.
func TestOrjsonOutOfMemoryEndsTheRun(t *testing.T) {
	s := orjsonSandbox(t, ownSandbox(t))
	code := "import orjson\ns = 'x' * (24 << 20)\nprint('built', flush=True)\nout = orjson.dumps([s, s, s, s])\nprint('dumped', len(out))"
	res, err := s.Run(context.Background(), airlock.Request{Code: code, Limits: airlock.Limits{Memory: 128 << 20}})
	if !errors.Is(err, airlock.ErrMemoryLimit) || string(res.Stdout) != "built\n" ||
		!regexp.MustCompile(`(?m)^memory allocation of [0-9]+ bytes failed$`).Match(res.Stderr) {
		t.Fatalf("err = %v, stdout %q, want the memory limit after building the string, and Rust's message\nstderr:\n%s", err, res.Stdout, res.Stderr)
	}
	if out := mustRunOn(t, s, "import orjson\nprint(orjson.loads(orjson.dumps([1, 'a'])))"); out != "[1, 'a']\n" {
		t.Fatalf("next run: %q", out)
	}
}
