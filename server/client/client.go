// Package client talks to an Airlock server (`airlock serve`) over its
// HTTP API: runs, streamed runs and sessions, with the request and result
// types of package wire. It imports neither the sandbox nor the server, so
// a program that only sends code to a server stays small.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock/server/wire"
)

// Client sends runs to an `airlock serve` server.
type Client struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:8080.
	URL string
	// Token is sent as a bearer token when set.
	Token string
	// HTTP is the client to use (default http.DefaultClient).
	HTTP *http.Client
	// Retries bounds how often a 429 with Retry-After (an overloaded
	// server) is retried after the delay it names, at most 30 s (default
	// 5; negative: never).
	Retries int
	// MaxResponse bounds a response body, in bytes (default 1 GiB: a
	// result carries a run's output and files); past it, an *APIError of
	// kind "response_too_large".
	MaxResponse int64
}

// APIError is a request the server refused: Status is the HTTP status,
// Kind and Message its error body ("not_found" for an unknown session,
// "too_many_sessions" at the session cap).
type APIError struct {
	Status        int
	Kind, Message string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("server: HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("server: %s (HTTP %d)", e.Message, e.Status)
}

// Run posts req to /v1/run and returns the run's [wire.Result]. An error means
// the server refused the request or could not be reached; a run the
// sandbox ended is a [wire.Result] with Error set.
func (c *Client) Run(ctx context.Context, req wire.RunRequest) (*wire.Result, error) {
	var res wire.Result
	if err := c.runLike(ctx, "/v1/run", req, &res, func() bool { return res.Files != nil }); err != nil {
		return nil, err
	}
	return &res, nil
}

// NewSession starts a session on the server and returns its ID.
func (c *Client) NewSession(ctx context.Context, req wire.SessionRequest) (string, error) {
	var info wire.SessionInfo
	if err := c.expect(ctx, "POST", "/v1/sessions", req, http.StatusCreated, &info); err != nil {
		return "", err
	}
	return info.ID, nil
}

// RunSession runs req in session id; as Run, plus RolledBack.
func (c *Client) RunSession(ctx context.Context, id string, req wire.SessionRunRequest) (*wire.SessionResult, error) {
	var res wire.SessionResult
	if err := c.runLike(ctx, "/v1/sessions/"+url.PathEscape(id)+"/run", req, &res, func() bool { return res.Files != nil }); err != nil {
		return nil, err
	}
	return &res, nil
}

// RunStream is Run with the output as it is written: onOutput gets each
// chunk of "stdout" or "stderr" while the run goes on (the server's
// ?stream=1), then the [wire.Result] comes as from Run. onOutput runs on the
// calling goroutine.
func (c *Client) RunStream(ctx context.Context, req wire.RunRequest, onOutput func(stream string, p []byte)) (*wire.Result, error) {
	var res wire.Result
	if err := c.stream(ctx, "/v1/run?stream=1", req, &res, func() bool { return res.Files != nil }, onOutput); err != nil {
		return nil, err
	}
	return &res, nil
}

// RunSessionStream is RunSession with the output as RunStream gives it.
func (c *Client) RunSessionStream(ctx context.Context, id string, req wire.SessionRunRequest, onOutput func(stream string, p []byte)) (*wire.SessionResult, error) {
	var res wire.SessionResult
	if err := c.stream(ctx, "/v1/sessions/"+url.PathEscape(id)+"/run?stream=1", req, &res, func() bool { return res.Files != nil }, onOutput); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListSessions returns the server's live sessions, oldest first.
func (c *Client) ListSessions(ctx context.Context) ([]wire.SessionStatus, error) {
	var list wire.SessionList
	if err := c.expect(ctx, "GET", "/v1/sessions", nil, http.StatusOK, &list); err != nil {
		return nil, err
	}
	return list.Sessions, nil
}

// stream posts a run asking for server-sent events and reads them: output
// events to onOutput, the result event into res. A refusal before the
// run (not an event stream) is handled as runLike does. The whole answer
// counts against MaxResponse.
func (c *Client) stream(ctx context.Context, path string, req, res any, isResult func() bool, onOutput func(string, []byte)) error {
	resp, err := c.send(ctx, "POST", path, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		data, err := c.readAll(resp)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, res); err == nil && resp.StatusCode == http.StatusBadRequest && isResult() {
			return nil
		}
		if resp.StatusCode == http.StatusOK {
			return &APIError{Status: resp.StatusCode, Kind: "bad_response", Message: "the server's answer is neither events nor an error"}
		}
		return apiError(resp.StatusCode, data)
	}
	limit := c.limit()
	lr := &io.LimitedReader{R: resp.Body, N: limit + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 64<<10), int(min(limit+1, 1<<30)))
	bad := func(msg string) error {
		return &APIError{Status: resp.StatusCode, Kind: "bad_response", Message: "the server's event stream: " + msg}
	}
	event := ""
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: ")...)
		case line == "" && event != "":
			switch event {
			case "stdout", "stderr":
				var chunk string
				if err := json.Unmarshal(data, &chunk); err != nil {
					return bad(event + " data is not a JSON string")
				}
				if onOutput != nil {
					onOutput(event, []byte(chunk))
				}
			case "result":
				if err := json.Unmarshal(data, res); err != nil || !isResult() {
					return bad("the result event is not a run's result")
				}
				return nil
			}
			event, data = "", data[:0]
		}
	}
	if lr.N <= 0 {
		return &APIError{Status: resp.StatusCode, Kind: "response_too_large", Message: fmt.Sprintf("the server's answer passed %d bytes", limit)}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("server: event stream: %w", err)
	}
	return bad("it ended without a result")
}

