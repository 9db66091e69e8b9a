package airlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/python"
)

// numpy is linked into the own build (scripts/numpy/build-numpy.sh): its
// C side as built-in modules, its Python side in the stdlib zip.

// numpyProgram touches each part of numpy that has C behind it and that
// a wasm build could get wrong: LAPACK (OpenBLAS'), pocketfft (C++),
// the Generator, datetime64, the string ufuncs, structured dtypes, and
// .npy files on the sandbox's filesystem (no dup() on WASI). Its output
// is the same on every machine.
const numpyProgram = `
import numpy as np, os
print(np.__version__, np.dtype(np.intp), np.array([1]).dtype, np.finfo(np.longdouble).bits)
a = np.array([[3.0, 1.0, 0.5], [1.0, 2.0, 0.0], [0.5, 0.0, 4.0]])
b = np.array([9.0, 8.0, 1.0])
x = np.linalg.solve(a, b)
print("solve", np.allclose(a @ x, b), (np.round(x, 6) + 0.0).tolist())
w, v = np.linalg.eig(a)
print("eig", np.allclose(a @ v, v * w), np.round(np.sort(w.real), 6).tolist())
u, s, vt = np.linalg.svd(np.arange(12.0).reshape(3, 4), full_matrices=False)
print("svd", np.allclose((u * s) @ vt, np.arange(12.0).reshape(3, 4)), np.round(s, 6).tolist())
print("inv det", np.allclose(np.linalg.inv(a) @ a, np.eye(3)), round(float(np.linalg.det(a)), 6))
sig = np.sin(2 * np.pi * 5 * np.arange(64) / 64)
spec = np.fft.rfft(sig)
print("fft", int(np.argmax(np.abs(spec))), np.allclose(np.fft.irfft(spec, 64), sig),
      np.round(np.fft.fft([1.0, 2.0, 3.0, 4.0]), 6).tolist())
rng = np.random.default_rng(12345)
print("rng", rng.integers(0, 1000, 5).tolist(), round(float(rng.normal()), 6), round(float(rng.random()), 6))
d = np.arange("2026-01-30", "2026-02-03", dtype="datetime64[D]")
print("datetime", d.tolist()[-1], (np.datetime64("2026-03-01") - np.datetime64("2026-02-01")).astype(int),
      np.busday_count("2026-11-01", "2026-12-01"), str(np.datetime64("2026-12-01T10:00") + np.timedelta64(90, "m")))
s = np.array(["numpy", "in", "Airlock"])
print("strings", np.char.upper(s).tolist(), np.strings.str_len(s).tolist(), np.strings.find(s, "i").tolist(),
      np.char.add(s, "!").tolist())
people = np.array([("ada", 36, 1.62), ("alan", 41, 1.78), ("grace", 29, 1.55)],
                  dtype=[("name", "U8"), ("age", "i4"), ("height", "f8")])
print("struct", np.sort(people, order="age")["name"].tolist(), people["height"].mean().round(3), people.dtype.itemsize)
np.save("arr.npy", people)
np.savez_compressed("both.npz", x=x, s=s)
back = np.load("arr.npy")
z = np.load("both.npz")
np.arange(5, dtype=np.int16).tofile("raw.bin")
print("files", (back == people).all(), back.dtype == people.dtype, np.array_equal(z["x"], x), z["s"].tolist(),
      np.fromfile("raw.bin", dtype=np.int16).tolist(), sorted(os.listdir(".")))
print("module", np.add.__module__, np.ndarray.__module__, type(np.float64(1)).__module__, np.linalg.solve.__module__)
`

var numpyLines = []string{
	"2.5.5 int32 int32 128",
	"solve True [2.0, 3.0, 0.0]",
	"eig True [1.355027, 3.35286, 4.292113]",
	"svd True [22.409298, 1.95534, 0.0]",
	"inv det True 19.5",
	"fft 5 True [(10+0j), (-2+2j), (-2+0j), (-2-2j)]",
	"datetime 2026-02-02 28 21 2026-12-01T11:30",
	"strings ['NUMPY', 'IN', 'AIRLOCK'] [5, 2, 7] [-1, 0, 1] ['numpy!', 'in!', 'Airlock!']",
	"struct ['grace', 'ada', 'alan'] 1.65 44",
	"files True True True ['numpy', 'in', 'Airlock'] [0, 1, 2, 3, 4] ['arr.npy', 'both.npz', 'raw.bin']",
	"module numpy numpy numpy numpy.linalg",
}

