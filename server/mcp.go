package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

// MCPConfig configures NewMCP.
type MCPConfig struct {
	// Sandbox runs the code; required.
	Sandbox *airlock.Sandbox
	// HostFuncs are the host functions registered on Sandbox, listed in
	// the run_python description so a model knows it may call them.
	HostFuncs []hostfuncs.Function
	// Tools is HostFuncs' old name, used when HostFuncs is nil.
	//
	// Deprecated: use HostFuncs.
	Tools []hostfuncs.Function
	// MaxLimits caps runs (default airlock.DefaultLimits()); the model picks
	// the timeout below MaxLimits.Timeout.
	MaxLimits airlock.Limits
	// Concurrency caps the runs going at once (default: CPUs); further
	// calls wait for a turn. An agent can send many calls at once, each
	// entitled to MaxLimits.Memory.
	Concurrency int
	// MaxText bounds a result's text, in characters (default
	// DefaultMCPMaxText): longer stdout and stderr keep their head and
	// tail, and the whole is a resource.
	MaxText int
	// KeepBytes, KeepRuns and KeepFor bound the outputs and files kept as
	// resources (defaults DefaultMCPKeepBytes, DefaultMCPKeepRuns,
	// DefaultMCPKeepFor); the oldest go first.
	KeepBytes int64
	KeepRuns  int
	KeepFor   time.Duration
	// ShareAcrossClients lets every client of the server read any
	// client's run resources and run in, or end, any client's sessions.
	// By default each client sees only what it made, and another's is
	// "not found": a URI or session id that leaks (a log, a shared
	// transcript) then gives nothing away. A client is the one its
	// request's bearer token names (MCPHTTPConfig.Clients, or any
	// TokenInfo with a UserID the SDK passes on), all of its MCP sessions
	// together; without one, each MCP session (one connection) is a
	// client of its own.
	ShareAcrossClients bool
	// MemoryBudget bounds, in bytes, the memory sessions hold between
	// calls and the memory limits of the runs in flight, as
	// Config.MemoryBudget does for serve (a run waits up to MemoryWait,
	// default 2 s, then is refused "error: memory_budget: ..."; at most
	// 16 wait at once): past it, the least
	// recently used idle sessions are saved under SpillDir and closed,
	// and come back on their next call; a session that cannot be placed
	// is refused ("error: memory_budget: ..."). Default (0):
	// DefaultMemoryBudget; negative: none. SpillDir is where the private
	// directory of spilled sessions is made (default os.TempDir(), where
	// it then outlives the process: name a directory you remove at exit,
	// as airlock mcp does).
	MemoryBudget int64
	SpillDir     string
	MemoryWait   time.Duration
	// MaxSessionsPerClient caps the sessions one client (as
	// ShareAcrossClients says) holds at once, spilled ones included
	// ("error: too_many_sessions"), so that one cannot take the
	// Sandbox's every slot; 0: no cap but the Sandbox's. MemoryPerClient
	// caps, in bytes, what one client's sessions hold (spilled ones
	// included) together with the memory limits of its runs in flight
	// ("error: client_quota"); 0: none but MemoryBudget. Neither is
	// applied with ShareAcrossClients.
	MaxSessionsPerClient int
	MemoryPerClient      int64
	// ManageGoMemoryLimit lets the server set the Go runtime's soft
	// memory limit (debug.SetMemoryLimit, process-wide) to what
	// MemoryBudget leaves the heap, as Config.ManageGoMemoryLimit does
	// for serve. airlock mcp sets it unless GOMEMLIMIT is set.
	ManageGoMemoryLimit bool
	// Logger receives spill events (default: none).
	Logger *slog.Logger
}

// RunPythonArgs are run_python's arguments.
type RunPythonArgs struct {
	Code        string            `json:"code" jsonschema:"Python source to run as __main__"`
	Files       map[string]string `json:"files,omitempty" jsonschema:"text files to create first, by path relative to /home/user (the working directory)"`
	FilesBase64 map[string]string `json:"files_base64,omitempty" jsonschema:"binary files to create first, as base64, by path relative to /home/user"`
	Timeout     float64           `json:"timeout,omitempty" jsonschema:"wall-clock limit in seconds"`
	Session     string            `json:"session,omitempty" jsonschema:"omit for a fresh sandbox; \"new\" to start a session that keeps variables, imports and files between calls (its id is in the result); a session id to run in that session"`
}

