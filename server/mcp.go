package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/tools"
)

// MCPConfig configures NewMCP.
type MCPConfig struct {
	// Sandbox runs the code; required.
	Sandbox *airlock.Sandbox
	// Tools are the host tools registered on Sandbox, listed in the
	// run_python description so a model knows it may call them.
	Tools []tools.Tool
	// MaxLimits caps runs (default airlock.DefaultLimits()); the model picks
	// the timeout below MaxLimits.Timeout.
	MaxLimits airlock.Limits
	// Concurrency caps the runs going at once (default: CPUs); further
	// calls wait for a turn. An agent can send many calls at once, each
	// entitled to MaxLimits.Memory.
	Concurrency int
}

// RunPythonArgs are run_python's arguments.
type RunPythonArgs struct {
	Code    string            `json:"code" jsonschema:"Python source to run as __main__"`
	Files   map[string]string `json:"files,omitempty" jsonschema:"text files to create first, by path relative to /home/user (the working directory)"`
	Timeout float64           `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds"`
	Session string            `json:"session,omitempty" jsonschema:"omit for a fresh sandbox; \"new\" to start a session that keeps variables, imports and files between calls (its id is in the result); a session id to run in that session"`
}

// NewMCP returns a Model Context Protocol server with one tool, run_python.
// Its optional session argument keeps state between calls: "new" starts a
// session of cfg.Sandbox (whose TTL and cap apply), an ID runs in one.
// Serve it with (*mcp.Server).Run over a LineTransport (on stdin and
// stdout, say), which survives bad input; the SDK's StdioTransport ends
// at the first line that does not decode.
func NewMCP(cfg MCPConfig) *mcp.Server {
	if cfg.MaxLimits == (airlock.Limits{}) {
		cfg.MaxLimits = airlock.DefaultLimits()
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = runtime.NumCPU()
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "airlock", Version: airlock.Version}, nil)
	table := &sessions{}
	turns := make(chan struct{}, cfg.Concurrency)
	mcp.AddTool(srv, &mcp.Tool{Name: "run_python", Description: mcpDescription(cfg)},
		func(ctx context.Context, _ *mcp.CallToolRequest, in RunPythonArgs) (*mcp.CallToolResult, any, error) {
			select {
			case turns <- struct{}{}:
				defer func() { <-turns }()
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return runPython(ctx, cfg, table, in), nil, nil
		})
	return srv
}

func mcpDescription(cfg MCPConfig) string {
	var b strings.Builder
	version := cfg.Sandbox.Info().Version
	if version == "" {
		version = "3"
	}
	fmt.Fprintf(&b, "Run Python %s code in a fresh, isolated sandbox and return its stdout, stderr, exit code and, "+
		"if the sandbox stopped it, why (timeout, memory_limit, output_limit, fs_quota). "+
		"The standard library is available; there is no network and no third-party package. "+
		"The working directory /home/user and /tmp are in memory and start empty apart from the files you pass; "+
		"nothing persists between calls unless you use a session: pass session \"new\" to start one, then its id "+
		"(printed as \"session: ID\") to run more code with the same variables, imports and files, as in a notebook; "+
		"a call that hits a limit is rolled back (rolled_back: true) and the session keeps its earlier state; "+
		"an idle session expires. Limits: %s wall clock (default %s), %d MiB of memory, %d KiB of output per stream.",
		version, cfg.MaxLimits.Timeout, min(cfg.MaxLimits.Timeout, airlock.DefaultLimits().Timeout),
		cfg.MaxLimits.Memory>>20, cfg.MaxLimits.Output>>10)
	if len(cfg.Tools) > 0 {
		b.WriteString("\n\nHost functions the code can call (`import airlock`, then `airlock.tools.NAME(...)`, " +
			"keyword or positional arguments; failures raise airlock.HostError; `help(airlock.tools)` shows signatures):")
		for _, t := range cfg.Tools {
			fmt.Fprintf(&b, "\n- %s: %s", t.Name(), t.Description())
		}
	}
	return b.String()
}

func runPython(ctx context.Context, cfg MCPConfig, table *sessions, in RunPythonArgs) *mcp.CallToolResult {
	timeout := min(cfg.MaxLimits.Timeout, airlock.DefaultLimits().Timeout)
	if in.Timeout > 0 {
		timeout = cfg.MaxLimits.Timeout
		if in.Timeout < timeout.Seconds() {
			// At least a millisecond: a duration that truncates to 0
			// would mean the Sandbox's default, past the maximum.
			timeout = max(time.Duration(in.Timeout*float64(time.Second)), time.Millisecond)
		}
	}
	files := make(map[string][]byte, len(in.Files))
	for p, data := range in.Files {
		files[p] = []byte(data)
	}
	limits := cfg.MaxLimits
	limits.Timeout = timeout
	req := airlock.Request{Code: in.Code, Filename: "main.py", Files: files, Limits: limits}
	if in.Session == "" {
		res, _ := cfg.Sandbox.Run(ctx, req)
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: FormatText(res)}},
			IsError: res.Error != nil || res.ExitCode != 0,
		}
	}
	var sess *airlock.Session
	if in.Session == "new" {
		var err error
		if sess, err = cfg.Sandbox.NewSession(ctx, airlock.SessionOptions{Limits: cfg.MaxLimits}); err != nil {
			return toolError("error: cannot start a session: %v", err)
		}
		table.add(sess)
	} else if sess = table.get(in.Session); sess == nil {
		return toolError("error: not_found: no session %q (it may have expired); pass session \"new\" to start one", in.Session)
	}
	res, _ := sess.Exec(ctx, req)
	if res.Error != nil && (errors.Is(res.Error, airlock.ErrSessionClosed) || errors.Is(res.Error, airlock.ErrSessionExpired)) {
		return toolError("error: not_found: session %q has ended; pass session \"new\" to start one", in.Session)
	}
	text := fmt.Sprintf("session: %s\nrolled_back: %v\n", sess.ID(), res.RolledBack) + FormatText(res)
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		IsError: res.Error != nil || res.ExitCode != 0,
	}
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}, IsError: true}
}

// FormatText renders a Result for a language model: the outcome first,
// then stdout and stderr verbatim (tracebacks intact) and the files left.
func FormatText(res *airlock.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d\n", res.ExitCode)
	if res.Error != nil {
		fmt.Fprintf(&b, "error: %s: %s\n", res.Error.Kind, res.Error.Message)
	} else {
		b.WriteString("error: none\n")
	}
	fmt.Fprintf(&b, "duration_ms: %.1f\n", float64(res.Duration)/float64(time.Millisecond))
	section := func(name string, data []byte, truncated bool) {
		fmt.Fprintf(&b, "--- %s", name)
		if truncated {
			b.WriteString(" (truncated at the output limit)")
		}
		b.WriteString(" ---\n")
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteString("\n")
		}
	}
	section("stdout", res.Stdout, res.StdoutTruncated)
	section("stderr", res.Stderr, res.StderrTruncated)
	if len(res.Files) > 0 {
		b.WriteString("--- files written ---\n")
		for _, f := range res.Files {
			// The guest names its files: one with a newline or a control
			// character could pass for lines of this report.
			name := f.Path
			if strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) {
				name = strconv.Quote(name)
			}
			fmt.Fprintf(&b, "%s (%d bytes)\n", name, f.Size)
		}
	}
	return b.String()
}
