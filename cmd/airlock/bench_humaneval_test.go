package main

import (
	"encoding/json"
	"testing"

	"github.com/airlock-sandbox/airlock/bench"
)

// Every HumanEval canonical solution passes its test through serve's
// handler and the Go API as it does natively, and the report says how the
// wall times compare.
func TestBenchHumanEvalJSON(t *testing.T) {
	code, stdout, stderr := cli(t, "", "bench", "--humaneval", "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
	var rep humanEvalReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Problems != bench.HumanEvalProblems || rep.Workers != 2 || len(rep.Rows) != 3 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Rows {
		if r.Passed != bench.HumanEvalProblems || len(r.Failures) != 0 || r.Rounds != 1 || r.WallMS <= 0 || r.ProblemP50MS <= 0 {
			t.Errorf("row %+v", r)
		}
		if native := r.Surface == "native python3"; native != (r.Speedup == 0) {
			t.Errorf("row %+v: a speedup is the sandbox rows' alone", r)
		}
	}
}