// Status returns the server's counts: runs answered, running, waiting,
// and live sessions.
func (c *Client) Status(ctx context.Context) (*wire.Status, error) {
	var st wire.Status
	if err := c.expect(ctx, "GET", "/v1/status", nil, http.StatusOK, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// ForkSession copies session id into a new session and returns its ID.
func (c *Client) ForkSession(ctx context.Context, id string) (string, error) {
	var info wire.SessionInfo
	if err := c.expect(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/fork", nil, http.StatusCreated, &info); err != nil {
		return "", err
	}
	return info.ID, nil
}

// DeleteSession ends session id.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.expect(ctx, "DELETE", "/v1/sessions/"+url.PathEscape(id), nil, http.StatusNoContent, nil)
}

// runLike posts a run and decodes its result, which comes with 200, or
// with 400 for a request the sandbox refused (isResult tells a result
// from an error body then).
func (c *Client) runLike(ctx context.Context, path string, req, res any, isResult func() bool) error {
	status, data, err := c.do(ctx, "POST", path, req)
	if err != nil {
		return err
	}
	// Any JSON object decodes into a result; one without "files" (null,
	// {}) is not one, whatever the status says.
	if err := json.Unmarshal(data, res); err == nil && (status == http.StatusOK || status == http.StatusBadRequest) && isResult() {
		return nil
	}
	if status == http.StatusOK {
		return &APIError{Status: status, Kind: "bad_response", Message: "the server's answer is not a run's result"}
	}
	return apiError(status, data)
}

func (c *Client) expect(ctx context.Context, method, path string, req any, want int, res any) error {
	status, data, err := c.do(ctx, method, path, req)
	if err != nil {
		return err
	}
	if status != want {
		return apiError(status, data)
	}
	if res != nil {
		if err := json.Unmarshal(data, res); err != nil {
			return fmt.Errorf("server: bad response: %w", err)
		}
	}
	return nil
}

func apiError(status int, data []byte) error {
	var eb wire.ErrorBody
	_ = json.Unmarshal(data, &eb)
	return &APIError{Status: status, Kind: eb.Error.Kind, Message: eb.Error.Message}
}

// do sends one request, retrying while the server answers overloaded,
// and reads the answer whole.
func (c *Client) do(ctx context.Context, method, path string, req any) (int, []byte, error) {
	resp, err := c.send(ctx, method, path, req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := c.readAll(resp)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

func (c *Client) limit() int64 {
	if c.MaxResponse <= 0 {
		return 1 << 30
	}
	return c.MaxResponse
}

func (c *Client) readAll(resp *http.Response) ([]byte, error) {
	limit := c.limit()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &APIError{Status: resp.StatusCode, Kind: "response_too_large", Message: fmt.Sprintf("the server's answer passed %d bytes", limit)}
	}
	return data, nil
}

// send sends one request, retrying while the server answers overloaded;
// the caller closes the answer's body.
func (c *Client) send(ctx context.Context, method, path string, req any) (*http.Response, error) {
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return nil, err
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	retries := c.Retries
	if retries == 0 {
		retries = 5
	}
	u := strings.TrimSuffix(c.URL, "/") + path
	for attempt := 0; ; attempt++ {
		hreq, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body != nil {
			hreq.Header.Set("Content-Type", "application/json")
		}
		if c.Token != "" {
			hreq.Header.Set("Authorization", "Bearer "+c.Token)
		}
		resp, err := hc.Do(hreq)
		if err != nil {
			return nil, err
		}
		// Only an overloaded server says when to come back; a session cap
		// does not lift by waiting a second.
		after := resp.Header.Get("Retry-After")
		if resp.StatusCode == http.StatusTooManyRequests && after != "" && attempt < retries {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			wait, _ := strconv.Atoi(after)
			select {
			case <-time.After(time.Duration(min(max(wait, 1), 30)) * time.Second):
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return resp, nil
	}
}
