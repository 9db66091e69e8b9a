package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	// Retries bounds how often a 429 is retried after its Retry-After
	// (default 5; negative: never).
	Retries int
}

// Run posts req to /v1/run and returns the run's Result. An error means
// the server refused the request or could not be reached; a run the
// sandbox ended is a Result with Error set.
func (c *Client) Run(ctx context.Context, req RunRequest) (*Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	retries := c.Retries
	if retries == 0 {
		retries = 5
	}
	url := strings.TrimSuffix(c.URL, "/") + "/v1/run"
	for attempt := 0; ; attempt++ {
		hreq, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		hreq.Header.Set("Content-Type", "application/json")
		if c.Token != "" {
			hreq.Header.Set("Authorization", "Bearer "+c.Token)
		}
		resp, err := hc.Do(hreq)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusTooManyRequests && attempt < retries {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			select {
			case <-time.After(time.Duration(max(wait, 1)) * time.Second):
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var res Result
		if err := json.Unmarshal(data, &res); err == nil && (resp.StatusCode == http.StatusOK ||
			resp.StatusCode == http.StatusBadRequest && res.Files != nil) {
			return &res, nil
		}
		var eb errorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
			return nil, fmt.Errorf("server: %s (HTTP %d)", eb.Error.Message, resp.StatusCode)
		}
		return nil, errors.New("server: HTTP " + resp.Status)
	}
}
