package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

func do(t *testing.T, method, url, token, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// wantStatus checks an answer's status and, for an error, its JSON kind.
func wantStatus(t *testing.T, r response, status int, kind string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if kind != "" && !strings.Contains(string(r.body), `"kind":"`+kind+`"`) {
		t.Fatalf("body %s lacks kind %q", r.body, kind)
	}
}

func TestSessionsHTTP(t *testing.T) {
	url, _, _ := start(t, Config{})
	ctx := context.Background()
	c := &Client{URL: url}
	id, err := c.NewSession(ctx, SessionRequest{
		Files: map[string][]byte{"in.txt": []byte("seed")}, Env: map[string]string{"GREETING": "hi"},
		Limits: RunLimits{TimeoutMS: 5000},
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(id string, req SessionRunRequest) *SessionResult {
		t.Helper()
		res, err := c.RunSession(ctx, id, req)
		if err != nil {
			t.Fatalf("run %q: %v", req.Code, err)
		}
		return res
	}
	res := run(id, SessionRunRequest{Code: "import os\ntotal = 40\nopen('notes.txt', 'w').write(open('in.txt').read())\nprint(os.environ['GREETING'])"})
	if res.Stdout != "hi\n" || res.RolledBack || len(res.Files) != 1 || string(res.Files[0].Data) != "seed" {
		t.Fatalf("first call: %+v", res)
	}
	// A call that hits its limit is rolled back and says so.
	res = run(id, SessionRunRequest{Code: "total = -1\nwhile True: pass", Limits: RunLimits{TimeoutMS: 300}})
	if res.Error == nil || res.Error.Kind != "timeout" || !res.RolledBack {
		t.Fatalf("timed-out call: %+v", res)
	}
	res = run(id, SessionRunRequest{Code: "total += 2\nprint(total, open('notes.txt').read())"})
	if res.Stdout != "42 seed\n" || res.RolledBack {
		t.Fatalf("state after the roll-back: %+v", res)
	}

	fork, err := c.ForkSession(ctx, id)
	if err != nil || fork == id {
		t.Fatalf("fork: %q, %v", fork, err)
	}
	run(fork, SessionRunRequest{Code: "total = 0"})
	if res := run(id, SessionRunRequest{Code: "print(total)"}); res.Stdout != "42\n" {
		t.Fatalf("parent after the fork changed: %+v", res)
	}
	if res := run(fork, SessionRunRequest{Code: "print(total)"}); res.Stdout != "0\n" {
		t.Fatalf("fork: %+v", res)
	}

	// The raw protocol: the JSON shape, refusals, deletion.
	r := do(t, "POST", url+"/v1/sessions/"+id+"/run", "", `{"code": "print(total)"}`)
	wantStatus(t, r, 200, "")
	if !strings.Contains(string(r.body), `"stdout":"42\n"`) || !strings.Contains(string(r.body), `"rolled_back":false`) {
		t.Fatalf("body %s", r.body)
	}
	wantStatus(t, do(t, "POST", url+"/v1/sessions/"+id+"/run", "", `{"code": "pass", "deterministic": true}`), 400, "invalid_request")
	wantStatus(t, do(t, "POST", url+"/v1/sessions/"+id+"/run", "", `{}`), 400, "invalid_request")
	wantStatus(t, do(t, "POST", url+"/v1/sessions/"+id+"/run", "", `{"code": "pass", "env": {"PYTHONHASHSEED": "1"}}`), 400, "invalid_request")
	wantStatus(t, do(t, "POST", url+"/v1/sessions", "", `{"env": {"LANG": "C"}}`), 400, "invalid_request")
	wantStatus(t, do(t, "POST", url+"/v1/sessions", "", `{"code": "x"}`), 400, "invalid_request")
	wantStatus(t, do(t, "POST", url+"/v1/sessions", "", `{"tools": ["no_such_tool"]}`), 400, "invalid_request")
	// Every field is optional, the body too.
	empty := do(t, "POST", url+"/v1/sessions", "", "")
	var made SessionInfo
	if err := json.Unmarshal(empty.body, &made); empty.status != 201 || err != nil || made.ID == "" {
		t.Fatalf("a session without a body: %d %s", empty.status, empty.body)
	}
	wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+made.ID, "", ""), 204, "")
	wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+id, "", ""), 204, "")
	for _, r := range []response{
		do(t, "POST", url+"/v1/sessions/"+id+"/run", "", `{"code": "print(1)"}`),
		do(t, "POST", url+"/v1/sessions/"+id+"/fork", "", ""),
		do(t, "DELETE", url+"/v1/sessions/"+id, "", ""),
		do(t, "POST", url+"/v1/sessions/nope/run", "", `{"code": "print(1)"}`),
	} {
		wantStatus(t, r, 404, "not_found")
	}
	var apiErr *APIError
	if _, err := c.RunSession(ctx, id, SessionRunRequest{Code: "pass"}); !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Kind != "not_found" {
		t.Fatalf("client on a deleted session: %v", err)
	}
	// The fork outlives its parent.
	if res := run(fork, SessionRunRequest{Code: "print(total + 1)"}); res.Stdout != "1\n" {
		t.Fatalf("fork after the parent's deletion: %+v %+v", res, res.Error)
	}
	if err := c.DeleteSession(ctx, fork); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsAuthAndStream(t *testing.T) {
	url, _, _ := start(t, Config{Token: "s3cret"})
	wantStatus(t, do(t, "POST", url+"/v1/sessions", "", `{}`), 401, "unauthorized")
	r := do(t, "POST", url+"/v1/sessions", "s3cret", `{}`)
	wantStatus(t, r, 201, "")
	id := strings.Split(string(r.body), `"`)[3] // {"id":"..."}
	for _, r := range []response{
		do(t, "POST", url+"/v1/sessions/"+id+"/run", "wrong", `{"code": "print(1)"}`),
		do(t, "POST", url+"/v1/sessions/"+id+"/fork", "", ""),
		do(t, "DELETE", url+"/v1/sessions/"+id, "", ""),
	} {
		wantStatus(t, r, 401, "unauthorized")
	}
	r = do(t, "POST", url+"/v1/sessions/"+id+"/run?stream=1", "s3cret", `{"code": "x = 1\nprint('streamed')\nx"}`)
	body := string(r.body)
	if r.header.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, "event: stdout\ndata: \"streamed") ||
		!strings.Contains(body, `"stdout":"streamed\n"`) ||
		!strings.Contains(body, `"rolled_back":false`) {
		t.Fatalf("stream: %s", body)
	}
	wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+id, "s3cret", ""), 204, "")
}

