package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// ComputeWorkload is a pure-Python task timed inside the interpreter, so
// start-up is excluded: Setup runs once, then Body is timed as a function
// several times. Body checks its own result, so a wrong answer fails.
type ComputeWorkload struct {
	Name  string
	Setup string
	Body  string
}

// ComputeWorkloads are what `airlock bench --compute` runs. Each body
// takes ~20-60 ms in native CPython 3.11-3.13 on a 2-core VM: long enough
// to time, short enough for the -O0 default build (~35x slower).
var ComputeWorkloads = []ComputeWorkload{
	{"loop", "", `
t = 0
for i in range(300_000):
    t += i * i % 7
assert t == 599_998`},
	{"json", `
import json
doc = {"items": [{"id": i, "name": f"item-{i}", "price": i * 1.25, "tags": ["a", "b", str(i % 7)],
                  "ok": i % 3 == 0, "none": None} for i in range(2000)]}`, `
for _ in range(5):
    text = json.dumps(doc)
    back = json.loads(text)
assert back == doc and len(text) > 100_000`},
	{"re", `
import re
text = " ".join(f"user{i}@host{i % 13}.example.org id={i} v=0x{i:x}" for i in range(3000))
pat = re.compile(r"(\w+)@(host\d+)\.example\.org id=(\d+)")`, `
n = 0
for _ in range(3):
    for m in pat.finditer(text):
        n += int(m.group(3)) % 2
    n += len(re.findall(r"0x[0-9a-f]+", text))
    n += len(re.sub(r"\d+", "#", text))
assert n > 0`},
	{"str_build", "", `
parts = []
for i in range(60_000):
    parts.append(f"{i}:{i % 10}-" + str(i * 3).rjust(6, "0"))
s = ",".join(parts)
assert s.count(",") == 59_999 and s.upper().lower() == s
words = s.split(",")
assert len(words) == 60_000 and words[10].startswith("10:0-")`},
	{"dict_list", "", `
d = {}
for i in range(100_000):
    d[f"k{i % 5000}"] = d.get(f"k{i % 5000}", 0) + i
lst = [v for v in d.values() if v % 2 == 0]
lst2 = list(reversed(lst))
for _ in range(20):
    lst2.append(lst2.pop(0))
inv = {v: k for k, v in d.items()}
assert len(d) == 5000 and len(inv) == 5000`},
	{"sort", `
xs = []
x = 12345
for _ in range(60_000):
    x = (x * 1103515245 + 12345) % 2147483648
    xs.append(x)
words = [str(v) for v in xs[:20_000]]`, `
a = sorted(xs)
b = sorted(xs, key=lambda v: -v)
c = sorted(words, key=len)
assert a[0] <= a[-1] and b[0] == a[-1] and len(c) == 20_000`},
	{"decimal", `
from decimal import Decimal, getcontext
getcontext().prec = 40`, `
total = Decimal(0)
for i in range(1, 20_000):
    total += Decimal(1) / Decimal(i) * Decimal("1.0001")
assert str(total).startswith("10.4817")`},
	{"classes", `
class Vec:
    __slots__ = ("x", "y")
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __add__(self, o):
        return Vec(self.x + o.x, self.y + o.y)
    def scale(self, k):
        return Vec(self.x * k, self.y * k)

class Body:
    def __init__(self, p, v):
        self.p, self.v = p, v
    def step(self, dt):
        self.p = self.p + self.v.scale(dt)
        if self.p.x < 0 or self.p.x > 100:
            self.v = Vec(-self.v.x, self.v.y)
        if self.p.y < 0 or self.p.y > 100:
            self.v = Vec(self.v.x, -self.v.y)`, `
bodies = [Body(Vec(i % 100, (i * 7) % 100), Vec(1.5, -0.5)) for i in range(200)]
for _ in range(150):
    for b in bodies:
        b.step(0.1)
assert all(-1 <= b.p.x <= 101 and -1 <= b.p.y <= 101 for b in bodies)`},
	{"recursion", `
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)`, `
assert fib(25) == 75025`},
	{"sqlite", `
import sqlite3`, `
con = sqlite3.connect(":memory:")
con.execute("create table t (id integer primary key, name text, score real)")
con.executemany("insert into t (name, score) values (?, ?)", ((f"n{i}", i * 0.5) for i in range(20_000)))
n, avg = con.execute("select count(*), avg(score) from t where id % 3 = 0").fetchone()
rows = con.execute("select name from t order by score desc limit 10").fetchall()
con.close()
assert n == 6666 and rows[0][0] == "n19999"`},
}

