package airlock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/internal/wasmbin"
	"github.com/airlock-sandbox/airlock/python"
)

// numpy's BLAS and LAPACK are OpenBLAS (scripts/build-openblas.sh): its
// generic C kernels and its C translation of LAPACK, linked into
// python.wasm. A call whose C declaration disagrees with OpenBLAS'
// definition would trap (the build's link check refuses those), and a
// kernel miscompiled for wasm would give wrong numbers: each routine
// numpy.linalg and @ reach is run on a 300×300 problem, large enough for
// OpenBLAS' blocked paths, and checked against a result computed without
// it (einsum's own loops, identities, the closed form of a 3×3 case).
const numpyBLASProgram = `
import numpy as np
cfg = np.show_config(mode="dicts")["Build Dependencies"]
print("config", cfg["blas"]["name"], cfg["lapack"]["name"], cfg["blas"]["version"])
rng = np.random.default_rng(42)
n = 300
a = rng.standard_normal((n, n))
b = rng.standard_normal((n, n))
spd = a @ a.T + n * np.eye(n)
def close(x, y, tol=1e-9):
    return bool(np.allclose(x, y, rtol=tol, atol=tol * max(1.0, float(np.abs(y).max()))))
print("matmul", close(a @ b, np.einsum("ij,jk->ik", a, b)), close(a.T @ b, np.einsum("ji,jk->ik", a, b)),
      close(a[:, 0] @ b, np.einsum("j,jk->k", a[:, 0], b)), close(a.astype(np.float32) @ b.astype(np.float32),
      np.einsum("ij,jk->ik", a, b), 1e-4), close((a + 1j * b) @ (b - 1j * a), np.einsum("ij,jk->ik", a + 1j * b, b - 1j * a)))
rhs = rng.standard_normal((n, 3))
x = np.linalg.solve(a, rhs)
print("solve", close(np.einsum("ij,jk->ik", a, x), rhs), close(np.linalg.solve(a, rhs[:, 0]), x[:, 0]))
inv = np.linalg.inv(a)
print("inv", close(np.einsum("ij,jk->ik", inv, a), np.eye(n), 1e-8))
w, v = np.linalg.eig(a)
print("eig", close(np.einsum("ij,jk->ik", a.astype(complex), v), v * w, 1e-8), close(np.sort(np.linalg.eigvalsh(spd)),
      np.sort(np.linalg.eig(spd)[0].real), 1e-8))
u, s, vt = np.linalg.svd(a)
print("svd", close(np.einsum("ij,j,jk->ik", u, s, vt), a, 1e-8), close(s ** 2, np.sort(np.linalg.eigvalsh(a.T @ a))[::-1], 1e-7),
      bool(np.all(np.diff(s) <= 0)))
tall = rng.standard_normal((n, 40))
coef, res, rank, sv = np.linalg.lstsq(tall, rhs, rcond=None)
print("lstsq", close(coef, np.linalg.solve(tall.T @ tall, tall.T @ rhs), 1e-8), int(rank))
l = np.linalg.cholesky(spd)
print("cholesky", close(np.einsum("ij,kj->ik", l, l), spd), bool(np.allclose(l, np.tril(l))))
q, r = np.linalg.qr(a)
print("qr", close(np.einsum("ij,jk->ik", q, r), a, 1e-8), close(q.T @ q, np.eye(n), 1e-8))
print("det", round(float(np.linalg.det(np.array([[3.0, 1.0, 0.5], [1.0, 2.0, 0.0], [0.5, 0.0, 4.0]]))), 9),
      round(float(np.linalg.slogdet(spd)[1] - np.log(np.linalg.eigvalsh(spd)).sum()), 6) + 0.0)
# OpenBLAS' LAPACK reports a bad argument through numpy's xerbla_, passing
# the routine name's hidden length (scripts/numpy-patches/xerbla-hidden-length.patch).
from numpy.linalg import lapack_lite
try:
    lapack_lite.dgeqrf(3, 3, np.eye(3), 3, np.zeros(3), np.zeros(1), 0, 0)
except ValueError as e:
    print("xerbla", type(e).__name__, e)
`

var numpyBLASLines = []string{
	"config openblas openblas 0.3.31",
	"matmul True True True True True",
	"solve True True",
	"inv True",
	"eig True True",
	"svd True True True",
	"lstsq True 40",
	"cholesky True True",
	"qr True True",
	"det 19.5 0.0",
	"xerbla ValueError On entry to DGEQRF parameter number 7 had an illegal value",
}

func TestNumpyOpenBLAS(t *testing.T) {
	// Seconds of compute on an idle machine, past the default 10 s limit
	// on a loaded one: the test checks results, not speed.
	req := airlock.Request{Code: numpyBLASProgram, Limits: airlock.Limits{Timeout: time.Minute}}
	wantLines(t, mustRunRequestOn(t, ownSandbox(t), req), numpyBLASLines)
}

// wantLines checks a program's stdout line by line against want.
func wantLines(t *testing.T, out string, want []string) {
	t.Helper()
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i+1, got[i], want[i])
		}
	}
}

// wasm-ld links a call through a declaration whose signature differs from
// the definition's (void against int, a Fortran hidden length missing) to
// a stub named "signature_mismatch:<callee>" that traps. OpenBLAS' C
// LAPACK and numpy declare each other's routines loosely; the build's
// link checks refuse such stubs in OpenBLAS, numpy's and pandas' links,
// and this holds the module that ships, every stage's link included, to
// the same: a stub there is a routine that cannot be called.
func TestOwnBuildNoSignatureMismatch(t *testing.T) {
	art, err := python.Load(python.SelectOwn, testenv.FromEnv().CacheDir)
	if err != nil {
		t.Skipf("no own build: %v", err)
	}
	wasm, err := art.Module()
	if err != nil {
		t.Fatal(err)
	}
	stubs, err := wasmbin.FuncNamesMatching(wasm, func(name string) bool { return strings.HasPrefix(name, "signature_mismatch:") })
	if err != nil {
		t.Fatal(err)
	}
	if names, err := wasmbin.FuncIndexes(wasm, []string{"_PyEval_EvalFrameDefault"}); err != nil || len(names) == 0 {
		t.Fatalf("python.wasm has no function names to check (name section stripped?): %v, %v", names, err)
	}
	for name := range stubs {
		t.Errorf("python.wasm has %s: every call to it traps", name)
	}
}
