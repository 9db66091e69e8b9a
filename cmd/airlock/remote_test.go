package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server"
)

// startServer serves a Sandbox on a loopback port for `run --server`.
func startServer(t *testing.T, token string) string {
	t.Helper()
	sb, err := airlock.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Sandbox: sb, Token: token, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close(); sb.Close(context.Background()) })
	return "http://" + ln.Addr().String()
}

func TestRunRemote(t *testing.T) {
	url := startServer(t, "tok")
	t.Setenv("AIRLOCK_TOKEN", "tok")
	dir := t.TempDir()
	data := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(data, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := cli(t, "", "run", "--server", url, "--file", data, "--out", out,
		"-c", "import sys; open('r.txt','w').write(open('in.txt').read()[::-1]); print('x'); print('e', file=sys.stderr); sys.exit(5)")
	if code != 5 || stdout != "x\n" || stderr != "e\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "r.txt")); string(got) != "cba" {
		t.Fatalf("--out file %q", got)
	}
	// The environment variable names the server; --json keeps its shape.
	t.Setenv("AIRLOCK_SERVER", url)
	code, stdout, _ = cli(t, "", "run", "--json", "--timeout", "300ms", "-c", "open('f','w').write('1')\nwhile True: pass")
	var res map[string]any
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitTimeout {
		t.Fatalf("exit %d, %q: %v", code, stdout, err)
	}
	if e, _ := res["error"].(map[string]any); e["kind"] != "timeout" {
		t.Fatalf("error %v", res["error"])
	}
	if strings.Contains(stdout, `"data"`) {
		t.Fatalf("--json carries file data: %s", stdout)
	}
	t.Setenv("AIRLOCK_TOKEN", "wrong")
	code, _, stderr = cli(t, "", "run", "-c", "pass")
	if code != exitAirlock || !strings.Contains(stderr, "bearer token") {
		t.Fatalf("wrong token: exit %d, %s", code, stderr)
	}
}
