package airlock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// numpy's C++ (pocketfft) is compiled for the invoke_ exception runtime
// (scripts/build-cxx-eh.sh, linked in by scripts/build-python.sh): a C++
// exception reaches numpy's own catch, which raises the Python exception,
// and the interpreter carries on. Before, the same throw ended the run.

// numpyThrowProgram makes pocketfft throw twice: std::runtime_error for a
// zero-length plan (numpy's wrapper raises RuntimeError with its what()),
// and std::bad_alloc for a plan that does not fit the run's memory limit
// (MemoryError); then the same FFT works, which it could not if the
// unwinds had left the interpreter's or pocketfft's state behind.
const numpyThrowProgram = `
import numpy as np
from numpy.fft import _pocketfft_umath as pu
for _ in range(3):
    try:
        pu.fft(np.zeros(4, complex), 1.0, out=np.zeros(0, complex))
        print("no exception")
    except RuntimeError as e:
        print("RuntimeError:", e)
try:
    np.fft.fft(np.ones(BIG_PRIME))
    print("no exception")
except MemoryError:
    print("MemoryError")
print(np.fft.fft([1.0, 2.0, 3.0, 4.0]).tolist())
`

var numpyThrowWant = "RuntimeError: zero-length FFT requested\n" +
	"RuntimeError: zero-length FFT requested\n" +
	"RuntimeError: zero-length FFT requested\n" +
	"MemoryError\n" +
	"[(10+0j), (-2+2j), (-2+0j), (-2-2j)]\n"

// numpyThrowMemory bounds the run so that BIG_PRIME's input and output
// fit and pocketfft's Bluestein plan for it (several times as large) does
// not.
const (
	numpyThrowMemory = 256 << 20
	numpyBigPrime    = "4000037"
)

func TestNumpyCXXExceptionRaises(t *testing.T) {
	code := strings.ReplaceAll(numpyThrowProgram, "BIG_PRIME", numpyBigPrime)
	req := airlock.Request{Code: code, Limits: airlock.Limits{Memory: numpyThrowMemory}}
	sandboxes := map[string]*airlock.Sandbox{"fresh": freshSandbox(t)}
	if own := ownSandbox(t); own.Snapshots() {
		sandboxes["snapshot"] = own
	}
	for name, s := range sandboxes {
		res, err := s.Run(context.Background(), req)
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != numpyThrowWant {
			t.Errorf("%s: err %v, exit %d\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", name, err, res.ExitCode, res.Stdout, numpyThrowWant, res.Stderr)
		}
	}
	// In a session, the call after the one that threw sees its state.
	if !ownSandbox(t).Snapshots() {
		return
	}
	sess := ownSession(t)
	mustCall(t, sess, "import numpy as np\nfrom numpy.fft import _pocketfft_umath as pu\nkept = np.arange(4.0)")
	out := mustCall(t, sess, "try:\n    pu.fft(np.zeros(4, complex), 1.0, out=np.zeros(0, complex))\nexcept RuntimeError as e:\n    print(e)")
	if out != "zero-length FFT requested\n" {
		t.Fatalf("session call that threw: %q", out)
	}
	if out := mustCall(t, sess, "print(np.fft.fft(kept).real.tolist())"); out != "[6.0, -2.0, -2.0, -2.0]\n" {
		t.Fatalf("session call after the throw: %q", out)
	}
}
