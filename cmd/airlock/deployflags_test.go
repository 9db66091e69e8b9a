package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// The canary values the tests plant: long enough for the library (8
// bytes), unlike anything a run prints by chance.
const (
	canaryKey  = "AKIAIOSFODNN7CANARY01"
	canaryFile = "[default]\naws_access_key_id = AKIAFILECANARY0001\naws_secret_access_key = c2VjcmV0LWNhbmFyeQ\n"
)

// writeCanaries writes a --canaries-file with one file canary (several
// lines, which a flag cannot carry) and one variable.
func writeCanaries(t *testing.T) string {
	t.Helper()
	data, err := json.Marshal([]map[string]string{
		{"path": ".aws/credentials", "value": canaryFile},
		{"env": "AWS_SECRET_ACCESS_KEY", "value": canaryKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "canaries.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// suspiciousOf decodes run --json's "suspicious" reasons.
func suspiciousOf(t *testing.T, stdout string) []string {
	t.Helper()
	var res struct {
		Suspicious []struct{ Reason, Detail string } `json:"suspicious"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	var reasons []string
	for _, s := range res.Suspicious {
		reasons = append(reasons, s.Reason)
	}
	return reasons
}

// run --env sets variables in the code's environment, locally and through
// a server (the HTTP API's "env"); malformed ones are usage errors.
func TestRunEnvFlag(t *testing.T) {
	code := `import os; print(os.environ["GREETING"], os.environ["EQ"], repr(os.environ["EMPTY"]), os.environ["HOME"])`
	args := []string{"run", "--env", "GREETING=hello", "--env", "EQ=a=b", "--env", "EMPTY=", "-c", code}
	want := "hello a=b '' /home/user\n"
	if status, stdout, stderr := cli(t, "", args...); status != 0 || stdout != want {
		t.Fatalf("exit %d, stdout %q, want %q; stderr:\n%s", status, stdout, want, stderr)
	}
	url := startServer(t, "")
	t.Setenv("AIRLOCK_TOKEN", "")
	if status, stdout, stderr := cli(t, "", append([]string{"run", "--server", url}, args[1:]...)...); status != 0 || stdout != want {
		t.Fatalf("--server: exit %d, stdout %q, want %q; stderr:\n%s", status, stdout, want, stderr)
	}
	// This process's environment is not passed on.
	t.Setenv("AIRLOCK_TEST_HOST_ONLY", "leak")
	if status, stdout, _ := cli(t, "", "run", "-c", `import os; print(os.environ.get("AIRLOCK_TEST_HOST_ONLY"))`); status != 0 || stdout != "None\n" {
		t.Fatalf("host variable: exit %d, %q", status, stdout)
	}
	for _, bad := range []string{"NOEQUALS", "=value"} {
		status, _, stderr := cli(t, "", "run", "--env", bad, "-c", "pass")
		if status != exitUsage || !strings.Contains(stderr, "want KEY=VALUE") {
			t.Errorf("--env %q: exit %d, stderr %q", bad, status, stderr)
		}
	}
	// repl and test take it too.
	if status, stdout, stderr := cli(t, "import os\nprint(os.environ['GREETING'])\n", "repl", "--env", "GREETING=from-repl"); status != 0 || !strings.Contains(stdout, "from-repl") {
		t.Fatalf("repl --env: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	suite := writeSuite(t, map[string]string{"test_env.py": `import os, unittest
class T(unittest.TestCase):
    def test_env(self):
        self.assertEqual(os.environ["GREETING"], "from-test")
`})
	if status, stdout, stderr := cli(t, "", "test", "--runner", "unittest", "--env", "GREETING=from-test", suite); status != 0 || !strings.Contains(stdout, "1 passed") {
		t.Fatalf("test --env: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
}

// run --canary and --canaries-file plant honeytokens: reading the file
// or printing the variable makes the run suspicious, in --json and on
// stderr; an honest run is not. Bad canaries are usage errors.
func TestRunCanaryFlags(t *testing.T) {
	file := writeCanaries(t)
	status, stdout, stderr := cli(t, "", "run", "--json", "--canaries-file", file, "-c", `print(open(".aws/credentials").read())`)
	if status != 0 {
		t.Fatalf("exit %d; stderr:\n%s", status, stderr)
	}
	if reasons := suspiciousOf(t, stdout); !strings.Contains(strings.Join(reasons, ","), "canary") {
		t.Fatalf("reading the canary file: suspicious %v, want canary\n%s", reasons, stdout)
	}
	// A variable's value is seen leaving, not being read: here, printed.
	status, stdout, stderr = cli(t, "", "run", "--canary", "env:AWS_SECRET_ACCESS_KEY="+canaryKey, "-c", `import os; print(os.environ["AWS_SECRET_ACCESS_KEY"])`)
	if status != 0 || stdout != canaryKey+"\n" || !strings.Contains(stderr, "airlock: suspicious: canary") {
		t.Fatalf("reading the canary variable: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	status, stdout, stderr = cli(t, "", "run", "--canary", "file:.netrc=machine example.com password "+canaryKey, "-c", `print(open("/home/user/.netrc").read().split()[-1])`)
	if status != 0 || !strings.Contains(stderr, "airlock: suspicious: canary") {
		t.Fatalf("--canary file: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	// Planted but not touched: an honest run says nothing.
	status, stdout, stderr = cli(t, "", "run", "--canaries-file", file, "-c", "print(6 * 7)")
	if status != 0 || stdout != "42\n" || stderr != "" {
		t.Fatalf("honest run: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	for _, bad := range [][]string{
		{"--canary", "AWS_SECRET_ACCESS_KEY=" + canaryKey}, // no kind
		{"--canary", "env:AWS_SECRET_ACCESS_KEY"},          // no value
		{"--canary", "env:SHORT=1234"},                     // under 8 bytes: the library's check
		{"--canary", "env:NOT-A-NAME=" + canaryKey},        // the library's check
		{"--canaries-file", "/nonexistent/canaries.json"},
		{"--canaries-file", writeFile(t, `{"path": ".aws/credentials"}`)},                 // not a list
		{"--canaries-file", writeFile(t, `[{"file": ".aws/credentials", "value": "x"}]`)}, // unknown field
		{"--canary", "env:K=" + canaryKey, "--server", "http://127.0.0.1:1"},
	} {
		status, _, stderr := cli(t, "", append(append([]string{"run"}, bad...), "-c", "pass")...)
		if status != exitUsage || stderr == "" {
			t.Errorf("%q: exit %d, want %d; stderr %q", bad, status, exitUsage, stderr)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// airlock serve, as a process, plants --canaries-file's and --canary's
// canaries in every run and session call: the API's result says why the
// run is suspicious and /metrics counts it.
func TestServePlantsCanaries(t *testing.T) {
	url, _, logs := startServe(t, nil, "--drain-timeout", "5s",
		"--canaries-file", writeCanaries(t), "--canary", "env:GITHUB_TOKEN=ghp_canary0000000000000000")
	ctx := context.Background()
	c := &client.Client{URL: url}
	reasons := func(ss []wire.Suspicion) string {
		var r []string
		for _, s := range ss {
			r = append(r, s.Reason+": "+s.Detail)
		}
		return strings.Join(r, "; ")
	}
	res, err := c.Run(ctx, wire.RunRequest{Code: `import os; print(os.environ["GITHUB_TOKEN"])`})
	if err != nil || !strings.Contains(res.Stdout, "ghp_canary") || !strings.Contains(reasons(res.Suspicious), "canary") {
		t.Fatalf("the --canary variable: %+v, %v", res, err)
	}
	res, err = c.Run(ctx, wire.RunRequest{Code: `print(len(open(".aws/credentials").read()))`})
	if err != nil || !strings.Contains(reasons(res.Suspicious), "canary") {
		t.Fatalf("the --canaries-file file: %+v, %v", res, err)
	}
	res, err = c.Run(ctx, wire.RunRequest{Code: "print(1)"})
	if err != nil || len(res.Suspicious) != 0 {
		t.Fatalf("an honest run: %+v, %v", res, err)
	}
	id, err := c.NewSession(ctx, wire.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sres, err := c.RunSession(ctx, id, wire.SessionRunRequest{Code: `import os; k = os.environ["AWS_SECRET_ACCESS_KEY"]; print(k)`})
	if err != nil || !strings.Contains(reasons(sres.Suspicious), "canary") {
		t.Fatalf("a session call: %+v, %v", sres, err)
	}
	if !strings.Contains(logs.String(), "suspicious run") {
		t.Errorf("serve did not log the suspicious runs: %s", logs.String())
	}
	// A bad canary stops serve before it listens, as a usage error.
	bad := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--canary", "env:K=short")
	bad.Env = append(os.Environ(), envExecMain+"=1")
	out, err := bad.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "invalid canary") {
		t.Fatalf("serve --canary env:K=short: %v\n%s", err, out)
	}
}

// airlock mcp, as a process driven by the MCP SDK's client, plants its
// canaries too: the tool's text starts its report with a suspicious line
// the model reads.
func TestMCPPlantsCanaries(t *testing.T) {
	cmd := exec.Command(os.Args[0], "mcp", "--canaries-file", writeCanaries(t))
	cmd.Env = append(os.Environ(), envExecMain+"=1")
	var stderr syncWriter
	cmd.Stderr = &stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	call := func(code string) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
		if err != nil {
			t.Fatalf("call: %v\nstderr:\n%s", err, stderr.String())
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if text := call(`print("lines", open("/home/user/.aws/credentials").read().count("\n"))`); !regexp.MustCompile(`(?m)^suspicious: canary`).MatchString(text) || !strings.Contains(text, "lines 3") {
		t.Fatalf("reading the canary file:\n%s", text)
	}
	if text := call(`print(6 * 7)`); strings.Contains(text, "suspicious") || !strings.Contains(text, "42") {
		t.Fatalf("an honest call:\n%s", text)
	}
}
