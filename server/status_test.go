package server

import (
	"context"
	"errors"
	"testing"

	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// GET /v1/status counts what /metrics counts, in JSON, behind the token.
func TestStatus(t *testing.T) {
	url, _, _ := start(t, Config{Token: "s3cret"})
	ctx := context.Background()
	var apiErr *client.APIError
	if _, err := (&client.Client{URL: url}).Status(ctx); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("status without the token: %v, want a 401", err)
	}
	c := &client.Client{URL: url, Token: "s3cret"}
	st, err := c.Status(ctx)
	if err != nil || st.Runs != 0 || st.InFlight != 0 || st.Python.SHA256 == "" {
		t.Fatalf("fresh server: %+v, %v", st, err)
	}
	for range 2 {
		if _, err := c.Run(ctx, wire.RunRequest{Code: "print(1)"}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err = c.Status(ctx); err != nil || st.Runs != 2 || st.InFlight != 0 || st.Queued != 0 {
		t.Fatalf("after two runs: %+v, %v", st, err)
	}
}
