package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// airlock serve --tokens-file: each line's token is a client whose
// sessions are its own; the log names the clients, never a token; a
// malformed file stops serve as a usage error that shows no token.
func TestServeTokensFile(t *testing.T) {
	const (
		tokA = "alpha-token-0123456789abcdef"
		tokB = "bravo-token-0123456789abcdef"
	)
	file := writeFile(t, "# clients\nalpha "+tokA+"\n\nbravo "+tokB+"\n")
	url, _, logs := startServe(t, nil, "--tokens-file", file, "--drain-timeout", "5s")
	ctx := context.Background()
	a, b := &client.Client{URL: url, Token: tokA}, &client.Client{URL: url, Token: tokB}
	id, err := a.NewSession(ctx, wire.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RunSession(ctx, id, wire.SessionRunRequest{Code: "n = 1"}); err != nil {
		t.Fatal(err)
	}
	var apiErr *client.APIError
	if _, err := b.RunSession(ctx, id, wire.SessionRunRequest{Code: "print(n)"}); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("another client's call of the session: %v", err)
	}
	if _, err := (&client.Client{URL: url}).Run(ctx, wire.RunRequest{Code: "1"}); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("a run without a token: %v", err)
	}
	logNamesClientsNotTokens(t, logs.String(), tokA, tokB)
	for _, c := range []struct{ content, want string }{
		{"alpha " + tokA + " extra\n", "want NAME TOKEN"},
		{"alpha short-secret\n", "shorter than 16"},
		{"alpha " + tokA + "\nalpha " + tokB + "\n", "given twice"},
		{"# nobody\n", "no clients"},
	} {
		bad := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--tokens-file", writeFile(t, c.content))
		bad.Env = append(os.Environ(), envExecMain+"=1", "AIRLOCK_TOKEN=")
		out, err := bad.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(out), c.want) {
			t.Errorf("tokens file %q: %v\n%s", c.content, err, out)
		}
		if strings.Contains(string(out), "short-secret") || strings.Contains(string(out), tokB) {
			t.Errorf("tokens file %q: the error shows a token: %s", c.content, out)
		}
	}
}

// startMCPHTTP starts airlock mcp --http on a free loopback port as a
// process, with args, and returns its /mcp URL and its log.
func startMCPHTTP(t *testing.T, args ...string) (string, *syncWriter) {
	t.Helper()
	logs := &syncWriter{}
	cmd := exec.Command(os.Args[0], append([]string{"mcp", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), envExecMain+"=1", "AIRLOCK_TOKEN=")
	cmd.Stdout, cmd.Stderr = io.Discard, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	urlRE := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(logs.String()); m != nil {
			return m[1], logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("airlock mcp --http did not start: %s", logs.String())
		}
	}
}

// airlock mcp --http --tokens-file, with the MCP SDK's client: each
// line's token is a client; its two MCP sessions share its sessions,
// another client's finds none of them, and a client's third session is
// refused by --max-sessions-per-client, counted across its MCP sessions;
// the log names the clients, never a token. A malformed tokens file, or
// one without --http, stops mcp as a usage error that shows no token.
func TestMCPTokensFile(t *testing.T) {
	const (
		tokA = "alpha-token-0123456789abcdef"
		tokB = "bravo-token-0123456789abcdef"
	)
	file := writeFile(t, "# clients\nalpha "+tokA+"\n\nbravo "+tokB+"\n")
	endpoint, logs := startMCPHTTP(t, "--tokens-file", file, "--max-sessions-per-client", "2", "--memory-per-client", "1GiB")
	ctx := context.Background()
	connect := func(token string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	run := func(cs *mcp.ClientSession, session, code string) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"session": session, "code": code}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	a1, a2, b := connect(tokA), connect(tokA), connect(tokB)
	text, isErr := run(a1, "new", "n = 41")
	if isErr {
		t.Fatal(text)
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(text, "session: "), "\n")
	if text, isErr := run(a2, id, "print(n + 1)"); isErr || !strings.Contains(text, "--- stdout ---\n42\n") {
		t.Fatalf("alpha's second MCP session calling its session: %s", text)
	}
	if text, isErr := run(b, id, "print(n)"); !isErr || !strings.HasPrefix(text, "error: not_found") {
		t.Fatalf("bravo calling alpha's session: %s", text)
	}
	if text, isErr := run(a2, "new", "pass"); isErr {
		t.Fatalf("alpha's second session: %s", text)
	}
	if text, isErr := run(a1, "new", "pass"); !isErr || !strings.Contains(text, `error: too_many_sessions: client quota exceeded: client "alpha" holds 2 sessions`) {
		t.Fatalf("alpha's third session: %s", text)
	}
	if text, isErr := run(b, "new", "pass"); isErr {
		t.Fatalf("bravo's session: %s", text)
	}
	logNamesClientsNotTokens(t, logs.String(), tokA, tokB)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "127.0.0.1:0", "--tokens-file", writeFile(t, "alpha "+tokA+" extra\n")}, "want NAME TOKEN"},
		{[]string{"--http", "127.0.0.1:0", "--tokens-file", writeFile(t, "alpha short-secret\n")}, "shorter than 16"},
		{[]string{"--http", "127.0.0.1:0", "--tokens-file", writeFile(t, "alpha "+tokA+"\nalpha "+tokB+"\n")}, "given twice"},
		{[]string{"--http", "127.0.0.1:0", "--tokens-file", writeFile(t, "alpha "+tokA+"\nbravo "+tokA+"\n")}, "same token"},
		{[]string{"--http", "127.0.0.1:0", "--tokens-file", writeFile(t, "# nobody\n")}, "no clients"},
		{[]string{"--http", "127.0.0.1:0", "--tokens-file", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"--tokens-file", file}, "--tokens-file is for --http"},
	} {
		bad := exec.Command(os.Args[0], append([]string{"mcp"}, c.args...)...)
		bad.Env = append(os.Environ(), envExecMain+"=1", "AIRLOCK_TOKEN=")
		out, err := bad.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), c.want) {
			t.Errorf("mcp %v: %v, want exit %d saying %q\n%s", c.args, err, exitUsage, c.want, out)
		}
		if strings.Contains(string(out), "short-secret") || strings.Contains(string(out), tokA) || strings.Contains(string(out), tokB) {
			t.Errorf("mcp %v: the error shows a token: %s", c.args, out)
		}
	}
}

// logNamesClientsNotTokens checks a server's log names the clients alpha
// and bravo and shows none of their tokens.
func logNamesClientsNotTokens(t *testing.T, log string, tokens ...string) {
	t.Helper()
	if !strings.Contains(log, "alpha") || !strings.Contains(log, "bravo") {
		t.Errorf("the log does not name the clients: %s", log)
	}
	for _, tok := range tokens {
		if strings.Contains(log, tok) {
			t.Errorf("the log shows a token: %s", log)
		}
	}
}
