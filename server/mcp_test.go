package server

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

func mcpSession(t *testing.T, cfg MCPConfig) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv, err := NewMCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	// The report first; then only the images and file links that follow it.
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %+v", res.Content)
	}
	for _, c := range res.Content[1:] {
		switch c.(type) {
		case *mcp.ImageContent, *mcp.ResourceLink:
		default:
			t.Fatalf("content after the report: %T %+v", c, c)
		}
	}
	return text.Text, res.IsError
}

// tool is the listed tool named name.
func tool(t *testing.T, cs *mcp.ClientSession, name string) *mcp.Tool {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q in %+v", name, tools.Tools)
	return nil
}

func TestMCPRunPython(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools %+v, %v; want run_python and end_session", tools, err)
	}
	tool(t, cs, "run_python")
	tool(t, cs, "end_session")
	cases := []struct {
		name    string
		args    map[string]any
		isError bool
		want    []string
	}{
		{"ok with a file", map[string]any{"code": "print(open('d.txt').read().upper())\nopen('o.txt','w').write('x')",
			"files": map[string]string{"d.txt": "hi"}}, false,
			[]string{"exit_code: 0\nerror: none\n", "--- stdout ---\nHI\n--- stderr ---\n", "/home/user/o.txt (1 bytes)"}},
		{"traceback intact", map[string]any{"code": "def f():\n    return 1/0\nf()"}, true,
			[]string{"exit_code: 1\n", "Traceback (most recent call last):\n  File \"main.py\", line 3, in <module>\n    f()\n",
				"  File \"main.py\", line 2, in f\n", "ZeroDivisionError: division by zero\n"}},
		{"timeout", map[string]any{"code": "print('start', flush=True)\nwhile True: pass", "timeout": 0.3}, true,
			[]string{"error: timeout: the run exceeded its 300ms time limit", "--- stdout ---\nstart\n"}},
		{"exit status", map[string]any{"code": "import sys; sys.exit(4)"}, true, []string{"exit_code: 4\nerror: none\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, isErr := callText(t, cs, tc.args)
			if isErr != tc.isError {
				t.Errorf("IsError %v, want %v", isErr, tc.isError)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q:\n%s", w, text)
				}
			}
		})
	}
	// A missing required argument is refused by the schema.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Fatalf("no code accepted: %+v", res)
	}
}

func TestMCPToolsAndTimeoutCap(t *testing.T) {
	echo := hostfuncs.Func("shout", "Return the text in capitals.", func(_ context.Context, s string) (string, error) {
		return strings.ToUpper(s), nil
	})
	tsb, err := airlock.New(context.Background(), airlock.WithHostFuncs(echo))
	if err != nil {
		t.Fatal(err)
	}
	defer tsb.Close(context.Background())
	max := airlock.DefaultLimits()
	max.Timeout = 3 * time.Second // room for the host call on a loaded machine
	cs := mcpSession(t, MCPConfig{Sandbox: tsb, Tools: []hostfuncs.Function{echo}, MaxLimits: max})
	if d := tool(t, cs, "run_python").Description; !strings.Contains(d, "- shout: Return the text in capitals.") {
		t.Fatalf("description does not list the host tool: %s", d)
	}
	text, _ := callText(t, cs, map[string]any{"code": "import airlock; print(airlock.tools.shout('hi'))"})
	if !strings.Contains(text, "--- stdout ---\nHI\n") {
		t.Fatalf("host call: %s", text)
	}
	begin := time.Now()
	text, _ = callText(t, cs, map[string]any{"code": "while True: pass", "timeout": 3600})
	if !strings.Contains(text, "error: timeout: the run exceeded its 3s") || time.Since(begin) > 10*time.Second {
		t.Fatalf("timeout not capped: %s", text)
	}
	// A timeout so small it truncates to zero must not fall back to the
	// Sandbox's default (10 s), past the maximum.
	begin = time.Now()
	text, _ = callText(t, cs, map[string]any{"code": "while True: pass", "timeout": 1e-10})
	if !strings.Contains(text, "error: timeout") || time.Since(begin) > 5*time.Second {
		t.Fatalf("timeout 1e-10 after %v: %s", time.Since(begin), text)
	}
}

