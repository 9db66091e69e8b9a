package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const (
	tokenA = "token-of-client-a-0123456789"
	tokenB = "token-of-client-b-0123456789"
)

func newSessionAs(t *testing.T, url, token string) string {
	t.Helper()
	r := post(t, url+"/v1/sessions", token, "")
	wantStatus(t, r, http.StatusCreated, "")
	var info SessionInfo
	if err := json.Unmarshal(r.body, &info); err != nil {
		t.Fatal(err)
	}
	return info.ID
}

func listAs(t *testing.T, url, token string) []string {
	t.Helper()
	r := do(t, "GET", url+"/v1/sessions", token, "")
	wantStatus(t, r, http.StatusOK, "")
	var l SessionList
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range l.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

// With several bearer tokens, each is a client: a session belongs to the
// client that made it, and another client's call, fork, delete and
// listing find nothing (404, as for a session that is not there). The
// single Token is the client "default"; no token, or another, is 401.
func TestClientsSessionsAreTheirOwn(t *testing.T) {
	url, _, _ := start(t, Config{Token: "token-of-default-0123456789",
		Clients: []ClientToken{{"a", tokenA}, {"b", tokenB}}})
	id := newSessionAs(t, url, tokenA)
	wantStatus(t, post(t, url+"/v1/sessions/"+id+"/run", tokenA, `{"code":"n = 41"}`), http.StatusOK, "")
	for _, token := range []string{tokenB, "token-of-default-0123456789"} {
		wantStatus(t, post(t, url+"/v1/sessions/"+id+"/run", token, `{"code":"print(n)"}`), http.StatusNotFound, "not_found")
		wantStatus(t, post(t, url+"/v1/sessions/"+id+"/fork", token, ""), http.StatusNotFound, "not_found")
		wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+id, token, ""), http.StatusNotFound, "not_found")
		if ids := listAs(t, url, token); len(ids) != 0 {
			t.Fatalf("another client lists %v", ids)
		}
	}
	wantStatus(t, post(t, url+"/v1/run", "", `{"code":"print(1)"}`), http.StatusUnauthorized, "unauthorized")
	wantStatus(t, post(t, url+"/v1/run", "token-of-nobody-0123456789", `{"code":"print(1)"}`), http.StatusUnauthorized, "unauthorized")
	// Its own client still has it, intact, and may fork and delete it.
	r := post(t, url+"/v1/sessions/"+id+"/run", tokenA, `{"code":"print(n + 1)"}`)
	if res := decodeResult(t, r); res.Stdout != "42\n" {
		t.Fatalf("the owner's call: %+v", res)
	}
	if ids := listAs(t, url, tokenA); len(ids) != 1 || ids[0] != id {
		t.Fatalf("the owner lists %v", ids)
	}
	wantStatus(t, post(t, url+"/v1/sessions/"+id+"/fork", tokenA, ""), http.StatusCreated, "")
	wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+id, tokenA, ""), http.StatusNoContent, "")
	// "default" is a client like the others.
	d := newSessionAs(t, url, "token-of-default-0123456789")
	wantStatus(t, post(t, url+"/v1/sessions/"+d+"/run", tokenA, `{"code":"1"}`), http.StatusNotFound, "not_found")
}

// Each client holds at most MaxSessionsPerClient sessions (forks count);
// another client still gets its own.
func TestClientsSessionCount(t *testing.T) {
	url, _, _ := start(t, Config{Clients: []ClientToken{{"a", tokenA}, {"b", tokenB}}, MaxSessionsPerClient: 2})
	first := newSessionAs(t, url, tokenA)
	newSessionAs(t, url, tokenA)
	r := post(t, url+"/v1/sessions", tokenA, "")
	wantStatus(t, r, http.StatusTooManyRequests, "too_many_sessions")
	if !strings.Contains(string(r.body), `client \"a\" holds 2 sessions`) {
		t.Errorf("the refusal does not say whose count: %s", r.body)
	}
	wantStatus(t, post(t, url+"/v1/sessions/"+first+"/fork", tokenA, ""), http.StatusTooManyRequests, "too_many_sessions")
	newSessionAs(t, url, tokenB)
	wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+first, tokenA, ""), http.StatusNoContent, "")
	newSessionAs(t, url, tokenA)
}

// Each client's sessions and runs in flight hold at most MemoryPerClient:
// past it, its calls and runs are refused 507 client_quota (429 with
// Retry-After while its own runs hold part of it), while another client
// runs; deleting a session makes room again.
func TestClientsMemoryQuota(t *testing.T) {
	// 128 MiB a run: two 80 MiB sessions and a call fit in 300 MiB,
	// three do not.
	url, _, _ := start(t, Config{Clients: []ClientToken{{"a", tokenA}, {"b", tokenB}},
		MemoryPerClient: 300 << 20, MaxLimits: capped(), MemoryBudget: -1})
	var ids []string
	for range 3 {
		id := newSessionAs(t, url, tokenA)
		// The third: 160 MiB held, a new session and its call's 128 MiB
		// fit; filling it leaves 240 MiB held.
		r := post(t, url+"/v1/sessions/"+id+"/run", tokenA, fmt.Sprintf(`{"code":%q}`, fmt.Sprintf(holdCode, id)))
		wantStatus(t, r, http.StatusOK, "")
		ids = append(ids, id)
	}
	r := post(t, url+"/v1/sessions/"+ids[0]+"/run", tokenA, `{"code":"print(tag)"}`)
	wantStatus(t, r, http.StatusInsufficientStorage, "client_quota")
	if !strings.Contains(string(r.body), `client \"a\"`) || strings.Contains(string(r.body), tokenA) {
		t.Errorf("the refusal names the client, never its token: %s", r.body)
	}
	wantStatus(t, post(t, url+"/v1/run", tokenA, `{"code":"print(1)"}`), http.StatusInsufficientStorage, "client_quota")
	if res := decodeResult(t, post(t, url+"/v1/run", tokenB, `{"code":"print(1)"}`)); res.Stdout != "1\n" {
		t.Fatalf("another client's run: %+v", res)
	}
	wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+ids[2], tokenA, ""), http.StatusNoContent, "")
	if res := decodeResult(t, post(t, url+"/v1/sessions/"+ids[0]+"/run", tokenA, `{"code":"print(tag)"}`)); res.Stdout != ids[0]+"\n" {
		t.Fatalf("after a delete made room: %+v", res)
	}
}

// New refuses clients that cannot be told apart, and clients with a
// session store (whose sessions are not bound to them); its errors name
// clients, never tokens.
func TestClientsConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no name", Config{Clients: []ClientToken{{"", tokenA}}}, "no name"},
		{"empty token", Config{Clients: []ClientToken{{"a", ""}}}, "empty token"},
		{"same name", Config{Clients: []ClientToken{{"a", tokenA}, {"a", tokenB}}}, "given twice"},
		{"default's name", Config{Token: tokenB, Clients: []ClientToken{{"default", tokenA}}}, "given twice"},
		{"same token", Config{Clients: []ClientToken{{"a", tokenA}, {"b", tokenA}}}, "same token"},
		{"store", Config{Clients: []ClientToken{{"a", tokenA}}, SessionStore: struct{ SessionStore }{}}, "SessionStore"},
	} {
		c.cfg.Sandbox = sb
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), tokenA) {
			t.Errorf("%s: the error shows a token: %v", c.name, err)
		}
	}
}
