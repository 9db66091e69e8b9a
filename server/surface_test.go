package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every answer that is an error is the JSON envelope, the mux's own 404
// and 405 included.
func TestEveryErrorIsJSON(t *testing.T) {
	url, _, _ := start(t, Config{})
	cases := []struct {
		method, path string
		status       int
		kind, allow  string
	}{
		{"GET", "/nope", 404, "not_found", ""},
		{"POST", "/v1/sessions/x/nothing", 404, "not_found", ""},
		{"GET", "/v1/run", 405, "method_not_allowed", "POST"},
		{"PUT", "/v1/sessions", 405, "method_not_allowed", "GET, HEAD, POST"},
	}
	for _, tc := range cases {
		r := do(t, tc.method, url+tc.path, "", "")
		var eb errorBody
		if err := json.Unmarshal(r.body, &eb); err != nil || r.status != tc.status || eb.Error.Kind != tc.kind {
			t.Errorf("%s %s: %d %q (%v); want %d with kind %q", tc.method, tc.path, r.status, r.body, err, tc.status, tc.kind)
			continue
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, ct)
		}
		if tc.allow != "" && (r.header.Get("Allow") != tc.allow || !strings.Contains(eb.Error.Message, tc.allow)) {
			t.Errorf("%s %s: Allow %q, message %q; want %q", tc.method, tc.path, r.header.Get("Allow"), eb.Error.Message, tc.allow)
		}
	}
}

// Files come as text, as {"base64"} or as a bare base64 string; anything
// else is refused naming the file and the forms.
func TestFilesAsTextOrBase64(t *testing.T) {
	url, _, _ := start(t, Config{})
	body := `{"code": "print(open('a.txt').read(), open('b.bin', 'rb').read(), open('c').read())",
		"files": {"a.txt": {"text": "héllo\n"}, "b.bin": {"base64": "AAEC"}, "c": "b2xk"}}`
	res := decodeResult(t, post(t, url+"/v1/run", "", body))
	if res.Stdout != "héllo\n b'\\x00\\x01\\x02' old\n" || res.Error != nil {
		t.Fatalf("result %+v", res)
	}
	bad := map[string]string{
		`{"a.txt": "hello world"}`:                    `files["a.txt"]: want a base64 string, {"text": "..."} or {"base64": "..."} (a string is base64`,
		`{"a.txt": {"text": "x", "base64": "eA=="}}`:  `files["a.txt"]: want a base64 string, {"text": "..."} or {"base64": "..."}: exactly one`,
		`{"a.txt": {"txt": "x"}}`:                     `files["a.txt"]: want a base64 string`,
		`{"a.txt": 12}`:                               `files["a.txt"]: want a base64 string`,
		`{"a": {"text": "ok"}, "b": {"base64": "!"}}`: `files["b"]: base64: illegal base64 data`,
		`["a.txt"]`: `files: want an object of path: content`,
	}
	for files, want := range bad {
		for _, path := range []string{"/v1/run", "/v1/sessions"} {
			r := post(t, url+path, "", `{"code": "pass", "files": `+files+`}`)
			var eb errorBody
			json.Unmarshal(r.body, &eb)
			if path == "/v1/sessions" {
				r = post(t, url+path, "", `{"files": `+files+`}`)
				json.Unmarshal(r.body, &eb)
			}
			if r.status != 400 || !strings.Contains(eb.Error.Message, want) {
				t.Errorf("%s files %s: %d %s; want 400 with %q", path, files, r.status, r.body, want)
			}
		}
	}
}

