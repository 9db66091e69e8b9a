//go:build linux

package main

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// client is a server.Client over t's socket, one for all of t's runs so
// that they share its connection.
func (t *warmTarget) client() *client.Client {
	if t.c != nil {
		return t.c
	}
	sock := t.sock()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression: true,
	}
	t.c = &client.Client{URL: "http://airlock-warm", HTTP: &http.Client{Transport: tr}}
	return t.c
}

// warmRunner sends runs to t's server (see runner). A server that went
// away mid-run before printing anything has not served: a warm run
// reaches nothing outside the sandbox, so running it again here repeats
// nothing anyone else saw.
type warmRunner struct{ t *warmTarget }

func (w warmRunner) run(ctx context.Context, req airlock.Request, onOutput func(string, []byte)) (*wire.Result, error) {
	if !w.t.present() {
		return nil, errNotServed
	}
	var printed bool
	if onOutput != nil {
		inner := onOutput
		onOutput = func(stream string, p []byte) {
			printed = true
			inner(stream, p)
		}
	}
	res, err := sendRequest(ctx, w.t.client(), req, onOutput)
	var apiErr *client.APIError
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, errRunCancelled
	case printed, errors.As(err, &apiErr) && ranThere(apiErr):
		return nil, err
	}
	return nil, errNotServed
}

// ranThere tells whether a server's refusal may come after the run began:
// not an overloaded server's (its retries spent), nor an answer that is
// no result, where the caller had better run the code itself.
func ranThere(e *client.APIError) bool {
	return e.Kind != "bad_response" && e.Kind != "overloaded" && e.Status != http.StatusServiceUnavailable
}
