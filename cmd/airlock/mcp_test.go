package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineWriter writes whole lines under a lock, so lines a test injects land
// between the client's messages, not inside one.
type lineWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineWriter) Close() error { return l.w.Close() }

// airlock mcp as a process, driven by the MCP SDK's client over its stdin
// and stdout, takes bad lines between the client's messages (not JSON,
// nested 100 000 deep, a 40 MiB line over the 32 MiB maximum) and goes on:
// the call in flight is answered, so is a later one, and the process exits
// 0 when its input ends. (Before, the first bad line made it exit 1.)
func TestMCPProcessSurvivesBadLines(t *testing.T) {
	cmd := exec.Command(os.Args[0], "mcp")
	cmd.Env = append(os.Environ(), envExecMain+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	}()
	in := &lineWriter{w: stdin}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: in}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	call := func(code string) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
		if err != nil {
			t.Fatalf("call: %v\nstderr:\n%s", err, stderr.String())
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	slow := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import time\ntime.sleep(1)\nprint('slow done')"}})
		if err != nil {
			slow <- err.Error()
			return
		}
		slow <- res.Content[0].(*mcp.TextContent).Text
	}()
	time.Sleep(300 * time.Millisecond)
	for _, line := range []string{"not json", strings.Repeat("[", 100000), strings.Repeat("y", 40<<20)} {
		if _, err := in.Write([]byte(line + "\n")); err != nil {
			t.Fatalf("inject: %v", err)
		}
	}
	select {
	case text := <-slow:
		if !strings.Contains(text, "slow done") {
			t.Fatalf("the call in flight: %s\nstderr:\n%s", text, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the call in flight was never answered\nstderr:\n%s", stderr.String())
	}
	if text := call("print(6 * 7)"); !strings.Contains(text, "42") {
		t.Fatalf("a later call: %s", text)
	}
	in.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("airlock mcp: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("airlock mcp did not exit after its input ended")
	}
	for _, want := range []string{"message refused", "bytes=41943040"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
