package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClient drives airlock mcp --http, ~10 calls a second: each round connects as a new MCP
// client (a new MCP session, so the server's per-client state comes and
// goes), runs code, and makes, calls and ends an interpreter session.
func (l *load) mcpClient(ctx context.Context, url string) {
	rng := rand.New(rand.NewPCG(99, 44))
	for ctx.Err() == nil {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			l.mcpNote("connect", "", err)
			time.Sleep(time.Second)
			continue
		}
		for range 20 {
			if ctx.Err() != nil {
				break
			}
			// Paced: an agent's calls come seconds apart, and an unpaced
			// loop of 1 ms calls would take the CPU serve's load needs.
			time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
			if rng.IntN(3) > 0 {
				text, err := mcpRun(ctx, cs, map[string]any{"code": "print(6 * 7)"})
				l.mcpNote("mcp_run", text, err, "42")
				continue
			}
			text, err := mcpRun(ctx, cs, map[string]any{"session": "new", "code": "n = 41"})
			l.mcpNote("mcp_session_new", text, err, "session: ")
			id, ok := strings.CutPrefix(strings.SplitN(text, "\n", 2)[0], "session: ")
			if err != nil || !ok {
				continue
			}
			text, err = mcpRun(ctx, cs, map[string]any{"session": id, "code": "print(n + 1)"})
			l.mcpNote("mcp_session_run", text, err, "42")
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "end_session", Arguments: map[string]any{"session": id}})
			l.mcpNote("mcp_session_end", "", err)
		}
		cs.Close()
	}
}

func mcpRun(ctx context.Context, cs *mcp.ClientSession, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: args})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	if res.IsError {
		return b.String(), fmt.Errorf("tool error: %.300s", b.String())
	}
	return b.String(), nil
}

// mcpNote counts one MCP operation: memory_budget refusals are the
// server's bound (asked for); any other error, or text without want, is
// unexpected.
func (l *load) mcpNote(op, text string, err error, want ...string) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || (err != nil && strings.Contains(err.Error(), "context canceled")) {
		return // the soak ending
	}
	l.mcpOps.Add(1)
	kind := "ok"
	switch {
	case err != nil && strings.Contains(err.Error(), "error: memory_budget"):
		kind = "memory_budget"
		l.expected.Add(1)
	case err != nil:
		kind = "error"
	case len(want) > 0 && !strings.Contains(text, want[0]):
		kind = "wrong_answer"
	}
	l.mu.Lock()
	if l.kinds == nil {
		l.kinds = map[string]int{}
	}
	l.kinds[op+":"+kind]++
	l.mu.Unlock()
	if kind == "error" || kind == "wrong_answer" {
		l.unexpected.Add(1)
		log.Printf("unexpected: %s: %s: %v %.300q", op, kind, err, text)
	}
}
