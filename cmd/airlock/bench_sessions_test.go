package main

import (
	"encoding/json"
	"testing"

	"github.com/airlock-sandbox/airlock/bench"
)

func TestBenchSessionsJSON(t *testing.T) {
	code, stdout, stderr := cli(t, "", "bench", "--sessions", "--runs", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep sessionReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sessions) != len(bench.SessionStates) || rep.CPUs == 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Sessions {
		if r.State == "" || r.Runs != 1 || r.CallMS <= 0 || r.FreshRunMS <= 0 || r.ForkMS <= 0 || r.SaveMS <= 0 || r.LoadMS <= 0 || r.SavedBytes <= 0 || r.HeldImageBytes <= 0 {
			t.Fatalf("bad row %+v", r)
		}
	}
}