// The Sandbox's cap answers 429 (not retried by the client: waiting does
// not free a session) and its TTL turns an idle session into a 404.
func TestSessionsCapAndTTL(t *testing.T) {
	ctx := context.Background()
	capped, err := airlock.New(ctx, airlock.WithMaxSessions(1), airlock.WithSessionTTL(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer capped.Close(ctx)
	s, err := New(Config{Sandbox: capped, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := &Client{URL: hs.URL}
	id, err := c.NewSession(ctx, SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *APIError
	if _, err := c.NewSession(ctx, SessionRequest{}); !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.Kind != "too_many_sessions" {
		t.Fatalf("second session at a cap of one: %v", err)
	}
	if _, err := c.ForkSession(ctx, id); !errors.As(err, &apiErr) || apiErr.Status != 429 {
		t.Fatalf("fork at the cap: %v", err)
	}
	if _, err := c.RunSession(ctx, id, SessionRunRequest{Code: "v = 1"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // idle past the TTL
	if _, err := c.RunSession(ctx, id, SessionRunRequest{Code: "print(v)"}); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("expired session: %v", err)
	}
	// The expired session freed its place under the cap and in the table.
	id2, err := c.NewSession(ctx, SessionRequest{})
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if n := s.sessions.len(); n != 1 {
		t.Errorf("session table holds %d entries, want 1", n)
	}
	if err := c.DeleteSession(ctx, id2); err != nil {
		t.Fatal(err)
	}

	// MCP sessions live under the same cap.
	cs := mcpSession(t, MCPConfig{Sandbox: capped})
	text, isErr := callText(t, cs, map[string]any{"code": "v = 1", "session": "new"})
	if isErr || !strings.HasPrefix(text, "session: ") {
		t.Fatalf("first MCP session: %s", text)
	}
	text, isErr = callText(t, cs, map[string]any{"code": "v = 2", "session": "new"})
	if !isErr || !strings.Contains(text, "cannot start a session") || !strings.Contains(text, "too many live sessions") {
		t.Fatalf("MCP session past the cap: %s", text)
	}
}

// FuzzSessionBodies sends arbitrary bodies to POST /v1/sessions and to a
// session's run: never a panic or a 5xx; a created session answers 201
// with an id, a run 200 (or 400 with a result for a request the sandbox
// refused), anything else a 4xx with a JSON error.
func FuzzSessionBodies(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"files": {"a.txt": "aGk="}, "env": {"A": "b"}, "limits": {"timeout_ms": 500, "fs_bytes": 4096}, "tools": []}`,
		`{"env": {"PYTHONPATH": "/x"}}`, `{"files": {"": ""}}`, `{"code": "x"}`, `{"limits": {"memory": -1}}`, `[]`, `null`, ``,
		`{"files": {"/": "aGk="}}`, `{"env": {"AIRLOCK_SESSION": "0"}}`, `{} {}`,
	} {
		f.Add([]byte(seed), []byte(`{"code": "print(1)"}`))
	}
	f.Add([]byte(`{}`), []byte(`{"code": "x = 1", "deterministic": true}`))
	f.Add([]byte(`{}`), []byte(`{"code": "pass", "limits": {"timeout_ms": -5}}`))
	f.Add([]byte(`{}`), []byte(`{"code": "", "stdin": "!!"}`))
	s, err := New(Config{Sandbox: sb, MaxBody: 4096, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	send := func(t *testing.T, method, path string, body []byte) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(string(body))))
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: status %d %s", method, path, body, w.Code, w.Body.Bytes())
		}
		return w
	}
	f.Fuzz(func(t *testing.T, create, run []byte) {
		w := send(t, "POST", "/v1/sessions", create)
		if w.Code != http.StatusCreated {
			var e errorBody
			if w.Code < 400 || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Kind == "" {
				t.Fatalf("create %q: status %d, body %q", create, w.Code, w.Body.Bytes())
			}
			return
		}
		var info SessionInfo
		if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil || info.ID == "" {
			t.Fatalf("create %q: body %q", create, w.Body.Bytes())
		}
		defer send(t, "DELETE", "/v1/sessions/"+info.ID, nil)
		w = send(t, "POST", "/v1/sessions/"+info.ID+"/run", run)
		var res SessionResult
		if json.Unmarshal(w.Body.Bytes(), &res) == nil && res.Files != nil && (w.Code == 200 || w.Code == 400) {
			return
		}
		var e errorBody
		if w.Code < 400 || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Kind == "" {
			t.Fatalf("run %q: status %d, body %q", run, w.Code, w.Body.Bytes())
		}
	})
}

func TestSessionsUnavailable(t *testing.T) {
	ctx := context.Background()
	off, err := airlock.New(ctx, airlock.WithSnapshots(false))
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close(ctx)
	s, err := New(Config{Sandbox: off, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(`{}`)))
	if w.Code != http.StatusNotImplemented || !strings.Contains(w.Body.String(), `"kind":"sessions_unavailable"`) {
		t.Fatalf("without snapshots: %d %s", w.Code, w.Body.String())
	}
}

// A session runs one call at a time: a second call while one runs is
// refused at once, not parked on a run slot.
func TestSessionBusy(t *testing.T) {
	url, s, _ := start(t, Config{Concurrency: 2})
	r := do(t, "POST", url+"/v1/sessions", "", `{}`)
	var info SessionInfo
	if err := json.Unmarshal(r.body, &info); r.status != 201 || err != nil {
		t.Fatalf("new session: %d %s", r.status, r.body)
	}
	done := make(chan response)
	go func() {
		done <- do(t, "POST", url+"/v1/sessions/"+info.ID+"/run", "", `{"code": "import time; time.sleep(2); x = 1"}`)
	}()
	// Until the first call holds the session, a probe could take it first.
	for deadline := time.Now().Add(5 * time.Second); len(s.slots) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first call never started")
		}
	}
	wantStatus(t, do(t, "POST", url+"/v1/sessions/"+info.ID+"/run", "", `{"code": "print(2)"}`), 409, "session_busy")
	if first := <-done; first.status != 200 {
		t.Fatalf("the running call: %d %s", first.status, first.body)
	}
	wantStatus(t, do(t, "POST", url+"/v1/sessions/"+info.ID+"/run", "", `{"code": "print(x)"}`), 200, "")
	if len(s.slots) != 0 {
		t.Fatalf("%d slots left taken", len(s.slots))
	}
}

// A server's sessions end with it: a second server on the same Sandbox
// has the whole session cap, not what the first one's sessions left (nor
// their memory: an embedder making servers in turn kept each one's).
func TestSessionsEndWithTheServer(t *testing.T) {
	ctx := context.Background()
	small, err := airlock.New(ctx, airlock.WithMaxSessions(2))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close(ctx)
	for round := range 2 {
		url, s := serve(t, Config{Sandbox: small})
		c := &Client{URL: url}
		for i := range 2 {
			if _, err := c.NewSession(ctx, SessionRequest{}); err != nil {
				t.Fatalf("server %d, session %d: %v", round, i, err)
			}
		}
		s.Close()
	}
}
