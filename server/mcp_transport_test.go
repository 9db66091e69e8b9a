package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawMCP serves NewMCP(cfg) over a LineTransport on pipes: send writes a
// line to the server (whole lines, so they interleave with a client's
// cleanly), lines receives every line the server writes, done its Run's
// end.
type rawMCP struct {
	mu    sync.Mutex
	in    *io.PipeWriter
	lines chan map[string]any
	done  chan error
	out   *io.PipeReader
}

func startRawMCP(t *testing.T, cfg MCPConfig, tr LineTransport) *rawMCP {
	t.Helper()
	if cfg.Sandbox == nil {
		cfg.Sandbox = sb
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tr.Reader, tr.Writer = inR, outW
	if tr.Logger == nil {
		tr.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r := &rawMCP{in: inW, lines: make(chan map[string]any, 1024), done: make(chan error, 1), out: outR}
	srv, err := NewMCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		r.done <- srv.Run(context.Background(), &tr)
		outW.Close()
	}()
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsable": sc.Text()}
			}
			r.lines <- m
		}
	}()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return r
}

func (r *rawMCP) send(t *testing.T, line string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// Write makes rawMCP the client's writer too (mcp.IOTransport).
func (r *rawMCP) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.in.Write(p)
}

func (r *rawMCP) Close() error { return r.in.Close() }

// next returns the next line the server wrote, within d.
func (r *rawMCP) next(t *testing.T, d time.Duration) map[string]any {
	t.Helper()
	select {
	case m, ok := <-r.lines:
		if !ok {
			t.Fatal("the server's output ended")
		}
		return m
	case <-time.After(d):
		t.Fatalf("no line from the server in %v", d)
	}
	return nil
}

func (r *rawMCP) initialize(t *testing.T) {
	t.Helper()
	r.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := r.next(t, 10*time.Second); m["id"] != "init" || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
}

func toolCall(id int, code string) string {
	args, _ := json.Marshal(map[string]any{"name": "run_python", "arguments": map[string]any{"code": code}})
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, args)
}

func errorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return code
}

func resultText(m map[string]any) string {
	b, _ := json.Marshal(m["result"])
	return string(b)
}

