package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The Go client streams: output reaches onOutput while the run goes on.
func TestClientStreams(t *testing.T) {
	url, _, _ := start(t, Config{Token: "tok"})
	c := &Client{URL: url, Token: "tok"}
	ctx := context.Background()
	type chunk struct {
		stream, text string
		at           time.Duration
	}
	var got []chunk
	start := time.Now()
	res, err := c.RunStream(ctx, RunRequest{Code: "import sys, time\nprint('early', flush=True)\ntime.sleep(1)\nprint('late', file=sys.stderr)"},
		func(stream string, p []byte) { got = append(got, chunk{stream, string(p), time.Since(start)}) })
	end := time.Since(start)
	if err != nil || res.Error != nil || res.Stdout != "early\n" || res.Stderr != "late\n" {
		t.Fatalf("stream: %v, %+v", err, res)
	}
	// Chunks are writes as the server flushed them: print's text and its
	// newline may come as one or as two (they do on wasmtime).
	var firstOut string
	for _, c := range got {
		if c.stream != "stdout" {
			break
		}
		firstOut += c.text
	}
	if len(got) < 2 || got[0].stream != "stdout" || firstOut != "early\n" || got[len(got)-1].stream != "stderr" {
		t.Fatalf("chunks %+v", got)
	}
	if got[0].at > end-500*time.Millisecond {
		t.Errorf("the first line came at %v of %v: not while the run went on", got[0].at, end)
	}

	id, err := c.NewSession(ctx, SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sres, err := c.RunSessionStream(ctx, id, SessionRunRequest{Code: "x = 41\nprint(x + 1)"}, func(_ string, p []byte) { out.Write(p) })
	if err != nil || sres.Stdout != "42\n" || out.String() != "42\n" || sres.RolledBack {
		t.Fatalf("session stream: %v, %+v, streamed %q", err, sres, out.String())
	}
	list, err := c.ListSessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Calls != 1 {
		t.Fatalf("ListSessions: %v, %+v", err, list)
	}

	// Refusals before the run come as errors, as from Run.
	var apiErr *APIError
	if _, err := c.RunStream(ctx, RunRequest{}, nil); !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Errorf("no code: %v", err)
	}
	if _, err := (&Client{URL: url}).RunStream(ctx, RunRequest{Code: "pass"}, nil); !errors.As(err, &apiErr) || apiErr.Kind != "unauthorized" {
		t.Errorf("no token: %v", err)
	}
	if _, err := c.RunSessionStream(ctx, "nope", SessionRunRequest{Code: "pass"}, nil); !errors.As(err, &apiErr) || apiErr.Kind != "not_found" {
		t.Errorf("unknown session: %v", err)
	}
	// A request the sandbox refuses is a result, as from Run.
	res, err = c.RunStream(ctx, RunRequest{Code: "pass", Env: map[string]string{"": "x"}}, nil)
	if err != nil || res.Error == nil || res.Error.Kind != "invalid_request" {
		t.Errorf("invalid request: %v, %+v", err, res)
	}
	// An answer past MaxResponse is cut off with a typed error.
	small := &Client{URL: url, Token: "tok", MaxResponse: 4 << 10}
	if _, err := small.RunStream(ctx, RunRequest{Code: "print('x' * 100000)"}, nil); !errors.As(err, &apiErr) || apiErr.Kind != "response_too_large" {
		t.Errorf("oversize stream: %v", err)
	}
}
