package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpHTTPClientsOf serves srv over streamable HTTP on loopback and
// connects n clients, each its own MCP session.
func mcpHTTPClientsOf(t *testing.T, srv *mcp.Server, n int) []*mcp.ClientSession {
	t.Helper()
	hs := httptest.NewServer(MCPHandler(srv, MCPHTTPConfig{}))
	t.Cleanup(hs.Close)
	var out []*mcp.ClientSession
	for range n {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		out = append(out, cs)
	}
	return out
}

// mcpCall calls run_python through cs and returns its text and IsError.
func mcpCall(t *testing.T, cs *mcp.ClientSession, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func sessionOf(t *testing.T, text string) string {
	t.Helper()
	first, _, _ := strings.Cut(text, "\n")
	id, ok := strings.CutPrefix(first, "session: ")
	if !ok {
		t.Fatalf("no session in %q", text)
	}
	return id
}

// mcpBudget is budgetMCP's memory budget; mcpBudgetCall its calls' memory
// limit, which with a session of more than 96 MiB beside it passes the
// budget.
const mcpBudget, mcpBudgetCall = 240 << 20, 144 << 20

// budgetMCP is an MCP server with the mcpBudget memory budget, spilling
// to a folder of its own (returned), its calls capped at mcpBudgetCall.
func budgetMCP(t *testing.T) (*mcp.Server, *mcpServer, string) {
	t.Helper()
	spill := t.TempDir()
	limits := airlock.DefaultLimits()
	limits.Memory = mcpBudgetCall
	srv, m, err := newMCP(MCPConfig{Sandbox: sb, MemoryBudget: mcpBudget, SpillDir: spill, MaxLimits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return srv, m, spill
}

// airlock mcp keeps its sessions within a memory budget as serve does:
// over streamable HTTP with the SDK's client, sessions holding 80 MiB
// each past a 240 MiB budget move to disk and come back with their
// state on their next call; one that, with its call's 144 MiB memory
// limit, could never fit is refused with memory_budget, not run; so is a
// run whose memory limit alone is over the budget.
func TestMCPMemoryBudget(t *testing.T) {
	srv, m, spill := budgetMCP(t)
	clients := mcpHTTPClientsOf(t, srv, 1)
	c := clients[0]
	var ids []string
	for i := range 4 { // 320 MiB without the budget
		text, isErr := mcpCall(t, c, map[string]any{"session": "new", "code": fmt.Sprintf(holdCode, fmt.Sprint("s", i))})
		if isErr {
			t.Fatalf("session %d: %s", i, text)
		}
		ids = append(ids, sessionOf(t, text))
		if held := m.table.held(); held > mcpBudget {
			t.Fatalf("after session %d the sessions hold %d bytes, over the %d budget", i, held, mcpBudget)
		}
	}
	if entries, _ := os.ReadDir(spill); len(entries) != 1 {
		t.Fatalf("spill directory holds %d entries, want its private directory", len(entries))
	}
	// Every session, spilled or not, answers with its own state.
	for i, id := range ids {
		text, isErr := mcpCall(t, c, map[string]any{"session": id, "code": "print(tag, x[4096])"})
		if isErr || !strings.Contains(text, fmt.Sprintf("s%d 1", i)) {
			t.Fatalf("session %d after spilling: %s", i, text)
		}
		if held := m.table.held(); held > mcpBudget {
			t.Fatalf("sessions hold %d bytes, over the %d budget", held, mcpBudget)
		}
	}
	// Ending a spilled session removes it, file and all.
	if _, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "end_session", Arguments: map[string]any{"session": ids[0]}}); err != nil {
		t.Fatal(err)
	}
	if text, isErr := mcpCall(t, c, map[string]any{"session": ids[0], "code": "1"}); !isErr || !strings.Contains(text, "not_found") {
		t.Fatalf("an ended session answered: %s", text)
	}
	// Over the whole budget: refused by kind on its next call.
	text, isErr := mcpCall(t, c, map[string]any{"session": "new", "code": "y = bytearray(112 << 20)\ny[::4096] = b'\\x01' * len(range(0, len(y), 4096))"})
	if isErr {
		t.Fatalf("the big session's first call: %s", text)
	}
	big := sessionOf(t, text)
	for _, id := range ids[1:] { // bring the others back, so the big one is the one moved out
		mcpCall(t, c, map[string]any{"session": id, "code": "pass"})
	}
	if text, isErr := mcpCall(t, c, map[string]any{"session": big, "code": "print(len(y))"}); !isErr || !strings.Contains(text, "error: memory_budget") {
		t.Fatalf("a session over the whole budget: %s", text)
	}
	// A run whose memory limit is over a whole (smaller) budget.
	limits := airlock.DefaultLimits()
	limits.Memory = mcpBudgetCall
	tight, _, err := newMCP(MCPConfig{Sandbox: sb, MemoryBudget: 100 << 20, SpillDir: t.TempDir(), MaxLimits: limits})
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := mcpCall(t, mcpHTTPClientsOf(t, tight, 1)[0], map[string]any{"code": "print(1)"}); !isErr || !strings.Contains(text, "error: memory_budget") {
		t.Fatalf("a run over the whole budget: %s", text)
	}
}

// One client (one MCP session over HTTP) holds at most
// MaxSessionsPerClient sessions; past it, too_many_sessions; another
// client still gets its own.
func TestMCPSessionsPerClient(t *testing.T) {
	srv, _, err := newMCP(MCPConfig{Sandbox: sb, MaxSessionsPerClient: 2, MemoryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	clients := mcpHTTPClientsOf(t, srv, 2)
	a, b := clients[0], clients[1]
	var mine []string
	for range 2 {
		text, isErr := mcpCall(t, a, map[string]any{"session": "new", "code": "pass"})
		if isErr {
			t.Fatal(text)
		}
		mine = append(mine, sessionOf(t, text))
	}
	if text, isErr := mcpCall(t, a, map[string]any{"session": "new", "code": "pass"}); !isErr || !strings.Contains(text, "error: too_many_sessions") {
		t.Fatalf("a third session for one client: %s", text)
	}
	if text, isErr := mcpCall(t, b, map[string]any{"session": "new", "code": "pass"}); isErr {
		t.Fatalf("another client's session: %s", text)
	}
	// Ending one makes room again.
	if _, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "end_session", Arguments: map[string]any{"session": mine[0]}}); err != nil {
		t.Fatal(err)
	}
	if text, isErr := mcpCall(t, a, map[string]any{"session": "new", "code": "pass"}); isErr {
		t.Fatalf("after ending one: %s", text)
	}
}

// A call that can never fit beside its spilled session is refused with
// memory_budget before the session is loaded for it, as serve's are: the
// load would only move other sessions out for a call refused anyway.
func TestMCPMemoryBudgetRefusesBeforeLoading(t *testing.T) {
	// A session holding ~112 MiB with a 144 MiB call passes 240 MiB; a
	// second session's call moves it to disk.
	srv, m, spill := budgetMCP(t)
	c := mcpHTTPClientsOf(t, srv, 1)[0]
	text, isErr := mcpCall(t, c, map[string]any{"session": "new", "code": "y = bytearray(112 << 20)\ny[::4096] = b'\\x01' * len(range(0, len(y), 4096))"})
	if isErr {
		t.Fatalf("the big session's first call: %s", text)
	}
	big := sessionOf(t, text)
	if text, isErr := mcpCall(t, c, map[string]any{"session": "new", "code": fmt.Sprintf(holdCode, "other")}); isErr {
		t.Fatalf("the second session: %s", text)
	}
	if !m.table.spilledNow(big) {
		t.Fatalf("the big session is not spilled; sessions hold %d MiB of the %d MiB budget", m.table.held()>>20, mcpBudget>>20)
	}
	files, _ := filepath.Glob(filepath.Join(spill, "*", "session-*"))
	if len(files) != 1 {
		t.Fatalf("spilled files %q, want the big session's", files)
	}
	text, isErr = mcpCall(t, c, map[string]any{"session": big, "code": "print(len(y))"})
	if !isErr || !strings.Contains(text, "error: memory_budget") || !strings.Contains(text, "more than the whole budget") {
		t.Fatalf("a call that never fits beside its spilled session: %s", text)
	}
	if !m.table.spilledNow(big) {
		t.Error("the spilled session was loaded for a call refused as never fitting")
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Errorf("the spilled session's file: %v", err)
	}
	// Still a session of its client: end_session ends it, file and all.
	if _, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "end_session", Arguments: map[string]any{"session": big}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Errorf("the ended session's file: %v", err)
	}
}
