package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withBearer sends every request with a bearer token.
type withBearer struct {
	token string
	next  http.RoundTripper
}

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpTokenServer serves srv over streamable HTTP on loopback with the
// clients a (tokenA) and b (tokenB), and returns its URL.
func mcpTokenServer(t *testing.T, srv *mcp.Server) string {
	t.Helper()
	h, err := NewMCPHandler(srv, MCPHTTPConfig{Clients: []ClientToken{{"a", tokenA}, {"b", tokenB}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// mcpConnect opens one MCP session at url with token.
func mcpConnect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withBearer{token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// With MCPHTTPConfig.Clients the bearer token names the client: a
// client's second MCP session reads the run resources of its first and
// runs in, and ends, its session; another client's find nothing ("not
// found", as for what never was), and cannot use the first's MCP
// session with its own token (403).
func TestMCPTokensNameClients(t *testing.T) {
	srv, err := NewMCP(MCPConfig{Sandbox: sb, MemoryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	url := mcpTokenServer(t, srv)
	a1, a2, b := mcpConnect(t, url, tokenA), mcpConnect(t, url, tokenA), mcpConnect(t, url, tokenB)
	o := makeOwned(t, a1)
	ctx := context.Background()

	// Another client: nothing.
	for _, uri := range []string{o.fileURI, o.stdoutURI} {
		_, err := b.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != mcp.CodeResourceNotFound {
			t.Fatalf("client b reading %s: %v, want resource not found", uri, err)
		}
	}
	if text, isErr := callText(t, b, map[string]any{"session": o.session, "code": "print(x)"}); !isErr || !strings.HasPrefix(text, "error: not_found: no session") {
		t.Fatalf("client b running in a's session: %q", text)
	}
	if res := call(t, b, "end_session", map[string]any{"session": o.session}); !res.IsError {
		t.Fatalf("client b ended a's session: %+v", res.Content[0])
	}
	// Nor through a's MCP session, named with b's token.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)"}}}`))
	req.Header.Set("Authorization", "Bearer "+tokenB)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", a1.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("client b on a's MCP session: %d %s", resp.StatusCode, body)
	}

	// The same client's other MCP session: all of it.
	if c := readResource(t, a2, o.fileURI); c.Text != "mine" {
		t.Fatalf("a's second MCP session reads %q", c.Text)
	}
	readResource(t, a2, o.stdoutURI)
	if text, isErr := callText(t, a2, map[string]any{"session": o.session, "code": "print(x + 1)"}); isErr || !strings.Contains(text, "42") {
		t.Fatalf("a's second MCP session calling its session: %q", text)
	}
	if res := call(t, a2, "end_session", map[string]any{"session": o.session}); res.IsError {
		t.Fatalf("a's second MCP session ending its session: %+v", res.Content[0])
	}
	if text, isErr := callText(t, a1, map[string]any{"session": o.session, "code": "print(x)"}); !isErr || !strings.Contains(text, "not_found") {
		t.Fatalf("a session ended from a's other MCP session answered: %q", text)
	}
}

// MaxSessionsPerClient counts all of a client's MCP sessions together:
// two MCP sessions of one client hold at most its cap between them, the
// refusal names the client and its quota (never the token) and makes no
// session, and another client still gets its own.
func TestMCPSessionCapPerTokenClient(t *testing.T) {
	srv, m, err := newMCP(MCPConfig{Sandbox: sb, MaxSessionsPerClient: 2, MemoryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	url := mcpTokenServer(t, srv)
	a1, a2, b := mcpConnect(t, url, tokenA), mcpConnect(t, url, tokenA), mcpConnect(t, url, tokenB)
	first, isErr := mcpCall(t, a1, map[string]any{"session": "new", "code": "pass"})
	if isErr {
		t.Fatal(first)
	}
	if text, isErr := mcpCall(t, a2, map[string]any{"session": "new", "code": "pass"}); isErr {
		t.Fatal(text)
	}
	text, isErr := mcpCall(t, a2, map[string]any{"session": "new", "code": "pass"})
	if !isErr || !strings.HasPrefix(text, "error: too_many_sessions: client quota exceeded: client \"a\" holds 2 sessions") ||
		!strings.Contains(text, "end_session") || strings.Contains(text, tokenA) {
		t.Fatalf("a third session for client a, from its second MCP session: %q", text)
	}
	if n := m.table.countOwned(mcpClient("a")); n != 2 {
		t.Fatalf("client a holds %d sessions after the refusal, want 2", n)
	}
	if text, isErr := mcpCall(t, b, map[string]any{"session": "new", "code": "pass"}); isErr {
		t.Fatalf("client b's session: %s", text)
	}
	// Ending one, from the other MCP session, makes room again.
	if res := call(t, a2, "end_session", map[string]any{"session": sessionOf(t, first)}); res.IsError {
		t.Fatalf("end_session: %+v", res.Content[0])
	}
	if text, isErr := mcpCall(t, a1, map[string]any{"session": "new", "code": "pass"}); isErr {
		t.Fatalf("after ending one: %s", text)
	}
}

// MemoryPerClient caps what one client's sessions hold and its calls in
// flight reserve, all of its MCP sessions together: past it, a call is
// refused client_quota, naming the client and what to do, and neither
// runs nor makes a session; another client still runs; ending a session
// makes room. While the client's own calls hold part of it, the refusal
// says to retry when they end.
func TestMCPMemoryPerTokenClient(t *testing.T) {
	// 128 MiB a call: two 80 MiB sessions and a call fit in 300 MiB,
	// three do not.
	srv, m, err := newMCP(MCPConfig{Sandbox: sb, MemoryPerClient: 300 << 20, MaxLimits: capped(), MemoryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	url := mcpTokenServer(t, srv)
	a1, a2, b := mcpConnect(t, url, tokenA), mcpConnect(t, url, tokenA), mcpConnect(t, url, tokenB)
	var ids []string
	for i, cs := range []*mcp.ClientSession{a1, a2, a1} {
		text, isErr := mcpCall(t, cs, map[string]any{"session": "new", "code": fmt.Sprintf(holdCode, fmt.Sprint("s", i))})
		if isErr {
			t.Fatalf("session %d: %s", i, text)
		}
		ids = append(ids, sessionOf(t, text))
	}
	refused := func(what string, args map[string]any) {
		t.Helper()
		for _, cs := range []*mcp.ClientSession{a1, a2} {
			text, isErr := mcpCall(t, cs, args)
			if !isErr || !strings.HasPrefix(text, "error: client_quota: client quota exceeded: client \"a\" holds") ||
				!strings.Contains(text, "end a session it no longer needs (end_session)") || strings.Contains(text, tokenA) {
				t.Fatalf("%s: %q", what, text)
			}
		}
	}
	refused("a call of a session past the quota", map[string]any{"session": ids[0], "code": "tag = 'changed'"})
	refused("a run past the quota", map[string]any{"code": "print(1)"})
	refused("a new session past the quota", map[string]any{"session": "new", "code": "print(1)"})
	if n := m.table.countOwned(mcpClient("a")); n != 3 {
		t.Fatalf("client a holds %d sessions after the refusals, want 3", n)
	}
	if text, isErr := mcpCall(t, b, map[string]any{"code": "print(1)"}); isErr || !strings.Contains(text, "--- stdout ---\n1\n") {
		t.Fatalf("client b's run: %s", text)
	}
	if res := call(t, a2, "end_session", map[string]any{"session": ids[2]}); res.IsError {
		t.Fatalf("end_session: %+v", res.Content[0])
	}
	if text, isErr := mcpCall(t, a1, map[string]any{"session": ids[0], "code": "print(tag)"}); isErr || !strings.Contains(text, "--- stdout ---\ns0\n") {
		t.Fatalf("after ending a session made room (the refused call must not have run): %s", text)
	}

	// Its own call in flight holds part: retry when it ends.
	srv, m, err = newMCP(MCPConfig{Sandbox: sb, MemoryPerClient: 200 << 20, MaxLimits: capped(), MemoryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	url = mcpTokenServer(t, srv)
	a1, a2 = mcpConnect(t, url, tokenA), mcpConnect(t, url, tokenA)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if text, isErr := mcpCall(t, a1, map[string]any{"code": "import time; time.sleep(3)"}); isErr {
			t.Errorf("the call in flight: %s", text)
		}
	}()
	defer wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; {
		m.table.mu.Lock()
		inFlight := m.table.clientRuns[mcpClient("a")]
		m.table.mu.Unlock()
		if inFlight > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if text, isErr := mcpCall(t, a2, map[string]any{"code": "print(1)"}); !isErr ||
		!strings.HasPrefix(text, "error: client_quota: client quota exceeded: client \"a\" holds 128.0 MiB") || !strings.Contains(text, "retry when its other calls end") {
		t.Fatalf("a second call beside the client's first: %q", text)
	}
}

// Clients that cannot be told apart are an error of NewMCPHandler that
// names the client, never the token; MCPHandler, which cannot return it,
// answers every request 500 with it.
func TestMCPHandlerClientsConfig(t *testing.T) {
	srv, err := NewMCP(MCPConfig{Sandbox: sb, MemoryBudget: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  MCPHTTPConfig
		want string
	}{
		{"no name", MCPHTTPConfig{Clients: []ClientToken{{"a", tokenA}, {"", tokenB}}}, "MCPHTTPConfig.Clients[1] has no name"},
		{"same name", MCPHTTPConfig{Clients: []ClientToken{{"a", tokenA}, {"a", tokenB}}}, "given twice"},
		{"default's name", MCPHTTPConfig{Token: tokenB, Clients: []ClientToken{{"default", tokenA}}}, "given twice"},
		{"same token", MCPHTTPConfig{Clients: []ClientToken{{"a", tokenA}, {"b", tokenA}}}, "same token"},
		{"white space", MCPHTTPConfig{Clients: []ClientToken{{"a", tokenA}, {"b", "two words-0123456789"}}}, `client "b"'s token holds white space`},
	} {
		_, err := NewMCPHandler(srv, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), tokenA) {
			t.Errorf("%s: %v, want an error saying %q and no token", c.name, err, c.want)
		}
		w := httptest.NewRecorder()
		MCPHandler(srv, c.cfg).ServeHTTP(w, httptest.NewRequest("POST", "/", strings.NewReader("{}")))
		if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), tokenA) {
			t.Errorf("%s: MCPHandler answered %d %s", c.name, w.Code, w.Body)
		}
	}
}

// MCPConfig.ManageGoMemoryLimit keeps the Go heap's soft limit within the
// budget as serve does: the budget at rest, less a call's memory limit
// while it runs; without it the limit is left alone.
func TestMCPManagesGoMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	debug.SetMemoryLimit(math.MaxInt64)
	const budget = 512 << 20
	if _, _, err := newMCP(MCPConfig{Sandbox: sb, MemoryBudget: budget, SpillDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("without ManageGoMemoryLimit the soft limit is %d", got)
	}
	srv, _, err := newMCP(MCPConfig{Sandbox: sb, MemoryBudget: budget, SpillDir: t.TempDir(), MaxLimits: capped(), ManageGoMemoryLimit: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != budget {
		t.Fatalf("at rest the soft limit is %d MiB, want the %d MiB budget", got>>20, budget>>20)
	}
	c := mcpHTTPClientsOf(t, srv, 1)[0]
	done := make(chan struct{})
	go func() {
		defer close(done)
		if text, isErr := mcpCall(t, c, map[string]any{"code": "import time; time.sleep(2)"}); isErr {
			t.Errorf("the call: %s", text)
		}
	}()
	want := int64(budget - capped().Memory)
	var seen int64
poll:
	for seen != want {
		select {
		case <-done:
			break poll
		case <-time.After(5 * time.Millisecond):
			seen = debug.SetMemoryLimit(-1)
		}
	}
	<-done
	if seen != want {
		t.Errorf("while a call ran the soft limit was %d MiB, want the budget less its %d MiB limit, %d MiB", seen>>20, capped().Memory>>20, want>>20)
	}
	if got := debug.SetMemoryLimit(-1); got != budget {
		t.Errorf("after the call the soft limit is %d MiB, want the %d MiB budget", got>>20, budget>>20)
	}
}
