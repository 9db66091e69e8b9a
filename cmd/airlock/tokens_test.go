package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// airlock serve --tokens-file: each line's token is a client whose
// sessions are its own; the log names the clients, never a token; a
// malformed file stops serve as a usage error that shows no token.
func TestServeTokensFile(t *testing.T) {
	const (
		tokA = "alpha-token-0123456789abcdef"
		tokB = "bravo-token-0123456789abcdef"
	)
	file := writeFile(t, "# clients\nalpha "+tokA+"\n\nbravo "+tokB+"\n")
	url, _, logs := startServe(t, nil, "--tokens-file", file, "--drain-timeout", "5s")
	ctx := context.Background()
	a, b := &client.Client{URL: url, Token: tokA}, &client.Client{URL: url, Token: tokB}
	id, err := a.NewSession(ctx, wire.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RunSession(ctx, id, wire.SessionRunRequest{Code: "n = 1"}); err != nil {
		t.Fatal(err)
	}
	var apiErr *client.APIError
	if _, err := b.RunSession(ctx, id, wire.SessionRunRequest{Code: "print(n)"}); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("another client's call of the session: %v", err)
	}
	if _, err := (&client.Client{URL: url}).Run(ctx, wire.RunRequest{Code: "1"}); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("a run without a token: %v", err)
	}
	log := logs.String()
	if !strings.Contains(log, "alpha") || !strings.Contains(log, "bravo") {
		t.Errorf("the log does not name the clients: %s", log)
	}
	if strings.Contains(log, tokA) || strings.Contains(log, tokB) {
		t.Errorf("the log shows a token: %s", log)
	}
	for _, c := range []struct{ content, want string }{
		{"alpha " + tokA + " extra\n", "want NAME TOKEN"},
		{"alpha short-secret\n", "shorter than 16"},
		{"alpha " + tokA + "\nalpha " + tokB + "\n", "given twice"},
		{"# nobody\n", "no clients"},
	} {
		bad := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--tokens-file", writeFile(t, c.content))
		bad.Env = append(os.Environ(), envExecMain+"=1", "AIRLOCK_TOKEN=")
		out, err := bad.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(out), c.want) {
			t.Errorf("tokens file %q: %v\n%s", c.content, err, out)
		}
		if strings.Contains(string(out), "short-secret") || strings.Contains(string(out), tokB) {
			t.Errorf("tokens file %q: the error shows a token: %s", c.content, out)
		}
	}
}
