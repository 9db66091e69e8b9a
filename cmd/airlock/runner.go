package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server"
	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// A runner runs one request where a command sends it: in this process
// (localRunner), on an `airlock serve` (remoteRunner) or on this user's
// warm server (warmRunner, warm_client.go). Each answers with the API's
// result, file data included, so run and test read every result the same
// way wherever it ran.
type runner interface {
	// run runs req; onOutput, when not nil, gets the output as the code
	// writes it (then the result's output is not printed again). An error
	// is a run that did not happen or whose answer was lost: errNotServed
	// when nothing ran and nothing was printed, so the caller may run req
	// elsewhere; errRunCancelled when ctx ended while a server ran it.
	run(ctx context.Context, req airlock.Request, onOutput func(stream string, p []byte)) (*wire.Result, error)
}

var (
	// errNotServed: the runner took nothing (no warm server, or one that
	// went away before it printed anything).
	errNotServed = errors.New("not served")
	// errRunCancelled: interrupted while a server ran the code; the
	// server ends the run when its client goes.
	errRunCancelled = errors.New("timeout: the run was cancelled")
)

// localRunner runs in this process, on a Sandbox made on first need.
type localRunner struct {
	open func() (*airlock.Sandbox, error)
	sb   *airlock.Sandbox
}

func (l *localRunner) run(ctx context.Context, req airlock.Request, onOutput func(string, []byte)) (*wire.Result, error) {
	if err := l.load(); err != nil {
		return nil, err
	}
	req.OnOutput = onOutput
	res, _ := l.sb.Run(ctx, req) // the error is res.Error, which the result carries
	out := server.NewResult(res, server.PythonOf(l.sb), true)
	return &out, nil
}

// load makes the Sandbox now, if it is not made yet.
func (l *localRunner) load() error {
	if l.sb != nil {
		return nil
	}
	sb, err := l.open()
	if err != nil {
		return err
	}
	l.sb = sb
	return nil
}

// opened tells whether the Sandbox was made.
func (l *localRunner) opened() bool { return l.sb != nil }

func (l *localRunner) close() {
	if l.sb != nil {
		l.sb.Close(context.Background())
	}
}

// remoteRunner sends runs to an `airlock serve`.
type remoteRunner struct{ c *client.Client }

func newRemoteRunner(url string) remoteRunner {
	return remoteRunner{&client.Client{URL: url, Token: os.Getenv("AIRLOCK_TOKEN")}}
}

func (r remoteRunner) run(ctx context.Context, req airlock.Request, onOutput func(string, []byte)) (*wire.Result, error) {
	return sendRequest(ctx, r.c, req, onOutput)
}

// sendRequest sends req through c, streamed when onOutput is set.
func sendRequest(ctx context.Context, c *client.Client, req airlock.Request, onOutput func(string, []byte)) (*wire.Result, error) {
	if onOutput == nil {
		return c.Run(ctx, apiRequest(req))
	}
	return c.RunStream(ctx, apiRequest(req), onOutput)
}

// apiRequest is req as the HTTP API takes it.
func apiRequest(req airlock.Request) wire.RunRequest {
	rich := req.RichOutput
	return wire.RunRequest{
		Code: req.Code, Filename: req.Filename, Files: req.Files, Stdin: req.Stdin, Env: req.Env,
		Limits: server.FromLimits(req.Limits), Deterministic: req.Deterministic, Seed: req.Seed,
		RichOutput: &rich,
		Network:    remoteRules(req.Network),
	}
}

// runFirst runs req on the first of runners that serves it.
func runFirst(ctx context.Context, runners []runner, req airlock.Request, onOutput func(string, []byte)) (*wire.Result, error) {
	for _, r := range runners {
		res, err := r.run(ctx, req, onOutput)
		if !errors.Is(err, errNotServed) {
			return res, err
		}
	}
	return nil, errNotServed
}

// streamOrNil is streamTo(stdout, stderr), or nil for --json, which
// prints the output inside its one object.
func streamOrNil(asJSON bool, stdout, stderr io.Writer) func(string, []byte) {
	if asJSON {
		return nil
	}
	return streamTo(stdout, stderr)
}

// fromResult is the part of an airlock.Result that the API's Result
// carries.
func fromResult(r *wire.Result) *airlock.Result {
	res := &airlock.Result{ExitCode: r.ExitCode, Stdout: []byte(r.Stdout), Stderr: []byte(r.Stderr),
		Duration: wire.Duration(r.DurationMS)}
	if r.Error != nil {
		res.Error = &airlock.Error{Kind: airlock.Kind(r.Error.Kind), Message: r.Error.Message}
	}
	for _, f := range r.Files {
		res.Files = append(res.Files, airlock.File{Path: f.Path, Size: f.Size, Data: f.Data})
	}
	return res
}
