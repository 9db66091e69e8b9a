package server

import (
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

// Run posts req to /v1/run and returns the run's Result. An error means
// the server refused the request or could not be reached; a run the
// sandbox ended is a Result with Error set.
func (c *Client) Run(ctx context.Context, req RunRequest) (*Result, error) {
	var res Result
	if err := c.runLike(ctx, "/v1/run", req, &res, func() bool { return res.Files != nil }); err != nil {
		return nil, err
	}
	return &res, nil
}

// NewSession starts a session on the server and returns its ID.
func (c *Client) NewSession(ctx context.Context, req SessionRequest) (string, error) {
	var info SessionInfo
	if err := c.expect(ctx, "POST", "/v1/sessions", req, http.StatusCreated, &info); err != nil {
		return "", err
	}
	return info.ID, nil
}

// RunSession runs req in session id; as Run, plus RolledBack.
func (c *Client) RunSession(ctx context.Context, id string, req SessionRunRequest) (*SessionResult, error) {
	var res SessionResult
	if err := c.runLike(ctx, "/v1/sessions/"+url.PathEscape(id)+"/run", req, &res, func() bool { return res.Files != nil }); err != nil {
		return nil, err
	}
	return &res, nil
}

// ForkSession copies session id into a new session and returns its ID.
func (c *Client) ForkSession(ctx context.Context, id string) (string, error) {
	var info SessionInfo
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
	var eb errorBody
	_ = json.Unmarshal(data, &eb)
	return &APIError{Status: status, Kind: eb.Error.Kind, Message: eb.Error.Message}
}

// do sends one request, retrying while the server answers overloaded.
func (c *Client) do(ctx context.Context, method, path string, req any) (int, []byte, error) {
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return 0, nil, err
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
			return 0, nil, err
		}
		if body != nil {
			hreq.Header.Set("Content-Type", "application/json")
		}
		if c.Token != "" {
			hreq.Header.Set("Authorization", "Bearer "+c.Token)
		}
		resp, err := hc.Do(hreq)
		if err != nil {
			return 0, nil, err
		}
		limit := c.MaxResponse
		if limit <= 0 {
			limit = 1 << 30
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		resp.Body.Close()
		if err != nil {
			return 0, nil, err
		}
		if int64(len(data)) > limit {
			return 0, nil, &APIError{Status: resp.StatusCode, Kind: "response_too_large", Message: fmt.Sprintf("the server's answer passed %d bytes", limit)}
		}
		// Only an overloaded server says when to come back; a session cap
		// does not lift by waiting a second.
		after := resp.Header.Get("Retry-After")
		if resp.StatusCode == http.StatusTooManyRequests && after != "" && attempt < retries {
			wait, _ := strconv.Atoi(after)
			select {
			case <-time.After(time.Duration(min(max(wait, 1), 30)) * time.Second):
				continue
			case <-ctx.Done():
				return 0, nil, ctx.Err()
			}
		}
		return resp.StatusCode, data, nil
	}
}
