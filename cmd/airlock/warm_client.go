//go:build linux

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

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

// run sends req to t's server and reports the result as a local run
// would; served is false when no server took it and nothing was printed,
// so the caller runs it itself. A server that went away mid-run counts as
// not served: a warm run reaches nothing outside the sandbox, so running
// it again here repeats nothing anyone else saw.
func (t *warmTarget) run(ctx context.Context, req airlock.Request, outDir string, asJSON bool, stdout, stderr io.Writer) (code int, served bool, err error) {
	if !t.present() {
		return 0, false, nil
	}
	var printed bool
	onOutput := func(stream string, p []byte) {
		printed = true
		streamTo(stdout, stderr)(stream, p)
	}
	code, err = sendRun(ctx, t.client(), req, outDir, asJSON, onOutput, stdout, stderr)
	var apiErr *client.APIError
	switch {
	case err == nil:
		return code, true, nil
	case ctx.Err() != nil:
		// Interrupted: as a run in this process reports it (the server
		// ends the run when its client goes).
		return exitTimeout, true, errors.New("timeout: the run was cancelled")
	case printed, errors.As(err, &apiErr) && ranThere(apiErr):
		return code, true, err
	}
	return 0, false, nil
}

// ranThere tells whether a server's refusal may come after the run began:
// not an overloaded server's (its retries spent), nor an answer that is
// no result, where the caller had better run the code itself.
func ranThere(e *client.APIError) bool {
	return e.Kind != "bad_response" && e.Kind != "overloaded" && e.Status != http.StatusServiceUnavailable
}

// runRequest runs req on t's server for a command that reads the result
// rather than printing it as it comes (airlock test); served as for run.
func (t *warmTarget) runRequest(ctx context.Context, req airlock.Request) (res *airlock.Result, served bool) {
	if !t.present() {
		return nil, false
	}
	out, err := t.client().Run(ctx, apiRequest(req))
	var apiErr *client.APIError
	switch {
	case err == nil:
		return fromResult(out), true
	case ctx.Err() != nil:
		return &airlock.Result{ExitCode: -1, Error: &airlock.Error{Kind: airlock.KindTimeout, Message: "the run was cancelled"}}, true
	case errors.As(err, &apiErr) && ranThere(apiErr):
		return &airlock.Result{ExitCode: -1, Error: &airlock.Error{Kind: airlock.Kind(apiErr.Kind), Message: apiErr.Message}}, true
	}
	return nil, false
}

// fromResult is the part of an airlock.Result that the API's Result
// carries.
func fromResult(r *wire.Result) *airlock.Result {
	res := &airlock.Result{ExitCode: r.ExitCode, Stdout: []byte(r.Stdout), Stderr: []byte(r.Stderr),
		Duration: time.Duration(r.DurationMS * float64(time.Millisecond))}
	if r.Error != nil {
		res.Error = &airlock.Error{Kind: airlock.Kind(r.Error.Kind), Message: r.Error.Message}
	}
	for _, f := range r.Files {
		res.Files = append(res.Files, airlock.File{Path: f.Path, Size: f.Size, Data: f.Data})
	}
	return res
}
