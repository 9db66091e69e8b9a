package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server"
	"github.com/airlock-sandbox/airlock/server/client"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// A Server is an http.Handler: here on a test listener, answering the
// package client.
func Example() {
	ctx := context.Background()
	sb, err := airlock.New(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close(ctx)
	srv, err := server.New(server.Config{Sandbox: sb})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	c := &client.Client{URL: ts.URL}
	res, err := c.Run(ctx, wire.RunRequest{Code: "print(6 * 7)"})
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