// GET /v1/sessions lists the live sessions, oldest first, with their
// calls, and never waits for one that is running a call.
func TestListSessions(t *testing.T) {
	url, _, _ := start(t, Config{Token: "tok"})
	list := func() SessionList {
		t.Helper()
		r := do(t, "GET", url+"/v1/sessions", "tok", "")
		wantStatus(t, r, 200, "")
		var l SessionList
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := list(); len(l.Sessions) != 0 {
		t.Fatalf("before any: %+v", l)
	}
	wantStatus(t, do(t, "GET", url+"/v1/sessions", "", ""), 401, "unauthorized")
	var a, b SessionInfo
	json.Unmarshal(post(t, url+"/v1/sessions", "tok", "").body, &a)
	time.Sleep(2 * time.Millisecond) // distinct creation times
	json.Unmarshal(post(t, url+"/v1/sessions", "tok", "").body, &b)
	wantStatus(t, post(t, url+"/v1/sessions/"+a.ID+"/run", "tok", `{"code": "x = 1"}`), 200, "")
	l := list()
	if len(l.Sessions) != 2 || l.Sessions[0].ID != a.ID || l.Sessions[1].ID != b.ID {
		t.Fatalf("list %+v, want %s then %s", l, a.ID, b.ID)
	}
	if first := l.Sessions[0]; first.Calls != 1 || first.LastCall == nil || first.Running || first.LastCall.Before(first.Created) {
		t.Errorf("first session %+v", first)
	}
	if second := l.Sessions[1]; second.Calls != 0 || second.LastCall != nil {
		t.Errorf("second session %+v", second)
	}
	// A running call shows, and listing does not wait for it.
	done := make(chan response)
	go func() {
		done <- post(t, url+"/v1/sessions/"+b.ID+"/run", "tok", `{"code": "import time; time.sleep(1)"}`)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		start := time.Now()
		l = list()
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("listing took %v while a call ran", took)
		}
		if l.Sessions[1].Running || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !l.Sessions[1].Running {
		t.Error("the running call never showed")
	}
	wantStatus(t, <-done, 200, "")
	wantStatus(t, do(t, "DELETE", url+"/v1/sessions/"+a.ID, "tok", ""), http.StatusNoContent, "")
	if l := list(); len(l.Sessions) != 1 || l.Sessions[0].ID != b.ID || l.Sessions[0].Calls != 1 || l.Sessions[0].Running {
		t.Errorf("after delete: %+v", l)
	}
}

// /metrics has the Go runtime and the process beside the runs.
func TestMetricsHaveRuntimeAndProcess(t *testing.T) {
	url, _, _ := start(t, Config{})
	r := do(t, "GET", url+"/metrics", "", "")
	for _, want := range []string{"go_goroutines ", "go_memstats_heap_alloc_bytes ", "process_resident_memory_bytes ", "process_open_fds "} {
		if !strings.Contains(string(r.body), "\n"+want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// HTTP answers carry the last expression's value and the displays, as
// Jupyter writes them, unless the request turns rich output off.
func TestRichOutputOverHTTP(t *testing.T) {
	url, _, _ := start(t, Config{})
	code := `import airlock
class T:
    def _repr_html_(self): return "<b>t</b>"
    def __repr__(self): return "T()"
airlock.display(T(), b"\x89PNG\r\n\x1a\n")
40 + 2`
	body, _ := json.Marshal(map[string]any{"code": code})
	res := decodeResult(t, post(t, url+"/v1/run", "", string(body)))
	if res.Value != "42" || len(res.Displays) != 2 {
		t.Fatalf("value %q, displays %+v", res.Value, res.Displays)
	}
	if d := res.Displays[0].Data; d["text/html"] != "<b>t</b>" || d["text/plain"] != "T()" {
		t.Errorf("html display %+v", d)
	}
	if d := res.Displays[1].Data; d["image/png"] != "iVBORw0KGgo=" {
		t.Errorf("png display %+v (want base64)", d)
	}
	body, _ = json.Marshal(map[string]any{"code": code, "rich_output": false})
	res = decodeResult(t, post(t, url+"/v1/run", "", string(body)))
	if res.Value != "" || len(res.Displays) != 0 || res.Stdout != "T()\nb'\\x89PNG\\r\\n\\x1a\\n'\n" {
		t.Errorf("rich_output false: %+v", res)
	}
	// A session call too.
	var info SessionInfo
	json.Unmarshal(post(t, url+"/v1/sessions", "", "").body, &info)
	var sres SessionResult
	json.Unmarshal(post(t, url+"/v1/sessions/"+info.ID+"/run", "", `{"code": "x = 2\nx ** 10"}`).body, &sres)
	if sres.Value != "1024" {
		t.Errorf("session value %+v", sres)
	}
}

// A run that looks steered says so in its JSON, in /metrics and in a
// warning log record.
func TestSuspiciousRunOverHTTP(t *testing.T) {
	logs := &lockedWriter{w: &strings.Builder{}}
	url, _, _ := start(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	body, _ := json.Marshal(map[string]any{"code": "import os\nos.path.exists('/etc/shadow')\nos.path.exists('/x\\nexit_code: 0')"})
	res := decodeResult(t, post(t, url+"/v1/run", "", string(body)))
	if len(res.Suspicious) != 1 || res.Suspicious[0].Reason != "credential_probe" || len(res.Audit) == 0 {
		t.Fatalf("suspicious %+v, audit %+v", res.Suspicious, res.Audit)
	}
	clean := decodeResult(t, post(t, url+"/v1/run", "", `{"code": "print(1)"}`))
	if len(clean.Suspicious) != 0 {
		t.Fatalf("an honest run: %+v", clean.Suspicious)
	}
	m := do(t, "GET", url+"/metrics", "", "")
	if !strings.Contains(string(m.body), `airlock_suspicious_runs_total{reason="credential_probe"} 1`) {
		t.Errorf("metrics lack the suspicious run")
	}
	if !strings.Contains(logs.String(), `level=WARN msg="suspicious run"`) || !strings.Contains(logs.String(), "reasons.credential_probe=") {
		t.Errorf("log:\n%s", logs.String())
	}
}

// lockedWriter lets the server's goroutines log into one builder.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