// One bad line no longer ends the MCP server: a line that is not JSON, JSON
// nested past any decoder's depth, JSON that is no JSON-RPC message, a
// batch, and a line of 24 MiB over a 1 MiB maximum each get an error
// answer (those with an id) or are dropped, while a call in flight
// finishes and is answered, and later calls work, all through the MCP
// SDK's own client. (Before, with the SDK's IOTransport, the first of them
// ended the connection: the call in flight and every later one went
// unanswered, and airlock mcp exited 1.)
func TestMCPSurvivesBadLines(t *testing.T) {
	r := startRawMCP(t, MCPConfig{}, LineTransport{MaxMessage: 1 << 20})
	// The SDK's client reads the server's lines; a tee keeps them for us.
	teeR, teeW := io.Pipe()
	var mu sync.Mutex
	var seen []map[string]any
	go func() {
		enc := json.NewEncoder(teeW)
		for m := range r.lines {
			mu.Lock()
			seen = append(seen, m)
			mu.Unlock()
			enc.Encode(m)
		}
		teeW.Close()
	}()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: teeR, Writer: r}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	slow := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import time\ntime.sleep(1.5)\nprint('slow done')"}})
		if err != nil {
			slow <- "error: " + err.Error()
			return
		}
		slow <- res.Content[0].(*mcp.TextContent).Text
	}()
	time.Sleep(300 * time.Millisecond) // the call is in flight

	huge := `{"jsonrpc":"2.0","id":904,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"` + strings.Repeat("x", 24<<20) + `"}}}`
	bad := []string{
		"not json at all",
		strings.Repeat("[", 100000),
		`{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":` + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + `}`,
		`{"jsonrpc":"2.0","id":901,"method":`,
		`{"jsonrpc":"1.0","id":902,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":903,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":{"an":"object"},"method":"ping"}`,
		"\x00\xff\xfe garbage",
		huge,
	}
	for _, line := range bad {
		r.send(t, line)
	}
	select {
	case text := <-slow:
		if !strings.Contains(text, "slow done") {
			t.Fatalf("the call in flight: %s", text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call in flight was never answered")
	}
	text, isErr := callText(t, cs, map[string]any{"code": "print(6 * 7)"})
	if isErr || !strings.Contains(text, "42") {
		t.Fatalf("a later call: %s", text)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("a later list: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	answers := map[any]float64{}
	for _, m := range seen {
		if id, ok := m["id"]; ok && m["error"] != nil {
			answers[id] = errorCode(m)
		}
	}
	for id, want := range map[any]float64{901.0: -32700, 902.0: -32600, 904.0: -32600} {
		if got, ok := answers[id]; !ok || got != want {
			t.Errorf("id %v: answered %v (code %v), want code %v", id, ok, got, want)
		}
	}
	if _, ok := answers["deep"]; !ok {
		t.Errorf("the deeply nested call got no error answer: %v", answers)
	}
	for _, m := range seen {
		if id, ok := m["id"]; ok && id == nil {
			t.Errorf("an answer with a null id (it would end the SDK's client): %v", m)
		}
	}
}

// A line over the maximum is refused without being held: a 64 MiB line
// against a 1 MiB maximum costs the reader a few MiB of allocation, and
// the next line is read as usual.
func TestMCPOversizeLineIsNotHeld(t *testing.T) {
	head := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`
	in := io.MultiReader(strings.NewReader(head), &repeatReader{b: 'x', n: 64 << 20},
		strings.NewReader("\"}}\n"+`{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n"))
	var out strings.Builder
	tr := &LineTransport{Reader: in, Writer: &out, MaxMessage: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	conn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msg, err := conn.Read(context.Background())
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if req, ok := msg.(*jsonrpc.Request); !ok || req.ID.Raw() != int64(2) {
		t.Fatalf("after the oversize line: %#v", msg)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 8<<20 {
		t.Errorf("reading past a 64 MiB line allocated %d MiB", grown>>20)
	}
	want := fmt.Sprintf(`"id":1,"error":{"code":-32600,"message":"message of %d bytes exceeds the maximum of 1048576"`, len(head)+64<<20+len(`"}}`))
	if !strings.Contains(out.String(), want) {
		t.Errorf("answer to the oversize line: %q", out.String())
	}
}

type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range k {
		p[i] = r.b
	}
	r.n -= k
	return k, nil
}

// When the input ends, the calls in flight are answered before the server
// stops (the SDK writes nothing once its transport reports the end, so
// `echo CALL | airlock mcp` would otherwise cancel the call unanswered).
func TestMCPAnswersCallsInFlightAtEOF(t *testing.T) {
	r := startRawMCP(t, MCPConfig{}, LineTransport{})
	r.initialize(t)
	r.send(t, toolCall(2, "import time\ntime.sleep(0.5)\nprint('answered after EOF')"))
	r.in.Close()
	m := r.next(t, 20*time.Second)
	if m["id"] != 2.0 || !strings.Contains(resultText(m), "answered after EOF") {
		t.Fatalf("answer: %v", m)
	}
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after the input did")
	}
}

// Calls past MaxPending unanswered ones are refused at once with their id,
// so calls waiting for a turn cannot pile up (each holds its message);
// every call is answered exactly once.
func TestMCPPendingCap(t *testing.T) {
	r := startRawMCP(t, MCPConfig{Concurrency: 1}, LineTransport{MaxPending: 2})
	r.initialize(t)
	const n = 8
	for i := range n {
		r.send(t, toolCall(100+i, "import time\ntime.sleep(0.3)\nprint('ran')"))
	}
	answers := map[float64]int{}
	ran, busy := 0, 0
	for len(answers) < n {
		m := r.next(t, 30*time.Second)
		id, _ := m["id"].(float64)
		answers[id]++
		switch {
		case errorCode(m) == codeBusy:
			busy++
		case strings.Contains(resultText(m), "ran"):
			ran++
		default:
			t.Errorf("answer: %v", m)
		}
	}
	for id, k := range answers {
		if k != 1 || id < 100 || id >= 100+n {
			t.Errorf("id %v answered %d times", id, k)
		}
	}
	if ran < 2 || busy == 0 || ran+busy != n {
		t.Fatalf("%d ran, %d refused as busy of %d", ran, busy, n)
	}
	// Once answered, calls are taken again.
	r.send(t, toolCall(200, "print('ran again')"))
	if m := r.next(t, 20*time.Second); m["id"] != 200.0 || !strings.Contains(resultText(m), "ran again") {
		t.Fatalf("after the burst: %v", m)
	}
}
