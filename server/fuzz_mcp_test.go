package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-sandbox/airlock"
)

// FuzzMCPToolArgs calls run_python and end_session through the MCP SDK's
// client with arbitrary JSON arguments: each call ends, within its
// deadline, in a tool result (a refusal is one with IsError) or a
// JSON-RPC error, and the server goes on answering.
func FuzzMCPToolArgs(f *testing.F) {
	for _, seed := range []string{
		`{"code": "print(1)"}`, `{"code": "x", "files": {"a.txt": "hi"}, "files_base64": {"b.bin": "AAE="}, "timeout": 0.5}`,
		`{"code": "x", "files_base64": {"a": "!!"}}`, `{"code": "x", "files": {"a": "1"}, "files_base64": {"a": "AA=="}}`,
		`{"code": "v = 1", "session": "new"}`, `{"code": "v", "session": "nope"}`, `{"code": "x", "timeout": -1e308}`,
		`{"code": 1}`, `{"code": "x", "nope": true}`, `{}`, `null`, `[]`, `{"code": "x", "files": {"../../etc/passwd": "x"}}`,
	} {
		f.Add(uint8(0), []byte(seed))
	}
	f.Add(uint8(1), []byte(`{"session": "x"}`))
	f.Add(uint8(1), []byte(`{"session": 5}`))
	maxima := airlock.DefaultLimits()
	maxima.Timeout = 2 * time.Second
	srv, err := NewMCP(MCPConfig{Sandbox: sb, MaxLimits: maxima})
	if err != nil {
		f.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { cs.Close() })
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		if !json.Valid(args) {
			return // the client would not send it; the transport's own fuzzing is the SDK's
		}
		name := []string{"run_python", "end_session"}[tool%2]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("%s %s: no answer in 30 s", name, args)
		case err != nil:
			// A JSON-RPC error (invalid params, say) is an answer; a
			// closed connection is the server gone.
			if errors.Is(err, mcp.ErrConnectionClosed) || strings.Contains(err.Error(), "connection closed") {
				t.Fatalf("%s %s: %v", name, args, err)
			}
		case len(res.Content) == 0:
			t.Fatalf("%s %s: a result with no content", name, args)
		}
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("after %s %s the server does not answer: %v", name, args, err)
		}
		if name == "run_python" && err == nil && !res.IsError {
			// A session the call started is ended, so the cap is not reached.
			if text, ok := res.Content[0].(*mcp.TextContent); ok && strings.HasPrefix(text.Text, "session: ") {
				id := strings.TrimPrefix(strings.SplitN(text.Text, "\n", 2)[0], "session: ")
				cs.CallTool(ctx, &mcp.CallToolParams{Name: "end_session", Arguments: map[string]any{"session": id}})
			}
		}
	})
}

// FuzzNetworkRules sends a request's "network" rules to the server's
// check against the operator's allow-list: it answers with a policy or
// an error wrapping errNetwork, and what it answers with is within the
// operator's (narrowing it again changes nothing).
func FuzzNetworkRules(f *testing.F) {
	for _, seed := range []string{"https://api.example.com/v1/", "https://api.example.com/v1/x header:Authorization=$KEY",
		"http://127.0.0.1:8080/", "https://*.example.com/", "https://api.example.com/v1/%2e%2e/", "GET https://api.example.com/v1/",
		"", "https://", "https://api.example.com:99999/", "https://user@api.example.com/v1/"} {
		f.Add(seed, "https://api.example.com/v2/")
	}
	op, err := airlock.ParseNetworkRule("https://api.example.com/v1/", nil)
	if err != nil {
		f.Fatal(err)
	}
	s := &Server{cfg: Config{Network: &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{op}}}}
	f.Fuzz(func(t *testing.T, a, b string) {
		p, err := s.networkPolicy([]string{a, b})
		if err != nil {
			if !errors.Is(err, errNetwork) {
				t.Fatalf("%q %q: %v, want errNetwork", a, b, err)
			}
			return
		}
		again, err := p.Narrow(*s.cfg.Network)
		if err != nil || len(again.Rules) != len(p.Rules) {
			t.Fatalf("%q %q: accepted %+v, which narrows again to %+v (%v)", a, b, p, again, err)
		}
	})
}
