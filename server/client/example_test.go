package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// A Client sends a run and reads its result. The server here is a stand-in
// that answers every run as `airlock serve` would answer print(6 * 7).
func Example() {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req wire.RunRequest
		if r.URL.Path != "/v1/run" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"kind":"invalid_request","message":"not a run"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(wire.Result{Stdout: "42\n", Files: []wire.File{}})
	}))
	defer ts.Close()

	c := &client.Client{URL: ts.URL}
	res, err := c.Run(context.Background(), wire.RunRequest{Code: "print(6 * 7)"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Stdout)
	fmt.Println("exit", res.ExitCode)
	// Output:
	// 42
	// exit 0
}