// NewMCP returns a Model Context Protocol server with one tool, run_python.
// Its optional session argument keeps state between calls: "new" starts a
// session of cfg.Sandbox (whose TTL and cap apply), an ID runs in one.
// Serve it with (*mcp.Server).Run over a LineTransport (on stdin and
// stdout, say), which survives bad input; the SDK's StdioTransport ends
// at the first line that does not decode.
//
// # Errors
// A nil Sandbox; a negative field (as for New, 0 takes the default).
func NewMCP(cfg MCPConfig) (*mcp.Server, error) {
	srv, _, err := newMCP(cfg)
	return srv, err
}

func newMCP(cfg MCPConfig) (*mcp.Server, *mcpServer, error) {
	if cfg.Sandbox == nil {
		return nil, nil, errors.New("server: MCPConfig.Sandbox is required")
	}
	if err := notNegative("MCPConfig", []namedValue{
		{"Concurrency", int64(cfg.Concurrency)}, {"MaxText", int64(cfg.MaxText)}, {"MaxSessionsPerClient", int64(cfg.MaxSessionsPerClient)},
		{"MemoryPerClient", cfg.MemoryPerClient}, {"KeepBytes", cfg.KeepBytes}, {"KeepRuns", int64(cfg.KeepRuns)}, {"KeepFor", int64(cfg.KeepFor)},
	}); err != nil {
		return nil, nil, err
	}
	if cfg.MaxLimits == (airlock.Limits{}) {
		cfg.MaxLimits = airlock.DefaultLimits()
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = runtime.NumCPU()
	}
	if cfg.MaxText == 0 {
		cfg.MaxText = DefaultMCPMaxText
	}
	if cfg.KeepBytes == 0 {
		cfg.KeepBytes = DefaultMCPKeepBytes
	}
	if cfg.KeepRuns == 0 {
		cfg.KeepRuns = DefaultMCPKeepRuns
	}
	if cfg.KeepFor == 0 {
		cfg.KeepFor = DefaultMCPKeepFor
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "airlock", Version: airlock.Version}, nil)
	m := &mcpServer{cfg: cfg, table: &sessions{}, store: newRunStore(cfg.KeepBytes, cfg.KeepRuns, cfg.KeepFor)}
	m.setupBudget()
	turns := make(chan struct{}, cfg.Concurrency)
	mcp.AddTool(srv, &mcp.Tool{Name: "run_python", Description: mcpDescription(cfg)},
		func(ctx context.Context, req *mcp.CallToolRequest, in RunPythonArgs) (*mcp.CallToolResult, any, error) {
			select {
			case turns <- struct{}{}:
				defer func() { <-turns }()
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return m.runPython(ctx, in, m.ownerOf(req.Session, req.Extra)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "end_session", Description: "End a run_python session (its id from the result that started it), freeing its memory; later calls with that id fail."},
		func(ctx context.Context, req *mcp.CallToolRequest, in EndSessionArgs) (*mcp.CallToolResult, any, error) {
			sess, found := m.table.removeOwnedEntry(in.Session, m.ownerOf(req.Session, req.Extra))
			if !found || sess != nil && sess.Err() != nil {
				return toolError("error: not_found: no session %q (it may have expired or ended already)", in.Session), nil, nil
			}
			if sess != nil { // nil: spilled, its file gone with the entry
				sess.Close(ctx) // waits for a running call
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("session %s ended", in.Session)}}}, nil, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "run outputs and files", URITemplate: runURIPrefix + "{run}/{+item}",
		Description: fmt.Sprintf("A run_python call's whole stdout or stderr (item stdout, stderr) or a file it wrote (item files/PATH, PATH under /), "+
			"as its result links them; kept for the last %d calls, up to %d MiB, for %s.", cfg.KeepRuns, cfg.KeepBytes>>20, cfg.KeepFor),
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return m.store.read(ctx, req, m.ownerOf(req.Session, req.Extra))
	})
	return srv, m, nil
}