// checkNumpyOutput compares the lines whose values this test fixes; the
// Generator's draws are compared between modes instead.
func checkNumpyOutput(t *testing.T, out string) {
	t.Helper()
	got := strings.Split(strings.TrimSpace(out), "\n")
	for _, want := range numpyLines {
		found := false
		for _, line := range got {
			if line == want {
				found = true
			}
		}
		if !found {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	for _, prefix := range []string{"rng "} {
		found := false
		for _, line := range got {
			found = found || strings.HasPrefix(line, prefix)
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", prefix, out)
		}
	}
}

var freshLazy lazySandbox

// freshSandbox starts a new interpreter of the own build for every run
// (numpy is linked into that build only).
func freshSandbox(t *testing.T) *airlock.Sandbox {
	t.Helper()
	if own := ownSandbox(t); !own.Snapshots() {
		return own
	}
	return freshLazy.get(t, airlock.WithSnapshots(false), airlock.WithPython(python.SelectOwn))
}

// The same program, the same output: in a fresh interpreter, resumed from
// the snapshot image, and from an image numpy was pre-imported into.
func TestNumpyEndToEnd(t *testing.T) {
	own := ownSandbox(t)
	fresh := mustRunOn(t, freshSandbox(t), numpyProgram)
	checkNumpyOutput(t, fresh)
	if !own.Snapshots() {
		t.Skip("no snapshots here: checked in a fresh interpreter only")
	}
	if snap := mustRunOn(t, own, numpyProgram); snap != fresh {
		t.Fatalf("from the snapshot:\n%s\nfresh:\n%s", snap, fresh)
	}
	pre := numpyPreimported(t)
	for range 2 {
		if out := mustRunOn(t, pre, numpyProgram); out != fresh {
			t.Fatalf("numpy pre-imported into the image:\n%s\nfresh:\n%s", out, fresh)
		}
	}
}

var preLazy lazySandbox

// numpyPreimported is a Sandbox whose snapshot image has numpy and its
// lazily loaded submodules imported already.
func numpyPreimported(t *testing.T) *airlock.Sandbox {
	t.Helper()
	return preLazy.get(t, airlock.WithSnapshots(true), airlock.WithPython(python.SelectOwn),
		airlock.WithPreimport("numpy", "numpy.random", "numpy.fft", "numpy.linalg"))
}

// ownSession is a session of the own build's Sandbox, closed when t ends;
// sessions need snapshots.
func ownSession(t *testing.T) *airlock.Session {
	t.Helper()
	if !ownSandbox(t).Snapshots() {
		t.Skip("sessions need snapshots")
	}
	s, err := ownSandbox(t).NewSession(context.Background(), airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// mustCall runs code in s, which must exit 0, and returns its stdout.
func mustCall(t *testing.T, s *airlock.Session, code string) string {
	t.Helper()
	res, err := s.Run(context.Background(), airlock.Request{Code: code})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("call failed: err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// An array made in one call of a session is there in the next, and a
// fork gets its own copy.
func TestNumpySession(t *testing.T) {
	s := ownSession(t)
	mustCall(t, s, "import numpy as np\na = np.arange(10.0).reshape(2, 5)\nrng = np.random.default_rng(7)")
	if out := mustCall(t, s, "a *= 2\nprint(a.sum(), a.shape, np.linalg.norm(a[0]).round(4))"); out != "90.0 (2, 5) 10.9545\n" {
		t.Fatalf("second call: %q", out)
	}
	f, err := s.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if out := mustCall(t, f, "a += 1\nprint(a.sum())"); out != "100.0\n" {
		t.Fatalf("fork: %q", out)
	}
	if out := mustCall(t, s, "print(a.sum())"); out != "90.0\n" {
		t.Fatalf("the fork changed its parent's array: %q", out)
	}
	// The generator's state travels with the session: the fork and its
	// parent draw the same next numbers.
	if a, b := mustCall(t, s, "print(rng.random())"), mustCall(t, f, "print(rng.random())"); a != b {
		t.Fatalf("a seeded Generator diverged across the fork: %q %q", a, b)
	}
}

// No two runs draw the same numbers from numpy's global RandomState or a
// default_rng(), with numpy imported by the run or already in the image.
func TestNumpyRandomnessDiffers(t *testing.T) {
	code := "import numpy as np\nprint(np.random.rand(), np.random.randint(1 << 30), np.random.default_rng().random())"
	sandboxes := []*airlock.Sandbox{ownSandbox(t)}
	if ownSandbox(t).Snapshots() {
		sandboxes = append(sandboxes, numpyPreimported(t))
	}
	for _, s := range sandboxes {
		seen := map[string]bool{}
		for range 3 {
			for _, field := range strings.Fields(mustRunOn(t, s, code)) {
				if seen[field] {
					t.Fatalf("value %s repeated across runs", field)
				}
				seen[field] = true
			}
		}
	}
}
