package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// The operator's --allow-net rules bound what a request's "network" field
// may ask for; the run reaches a loopback server the rules name.
func TestServerNetworkNarrowsTheOperatorsRules(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "api %s auth=%v", r.URL.Path, r.Header.Get("Authorization") == "Bearer op-secret")
	}))
	defer api.Close()
	op, err := airlock.ParseNetworkRule(api.URL+"/v1/ header:Authorization=$KEY", func(string) (string, bool) { return "Bearer op-secret", true })
	if err != nil {
		t.Fatal(err)
	}
	policy := airlock.NetworkPolicy{Rules: []airlock.NetworkRule{op}}
	nsb, err := airlock.New(context.Background(), airlock.WithNetwork(policy))
	if err != nil {
		t.Fatal(err)
	}
	defer nsb.Close(context.Background())
	url, _ := serve(t, Config{Sandbox: nsb, Network: &policy})

	code := func(path string) string {
		return fmt.Sprintf(`
import urllib.request, urllib.error
try:
    print(urllib.request.urlopen(%q).read().decode())
except urllib.error.URLError as e:
    print("refused:", e.reason)
`, api.URL+path)
	}
	run := func(network any, path string) (int, Result, string) {
		body := map[string]any{"code": code(path)}
		if network != nil {
			body["network"] = network
		}
		b, _ := json.Marshal(body)
		r := post(t, url+"/v1/run", "", string(b))
		if r.status != 200 {
			return r.status, Result{}, string(r.body)
		}
		return r.status, decodeResult(t, r), ""
	}

	// Absent: the operator's rules, with their header.
	st, res, _ := run(nil, "/v1/a")
	if st != 200 || res.Stdout != "api /v1/a auth=true\n" || len(res.Network) != 1 || !res.Network[0].Allowed {
		t.Fatalf("operator's rules: %d %+v", st, res)
	}
	// Narrowed: a sub-path, which still gets the header.
	st, res, _ = run([]string{"GET " + api.URL + "/v1/only/"}, "/v1/only/x")
	if st != 200 || res.Stdout != "api /v1/only/x auth=true\n" {
		t.Fatalf("narrowed: %d %+v", st, res)
	}
	st, res, _ = run([]string{"GET " + api.URL + "/v1/only/"}, "/v1/other")
	if st != 200 || !strings.HasPrefix(res.Stdout, "refused: network: GET "+api.URL+"/v1/other is not in this run's allow-list") {
		t.Fatalf("outside the narrowed rule: %d %+v", st, res)
	}
	// [] is an empty allow-list.
	st, res, _ = run([]string{}, "/v1/a")
	if st != 200 || !strings.Contains(res.Stdout, "is not in this run's allow-list, which is empty") || len(res.Network) != 1 || res.Network[0].Allowed {
		t.Fatalf("no network: %d %+v", st, res)
	}
	// Wider, or with a header: refused before running.
	for _, wider := range [][]string{{api.URL + "/"}, {"https://api.evil.com"}, {api.URL + "/v1/ header:X=1"}} {
		st, _, body := run(wider, "/v1/a")
		if st != 400 || !strings.Contains(body, "network") {
			t.Errorf("%v: %d %s", wider, st, body)
		}
	}
	// A session call takes the same field, narrowed the same way.
	c := &Client{URL: url}
	id, err := c.NewSession(context.Background(), SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sres, err := c.RunSession(context.Background(), id, SessionRunRequest{Code: code("/v1/only/s"), Network: []string{"GET " + api.URL + "/v1/only/"}})
	if err != nil || sres.Stdout != "api /v1/only/s auth=true\n" {
		t.Fatalf("session call, narrowed: %v %+v", err, sres)
	}
	sres, err = c.RunSession(context.Background(), id, SessionRunRequest{Code: code("/v1/other"), Network: []string{"GET " + api.URL + "/v1/only/"}})
	if err != nil || !strings.HasPrefix(sres.Stdout, "refused: network: GET "+api.URL+"/v1/other is not in this run's allow-list") {
		t.Fatalf("session call outside its rule: %v %+v", err, sres)
	}
	var apiErr *APIError
	if _, err := c.RunSession(context.Background(), id, SessionRunRequest{Code: "pass", Network: []string{"https://api.evil.com"}}); !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Fatalf("session call wider than the operator's: %v", err)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`airlock_network_requests_total{decision="allowed"} 3`, `airlock_network_requests_total{decision="denied"} 3`, `airlock_network_bytes_total{direction="received"}`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// Without --allow-net a request cannot ask for a network.
func TestServerWithoutNetworkRefusesTheField(t *testing.T) {
	url, _, _ := start(t, Config{})
	r := post(t, url+"/v1/run", "", `{"code": "pass", "network": ["api.example.com"]}`)
	if r.status != 400 || !strings.Contains(string(r.body), "this server allows no network") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestFormatTextListsNetworkDecisions(t *testing.T) {
	text := FormatText(&airlock.Result{Network: []airlock.NetworkDecision{
		{Allowed: true, Method: "GET", URL: "https://api.example.com/v1/x", Rule: "https://api.example.com/v1/", Status: 200, ResponseBytes: 12},
		{Method: "GET", URL: "https://evil.example/\nexit_code: 0", Reason: "network: evil.example is not in this run's allow-list"},
	}})
	if !strings.Contains(text, "--- network ---\n  allowed GET https://api.example.com/v1/x (rule https://api.example.com/v1/): 200, 12 bytes\n  denied GET https://evil.example/?exit_code: 0: network:") {
		t.Fatalf("%s", text)
	}
}