// ownerOf is whose a run or session made through ss is: the client
// the request's bearer token names (extra's TokenInfo), else the MCP
// session itself, so another client (another token, or another MCP
// session over HTTP without them) cannot reach it; nil (anyone's) when
// the operator shares them.
func (m *mcpServer) ownerOf(ss *mcp.ServerSession, extra *mcp.RequestExtra) any {
	switch {
	case m.cfg.ShareAcrossClients:
		return nil
	case extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "":
		return mcpClient(extra.TokenInfo.UserID)
	case ss == nil:
		return new(byte) // no session to bind to: no one else's, and nobody's later
	}
	return ss
}

// mcpClient is an owner named by its bearer token (MCPHTTPConfig.Clients).
type mcpClient string

// ownerName names owner in a refusal: the client, or the MCP session
// that stands for one.
func ownerName(owner any) string {
	if c, ok := owner.(mcpClient); ok {
		return fmt.Sprintf("client %q", string(c))
	}
	return "this MCP session"
}

// EndSessionArgs are end_session's arguments.
type EndSessionArgs struct {
	Session string `json:"session" jsonschema:"the session id to end"`
}

type mcpServer struct {
	cfg   MCPConfig
	table *sessions
	store *runStore
}

// installs says whether, and how, code can install packages.
func installs(sb *airlock.Sandbox) string {
	ix, ok := sb.PackageIndex()
	if !ok {
		return "there is no network and no pip"
	}
	s := "there is no network, but pure-Python packages install from the host's package index: " +
		"`import airlock; airlock.install(\"name>=1.0\")` (pip install in a subprocess call, or %pip install in a session, works too), importable at once"
	if len(ix.Allow) > 0 {
		s += " (only these projects: " + strings.Join(ix.Allow, ", ") + ")"
	}
	return s
}

func mcpDescription(cfg MCPConfig) string {
	var b strings.Builder
	version := cfg.Sandbox.Info().Version
	if version == "" {
		version = "3"
	}
	packages := "no third-party package"
	if libs := cfg.Sandbox.Info().Libraries; len(libs) > 0 {
		packages = "of third-party packages only " + strings.Join(libs, ", ")
	}
	fmt.Fprintf(&b, "Run Python %s code in a fresh, isolated sandbox and return its stdout, stderr, exit code and, "+
		"if the sandbox stopped it, why (timeout, memory_limit, output_limit, fs_quota). "+
		"The standard library is available and %s; %s. "+
		"The working directory /home/user and /tmp are in memory and start empty apart from the files you pass; "+
		"nothing persists between calls unless you use a session: pass session \"new\" to start one, then its id "+
		"(printed as \"session: ID\") to run more code with the same variables, imports and files, as in a notebook; "+
		"a call that hits a limit is rolled back (rolled_back: true) and the session keeps its earlier state; "+
		"an idle session expires; end_session ends one. "+
		"Output past %d characters keeps its head and tail, and the whole is readable as a resource the text names; "+
		"images the code writes (PNG, JPEG, GIF, WebP, SVG files) come back as images, and every file written as a resource link. "+
		"Limits: %s wall clock (default %s), %d MiB of memory, %d KiB of output per stream.",
		version, packages, installs(cfg.Sandbox), cfg.MaxText, cfg.MaxLimits.Timeout, min(cfg.MaxLimits.Timeout, airlock.DefaultLimits().Timeout),
		cfg.MaxLimits.Memory>>20, cfg.MaxLimits.Output>>10)
	fns := cfg.HostFuncs
	if fns == nil {
		fns = cfg.Tools
	}
	if len(fns) > 0 {
		b.WriteString("\n\nHost functions the code can call (`import airlock`, then `airlock.tools.NAME(...)`, " +
			"keyword or positional arguments; failures raise airlock.HostError; `help(airlock.tools)` shows signatures):")
		for _, t := range fns {
			fmt.Fprintf(&b, "\n- %s: %s", t.Name(), t.Description())
		}
	}
	return b.String()
}

