package wire_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/server/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func ptr[T any](v T) *T { return &v }

// goldens are one value of each message, every field set, so a renamed or
// dropped JSON field shows as a diff of a file clients are written against.
var goldens = map[string]any{
	"result.json": wire.Result{
		ExitCode: 1, Stdout: "hi\n", Stderr: "Traceback ...\n",
		Error:        &wire.ErrorInfo{Kind: "timeout", Message: "the run passed its 2s deadline"},
		DurationMS:   21.5,
		Files:        []wire.File{{Path: "out.txt", Size: 2, Data: []byte("ok")}},
		FilesOmitted: 1, Fuel: 1000,
		Python:            wire.Python{Build: "own", Version: "3.13.1", SHA256: "ab12"},
		Value:             "42",
		Displays:          []wire.Display{{Value: true, Data: map[string]string{"text/plain": "42"}}},
		DisplaysTruncated: true,
		Audit:             []wire.AuditEvent{{AtMS: 1.5, Kind: "fs", Detail: "/etc/passwd", Count: 2, Guest: true}},
		AuditDropped:      3,
		Suspicious:        []wire.Suspicion{{Reason: "secret_probe", Detail: "read /proc/self/environ"}},
		Network: []wire.NetworkDecision{{Allowed: true, Method: "GET", URL: "https://example.org/", Rule: "example.org",
			Address: "93.184.215.14:443", Status: 200, RequestBytes: 0, ResponseBytes: 1256, DurationMS: 80.25}},
		Installs: []wire.PackageInstall{{Requirements: []string{"six"}, Allowed: true, DurationMS: 12.5,
			Packages: []wire.InstalledPackage{{Name: "six", Version: "1.16.0", Filename: "six-1.16.0-py2.py3-none-any.whl", SHA256: "cd34", Cached: true}}}},
	},
	"run_request.json": wire.RunRequest{
		Code: "print(1)", Filename: "main.py", Files: wire.InputFiles{"in.txt": []byte("hi")}, Stdin: []byte("x"),
		Env: map[string]string{"A": "b"}, Deterministic: true, Seed: 7, Tools: []string{"lookup"},
		RichOutput: ptr(false), Network: []string{"example.org"},
		Limits: wire.RunLimits{TimeoutMS: 2000, Memory: 64 << 20, Output: 1 << 20, FSBytes: 1 << 20, FSFiles: 100, HostCalls: 10, HostPayload: 4096, Fuel: 1e9},
	},
	"session_request.json": wire.SessionRequest{
		Files: wire.InputFiles{"data.csv": []byte("a,b\n")}, Env: map[string]string{"A": "b"},
		Limits: wire.RunLimits{TimeoutMS: 5000}, Tools: []string{"lookup"},
	},
	"session_run_request.json": wire.SessionRunRequest{
		Code: "x += 1", Filename: "cell.py", Files: wire.InputFiles{"more.txt": []byte("m")}, Stdin: []byte("y"),
		Env: map[string]string{"B": "c"}, Limits: wire.RunLimits{Memory: 32 << 20}, Tools: []string{"lookup"},
		RichOutput: ptr(true), Network: []string{},
	},
	"session_result.json": wire.SessionResult{Result: wire.Result{Stdout: "1\n", DurationMS: 3, Files: []wire.File{}}, RolledBack: true},
	"session_info.json":   wire.SessionInfo{ID: "s-1"},
	"session_list.json": wire.SessionList{Sessions: []wire.SessionStatus{
		{ID: "s-1", Created: time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC), LastCall: ptr(time.Date(2026, 12, 5, 1, 0, 2, 0, time.UTC)), Calls: 2, Running: true},
		{ID: "s-2", Created: time.Date(2026, 12, 5, 1, 1, 0, 0, time.UTC)},
	}},
	"status.json": wire.Status{Runs: 12, InFlight: 1, Queued: 2, Sessions: 3, Python: wire.Python{Build: "own", Version: "3.13.1", SHA256: "ab12"}},
	"error.json":  wire.ErrorBody{Error: wire.ErrorInfo{Kind: "not_found", Message: "no session s-9"}},
}

func TestGoldenJSON(t *testing.T) {
	for name, v := range goldens {
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s changed; the JSON is a contract (go test -update if meant):\ngot  %s\nwant %s", name, got, want)
			}
			// And back: a golden file decodes to the value it came from.
			back := reflect.New(reflect.TypeOf(v))
			if err := json.Unmarshal(want, back.Interface()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Elem().Interface(), v) {
				t.Fatalf("%s decodes to %+v, want %+v", name, back.Elem().Interface(), v)
			}
		})
	}
}

func TestInputFilesForms(t *testing.T) {
	var f wire.InputFiles
	if err := json.Unmarshal([]byte(`{"a": "aGk=", "b": {"text": "hé"}, "c": {"base64": "eA=="}}`), &f); err != nil {
		t.Fatal(err)
	}
	if string(f["a"]) != "hi" || string(f["b"]) != "hé" || string(f["c"]) != "x" {
		t.Fatalf("got %q", f)
	}
	for body, want := range map[string]string{
		`{"z": "not base64!"}`:                   `files["z"]`,
		`{"y": {"text": "a", "base64": "eA=="}}`: `exactly one of "text" and "base64"`,
		`{"x": 5}`:                               `want a base64 string`,
		`[]`:                                     `want an object of path: content`,
	} {
		var f wire.InputFiles
		if err := json.Unmarshal([]byte(body), &f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", body, err, want)
		}
	}
}

func TestMilliseconds(t *testing.T) {
	if got := wire.Milliseconds(1500 * time.Microsecond); got != 1.5 {
		t.Fatalf("Milliseconds(1.5ms) = %v", got)
	}
	if got := wire.Duration(1.5); got != 1500*time.Microsecond {
		t.Fatalf("Duration(1.5) = %v", got)
	}
}
