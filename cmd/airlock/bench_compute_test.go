package main

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/airlock-sandbox/airlock/bench"
)

// TestBenchCompute runs one short workload natively and in Airlock and
// checks that every runner was timed and a ratio came out.
func TestBenchCompute(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no native python3 to compare with")
	}
	code, stdout, stderr := cli(t, "", "bench", "--compute", "--workloads", "recursion", "--reps", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep computeReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	runners := map[string]bool{}
	for _, r := range rep.Results {
		if r.Workload != "recursion" || r.MedianMS <= 0 || r.Reps != 1 {
			t.Fatalf("result %+v", r)
		}
		runners[r.Runner] = true
	}
	if !runners["native"] || !runners["own"] || !runners["own fresh"] || len(rep.GeoMean) != len(runners)-1 {
		t.Fatalf("runners %v, geometric means %v", runners, rep.GeoMean)
	}
	for name, g := range rep.GeoMean {
		if g <= 0 {
			t.Fatalf("%s: geometric mean %v", name, g)
		}
	}
}

// numpy's workloads run only when named: the default set's geometric mean
// stays the interpreter's alone, and a native python3 without numpy and
// the npm fallback are not asked to import it.
func TestComputeSelected(t *testing.T) {
	for _, w := range bench.ComputeWorkloads {
		if !computeSelected(w, nil) || computeSelected(w, []string{"numpy_matmul300"}) {
			t.Errorf("%s: selected by default %v, with only numpy_matmul300 %v", w.Name, computeSelected(w, nil), computeSelected(w, []string{"numpy_matmul300"}))
		}
	}
	for _, w := range bench.NumpyComputeWorkloads {
		if computeSelected(w, nil) || !computeSelected(w, []string{"loop", w.Name}) {
			t.Errorf("%s: selected by default %v, when named %v", w.Name, computeSelected(w, nil), computeSelected(w, []string{"loop", w.Name}))
		}
	}
}