func (m *mcpServer) runPython(ctx context.Context, in RunPythonArgs, owner any) *mcp.CallToolResult {
	cfg := m.cfg
	timeout := min(cfg.MaxLimits.Timeout, airlock.DefaultLimits().Timeout)
	if in.Timeout > 0 {
		timeout = cfg.MaxLimits.Timeout
		if in.Timeout < timeout.Seconds() {
			// At least a millisecond: a duration that truncates to 0
			// would mean the Sandbox's default, past the maximum.
			timeout = max(time.Duration(in.Timeout*float64(time.Second)), time.Millisecond)
		}
	}
	files := make(map[string][]byte, len(in.Files)+len(in.FilesBase64))
	for p, data := range in.Files {
		files[p] = []byte(data)
	}
	for _, p := range slices.Sorted(maps.Keys(in.FilesBase64)) {
		data, err := base64.StdEncoding.DecodeString(in.FilesBase64[p])
		if err != nil {
			return toolError("error: invalid_request: files_base64[%q] is not base64 (%v); pass text files in files", p, err)
		}
		if _, dup := files[p]; dup {
			return toolError("error: invalid_request: %q is in both files and files_base64", p)
		}
		files[p] = data
	}
	limits := cfg.MaxLimits
	limits.Timeout = timeout
	req := airlock.Request{Code: in.Code, Filename: "main.py", Files: files, Limits: limits, RichOutput: true}
	if in.Session == "" {
		done, err := m.admit(ctx, owner, limits.Memory, 0)
		if err != nil {
			return toolError("%s", mcpBudgetError(err, owner))
		}
		res, _ := cfg.Sandbox.Run(ctx, req)
		done()
		return &mcp.CallToolResult{
			Content: mcpContent(res, "", cfg.MaxText, m.store, owner),
			IsError: res.Error != nil || res.ExitCode != 0,
		}
	}
	var e *sessionEntry
	var refused string
	if in.Session == "new" {
		e, refused = m.newSessionFor(ctx, owner, limits.Memory)
	} else {
		e, refused = m.claimFor(ctx, in.Session, owner, limits.Memory)
	}
	if refused != "" {
		return toolError("%s", refused)
	}
	sess := e.sess
	done, err := m.admit(ctx, owner, limits.Memory, e.held)
	if err != nil {
		m.table.unclaim(e)
		if in.Session == "new" {
			// Its id was never told: a session left behind would only
			// hold memory, and count against the client, until it expired.
			if s, _ := m.table.removeEntry(e.id); s != nil {
				s.Close(ctx)
			}
		}
		return toolError("%s", mcpBudgetError(err, owner))
	}
	res, _ := sess.Run(ctx, req)
	done()
	m.endCall(e)
	if res.Error != nil && (errors.Is(res.Error, airlock.ErrSessionClosed) || errors.Is(res.Error, airlock.ErrSessionExpired)) {
		return toolError("error: not_found: session %q has ended; pass session \"new\" to start one", in.Session)
	}
	header := fmt.Sprintf("session: %s\nrolled_back: %v\n", sess.ID(), res.RolledBack)
	return &mcp.CallToolResult{
		Content: mcpContent(res, header, cfg.MaxText, m.store, owner),
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
	if len(res.Suspicious) > 0 {
		// For the model too: an instruction it followed may have been an
		// injection, and it should say so rather than go on.
		var why []string
		for _, s := range res.Suspicious {
			why = append(why, s.Reason+" ("+s.Detail+")")
		}
		fmt.Fprintf(&b, "suspicious: %s\n", strings.Join(why, "; "))
	}
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
	for i, d := range res.Displays {
		if d.Value {
			continue // shown as the value
		}
		var forms []string
		for _, it := range d.Items {
			forms = append(forms, it.MIME)
		}
		section(fmt.Sprintf("display %d (%s)", i+1, strings.Join(forms, ", ")), []byte(d.Text()), false)
	}
	if res.DisplaysTruncated {
		b.WriteString("--- displays past the run's cap were dropped ---\n")
	}
	if res.Value != "" {
		section("value", []byte(res.Value), false)
	}
	formatNetwork(&b, res.Network)
	formatInstalls(&b, res.Installs)
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
	if res.FilesOmitted > 0 {
		fmt.Fprintf(&b, "--- %s ---\n", omittedNote(res.FilesOmitted))
	}
	return b.String()
}

// omittedNote says why a result lacks files the run made
// (airlock.Result.FilesOmitted).
func omittedNote(n int) string {
	return fmt.Sprintf("%d files not returned: their paths are longer than 4096 bytes", n)
}
