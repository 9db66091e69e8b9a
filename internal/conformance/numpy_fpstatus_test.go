package airlock_test

import "testing"

// WebAssembly has no floating-point exception flags, so numpy's own
// status word carries what numpy raises in software
// (scripts/numpy-patches/wasi-floatstatus.patch): numpy.linalg's
// singular-matrix errors, integer division by zero, np.errstate. The
// expected lines are native numpy's; a status must not outlive the
// operation that raised it.
const numpyFloatStatusProgram = `
import warnings
import numpy as np
def outcome(f):
    try:
        return "returned " + repr(f())
    except Exception as e:
        return type(e).__name__ + ": " + str(e)
singular = np.array([[1.0, 2.0], [2.0, 4.0]])
print("solve", outcome(lambda: np.linalg.solve(singular, np.ones(2))))
print("inv", outcome(lambda: np.linalg.inv(singular)))
print("cholesky", outcome(lambda: np.linalg.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))))
print("eigvalsh", outcome(lambda: np.linalg.eigvalsh(np.eye(2)).tolist()))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    q = np.array([7, 8], dtype=np.int64) // np.array([0, 2], dtype=np.int64)
print("floor_divide", q.tolist(), [str(w.message) for w in caught])
with np.errstate(divide="raise"):
    print("remainder", outcome(lambda: np.array([1]) % np.array([0])))
with np.errstate(all="raise"):
    print("next", outcome(lambda: (np.array([1.0]) + 1).tolist()), outcome(lambda: np.linalg.solve(np.eye(2), np.ones(2)).tolist()))
`

var numpyFloatStatusLines = []string{
	"solve LinAlgError: Singular matrix",
	"inv LinAlgError: Singular matrix",
	"cholesky LinAlgError: Matrix is not positive definite",
	"eigvalsh returned [1.0, 1.0]",
	"floor_divide [0, 4] ['divide by zero encountered in floor_divide']",
	"remainder FloatingPointError: divide by zero encountered in remainder",
	"next returned [2.0] returned [1.0, 1.0]",
}

func TestNumpyFloatStatus(t *testing.T) {
	wantLines(t, mustRunOn(t, ownSandbox(t), numpyFloatStatusProgram), numpyFloatStatusLines)
}