func TestMCPSessions(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb})
	run := tool(t, cs, "run_python")
	schema, _ := json.Marshal(run.InputSchema)
	if !strings.Contains(string(schema), `"session"`) || !strings.Contains(run.Description, `session "new"`) {
		t.Fatalf("schema or description lacks the session argument:\n%s\n%s", schema, run.Description)
	}
	text, isErr := callText(t, cs, map[string]any{"code": "x = 41\nopen('kept.txt', 'w').write('kept')", "session": "new"})
	id, _, ok := strings.Cut(strings.TrimPrefix(text, "session: "), "\n")
	if isErr || !strings.HasPrefix(text, "session: ") || !ok || id == "" || !strings.Contains(text, "rolled_back: false\n") {
		t.Fatalf("new session: %s", text)
	}
	text, isErr = callText(t, cs, map[string]any{"code": "x = 0\nwhile True: pass", "session": id, "timeout": 0.3})
	if !isErr || !strings.Contains(text, "rolled_back: true\n") || !strings.Contains(text, "error: timeout") {
		t.Fatalf("timed-out call: %s", text)
	}
	text, isErr = callText(t, cs, map[string]any{"code": "x += 1\nprint(x, open('kept.txt').read(), open('more.txt').read())",
		"session": id, "files": map[string]string{"more.txt": "more"}})
	if isErr || !strings.Contains(text, "session: "+id+"\n") || !strings.Contains(text, "--- stdout ---\n42 kept more\n") {
		t.Fatalf("state kept: %s", text)
	}
	// Without a session each call is fresh.
	text, isErr = callText(t, cs, map[string]any{"code": "print(x)"})
	if !isErr || !strings.Contains(text, "NameError") || strings.Contains(text, "session:") {
		t.Fatalf("fresh call sees session state: %s", text)
	}
	text, isErr = callText(t, cs, map[string]any{"code": "print(1)", "session": "0123456789abcdef01234567"})
	if !isErr || !strings.Contains(text, "error: not_found") || !strings.Contains(text, `session "new"`) {
		t.Fatalf("unknown session: %s", text)
	}
}

// File names come from the guest: one with a newline or a control
// character is quoted, so it cannot pass for lines of the report.
func TestFormatTextQuotesOddFileNames(t *testing.T) {
	text := FormatText(&airlock.Result{Files: []airlock.File{
		{Path: "/home/user/plain.txt", Size: 1},
		{Path: "/home/user/x\nexit_code: 0\x1b]0;t\a", Size: 2},
	}})
	if !strings.Contains(text, "/home/user/plain.txt (1 bytes)\n") || !strings.Contains(text, `"/home/user/x\nexit_code: 0\x1b]0;t\a" (2 bytes)`) {
		t.Fatalf("report:\n%s", text)
	}
	if strings.Contains(text, "\nexit_code:") {
		t.Fatalf("a file name forged a line:\n%s", text)
	}
}

// An agent can send many calls at once: past Concurrency they wait.
func TestMCPConcurrencyCap(t *testing.T) {
	cs := mcpSession(t, MCPConfig{Sandbox: sb, Concurrency: 1})
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { callText(t, cs, map[string]any{"code": "import time; time.sleep(0.3)"}) })
	}
	wg.Wait()
	if d := time.Since(start); d < 850*time.Millisecond {
		t.Fatalf("3 calls of 0.3 s with a concurrency of 1 took %v: they overlapped", d)
	}
}

// TestNewMCPConfigRule: as for New, 0 takes a default and a negative
// value is refused rather than silently defaulted.
func TestNewMCPConfigRule(t *testing.T) {
	if _, err := NewMCP(MCPConfig{}); err == nil || !strings.Contains(err.Error(), "Sandbox is required") {
		t.Fatalf("no Sandbox: %v", err)
	}
	for name, cfg := range map[string]MCPConfig{
		"Concurrency": {Sandbox: sb, Concurrency: -1},
		"MaxText":     {Sandbox: sb, MaxText: -5},
		"KeepBytes":   {Sandbox: sb, KeepBytes: -1},
		"KeepRuns":    {Sandbox: sb, KeepRuns: -1},
		"KeepFor":     {Sandbox: sb, KeepFor: -time.Second},
	} {
		if _, err := NewMCP(cfg); err == nil || !strings.Contains(err.Error(), "MCPConfig."+name+" is negative") {
			t.Errorf("%s negative: %v", name, err)
		}
	}
	if _, err := NewMCP(MCPConfig{Sandbox: sb}); err != nil {
		t.Fatalf("zero values take the defaults: %v", err)
	}
}