// NumpyComputeWorkloads time numpy's BLAS and LAPACK (OpenBLAS in the own
// build, scripts/build-openblas.sh) on 300×300 doubles. They run only when
// named (`airlock bench --compute --workloads numpy_matmul300,...` with a
// --native-python that has numpy), so the default set's geometric mean
// keeps measuring the interpreter alone and the npm fallback (no numpy)
// is not asked.
var NumpyComputeWorkloads = []ComputeWorkload{
	{"numpy_matmul300", `
import numpy as np
_rng = np.random.default_rng(0)
a = _rng.standard_normal((300, 300))
b = _rng.standard_normal((300, 300))
want = np.einsum("ij,jk->ik", a, b)`, `
c = a @ b
assert abs(c[7, 11] - want[7, 11]) < 1e-9`},
	{"numpy_solve300", `
import numpy as np
_rng = np.random.default_rng(0)
a = _rng.standard_normal((300, 300))
rhs = _rng.standard_normal(300)`, `
x = np.linalg.solve(a, rhs)
assert abs(float(np.dot(a[5], x)) - rhs[5]) < 1e-8`},
}

// ComputeMark starts the line a compute program prints its timings on.
const ComputeMark = "@airlock-compute "

// ComputeProgram is w as a program that runs Body once untimed, then reps
// times timed with time.perf_counter, and prints ComputeMark and the
// timings in seconds as a JSON list.
func ComputeProgram(w ComputeWorkload, reps int) string {
	var b strings.Builder
	b.WriteString("import time as _t, json as _j\n")
	b.WriteString(w.Setup)
	b.WriteString("\ndef _body():\n")
	for _, line := range strings.Split(strings.Trim(w.Body, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	fmt.Fprintf(&b, `_body()
_ts = []
for _ in range(%d):
    _s = _t.perf_counter(); _body(); _ts.append(_t.perf_counter() - _s)
print(%q + _j.dumps(_ts))
`, reps, ComputeMark)
	return b.String()
}

// ParseCompute finds the timings a ComputeProgram printed in out.
func ParseCompute(out []byte) ([]float64, error) {
	_, line, ok := bytes.Cut(out, []byte(ComputeMark))
	if !ok {
		return nil, errors.New("bench: no timings in the output")
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	var ts []float64
	if err := json.Unmarshal(line, &ts); err != nil {
		return nil, fmt.Errorf("bench: timings: %w", err)
	}
	if len(ts) == 0 {
		return nil, errors.New("bench: no timings in the output")
	}
	return ts, nil
}

// Runner runs a program and returns its stdout.
type Runner func(ctx context.Context, code string) ([]byte, error)

// ComputeResult is one workload's median time on one runner.
type ComputeResult struct {
	Workload string  `json:"workload"`
	Runner   string  `json:"runner"`
	MedianMS float64 `json:"median_ms"`
	Reps     int     `json:"reps"`
}

// MeasureCompute runs w's program once on run and returns the median of
// its reps timings.
func MeasureCompute(ctx context.Context, name string, run Runner, w ComputeWorkload, reps int) (ComputeResult, error) {
	out, err := run(ctx, ComputeProgram(w, reps))
	if err != nil {
		return ComputeResult{}, fmt.Errorf("bench: %s on %s: %w", w.Name, name, err)
	}
	ts, err := ParseCompute(out)
	if err != nil {
		return ComputeResult{}, fmt.Errorf("bench: %s on %s: %w", w.Name, name, err)
	}
	return ComputeResult{Workload: w.Name, Runner: name, MedianMS: MedianOf(ts) * 1000, Reps: len(ts)}, nil
}

// MedianOf is the median of xs (the mean of the middle two of an even
// count), xs unchanged.
func MedianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// GeoMean is the geometric mean of xs (0 for none, or if any is not positive).
func GeoMean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		if x <= 0 {
			return 0
		}
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(xs)))
}

// NativeRunner runs programs as `python -c CODE` with the machine's
// CPython, python resolved to the interpreter binary; it also returns
// that interpreter's version.
func NativeRunner(ctx context.Context, python string) (Runner, string, error) {
	path, version, err := ResolvePython(ctx, python)
	if err != nil {
		return nil, "", err
	}
	return func(ctx context.Context, code string) ([]byte, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, path, "-c", code)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%w: %s", err, stderr.Bytes())
		}
		return stdout.Bytes(), nil
	}, version, nil
}

// SandboxRunner runs programs in sb, with room for the slowest build.
func SandboxRunner(sb *airlock.Sandbox) Runner {
	return func(ctx context.Context, code string) ([]byte, error) {
		res, err := sb.Run(ctx, airlock.Request{Code: code, Limits: computeLimits})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return nil, err
		}
		return res.Stdout, nil
	}
}

// computeLimits: the -O0 default build takes tens of seconds on some
// workloads' repetitions.
var computeLimits = airlock.Limits{Timeout: 10 * time.Minute}
