package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// airlock mcp --http as a process, driven by the MCP SDK's client over the
// streamable HTTP transport on loopback: a bearer token is required, the
// tools run, a written file is a resource the client reads, a session
// ends with end_session, and SIGTERM stops the process with status 0.
func TestMCPOverStreamableHTTP(t *testing.T) {
	cmd := exec.Command(os.Args[0], "mcp", "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), envExecMain+"=1", "AIRLOCK_TOKEN=s3cret")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	urlRe := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/mcp)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var endpoint string
	select {
	case endpoint = <-found:
	case <-time.After(2 * time.Minute):
		t.Fatal("airlock mcp --http never said where it listens")
	}

	// No token: 401 in the JSON envelope, before the transport.
	resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb struct{ Error struct{ Kind string } }
	if resp.StatusCode != 401 || json.Unmarshal(body, &eb) != nil || eb.Error.Kind != "unauthorized" {
		t.Fatalf("without a token: %d %s", resp.StatusCode, body)
	}

	ctx := context.Background()
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearer{"s3cret", http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
		"code": "open('out.txt', 'w').write('from the sandbox')\nx = 41", "session": "new"}})
	if err != nil || res.IsError {
		t.Fatalf("run_python: %v %+v", err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	id, _, _ := strings.Cut(strings.TrimPrefix(text, "session: "), "\n")
	var link *mcp.ResourceLink
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if link == nil {
		t.Fatalf("no file link in %+v", res.Content)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "from the sandbox" {
		t.Fatalf("read %s: %v %+v", link.URI, err, rr)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print(x + 1)", "session": id}})
	if err != nil || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "--- stdout ---\n42\n") {
		t.Fatalf("session call: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "end_session", Arguments: map[string]any{"session": id}})
	if err != nil || res.IsError {
		t.Fatalf("end_session: %v %+v", err, res)
	}
	cs.Close()

	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("still running a minute after SIGTERM")
	}
}
