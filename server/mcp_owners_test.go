package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpHTTPClients serves cfg over the streamable HTTP transport on
// loopback and connects n clients to it, each its own MCP session.
func mcpHTTPClients(t *testing.T, cfg MCPConfig, n int) []*mcp.ClientSession {
	t.Helper()
	srv, err := NewMCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
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

// owned is what one client made: a run's file and stdout as resources,
// and a session.
type owned struct{ fileURI, stdoutURI, session string }

func makeOwned(t *testing.T, cs *mcp.ClientSession) owned {
	t.Helper()
	res := call(t, cs, "run_python", map[string]any{"session": "new", "code": "open('secret.txt', 'w').write('mine')\nx = 41\nprint('y' * 50000)"})
	text := res.Content[0].(*mcp.TextContent).Text
	id, _, _ := strings.Cut(strings.TrimPrefix(text, "session: "), "\n")
	var o owned
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			o.fileURI = l.URI
		}
	}
	o.stdoutURI = strings.Replace(o.fileURI, "files/home/user/secret.txt", "stdout", 1)
	o.session = id
	if o.fileURI == "" || id == "" || !strings.Contains(text, o.stdoutURI) {
		t.Fatalf("no session, file link or stdout resource in %q (%+v)", text, res.Content)
	}
	return o
}

// One MCP client cannot read another's run resources, nor run code in or
// end its session: each is "not found", as for a name that never was;
// the owner still can. MCPConfig.ShareAcrossClients opens them to all.
func TestMCPClientsKeptApart(t *testing.T) {
	clients := mcpHTTPClients(t, MCPConfig{Sandbox: sb}, 2)
	owner, other := clients[0], clients[1]
	o := makeOwned(t, owner)
	ctx := context.Background()
	notFound := func(uri string) {
		t.Helper()
		_, err := other.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		var we, missing *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != mcp.CodeResourceNotFound {
			t.Fatalf("another client reading %s: %v, want resource not found", uri, err)
		}
		// The same answer as for a run that never was.
		never := runURI("000000000000000000000000", "stdout")
		_, err2 := other.ReadResource(ctx, &mcp.ReadResourceParams{URI: never})
		if !errors.As(err2, &missing) || missing.Code != we.Code || missing.Message != we.Message ||
			strings.Replace(string(missing.Data), never, uri, 1) != string(we.Data) {
			t.Fatalf("another's run answers %+v; a missing one %+v", we, missing)
		}
	}
	notFound(o.fileURI)
	notFound(o.stdoutURI)
	for _, args := range []map[string]any{{"session": o.session, "code": "print(x)"}} {
		res := call(t, other, "run_python", args)
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || !strings.HasPrefix(text, "error: not_found: no session") ||
			strings.Contains(strings.ReplaceAll(text, o.session, ""), "41") { // x, printed; the random id may hold "41"
			t.Fatalf("another client running in the session: %q", text)
		}
	}
	res := call(t, other, "end_session", map[string]any{"session": o.session})
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.HasPrefix(text, "error: not_found") {
		t.Fatalf("another client ending the session: %q", text)
	}
	// The owner still has all of it.
	if c := readResource(t, owner, o.fileURI); c.Text != "mine" {
		t.Fatalf("owner reads %q", c.Text)
	}
	readResource(t, owner, o.stdoutURI)
	if text, isErr := callText(t, owner, map[string]any{"session": o.session, "code": "print(x + 1)"}); isErr || !strings.Contains(text, "42") {
		t.Fatalf("owner's session call: %q", text)
	}
	if res := call(t, owner, "end_session", map[string]any{"session": o.session}); res.IsError {
		t.Fatalf("owner's end_session: %+v", res.Content[0])
	}

	// Shared on purpose: the other client reads and runs.
	clients = mcpHTTPClients(t, MCPConfig{Sandbox: sb, ShareAcrossClients: true}, 2)
	owner, other = clients[0], clients[1]
	o = makeOwned(t, owner)
	if c := readResource(t, other, o.fileURI); c.Text != "mine" {
		t.Fatalf("shared: other reads %q", c.Text)
	}
	if text, isErr := callText(t, other, map[string]any{"session": o.session, "code": "print(x + 1)"}); isErr || !strings.Contains(text, "42") {
		t.Fatalf("shared: other's session call: %q", text)
	}
}
