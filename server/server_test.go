package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

var sb *airlock.Sandbox

func TestMain(m *testing.M) {
	var err error
	sb, err = airlock.New(context.Background(), airlock.WithNotice(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "server tests need python.wasm (scripts/setup.sh):", err)
		os.Exit(1)
	}
	code := m.Run()
	sb.Close(context.Background())
	if keyedSB != nil {
		keyedSB.Close(context.Background())
	}
	os.Exit(code)
}

// start serves cfg with the tests' Sandbox on a loopback port until the
// test ends and returns the base URL, the Server and the http.Server (for
// Shutdown).
func start(t *testing.T, cfg Config) (string, *Server, *http.Server) {
	t.Helper()
	cfg.Sandbox = sb
	url, s := serve(t, cfg)
	return url, s, s.hs
}

// serve serves cfg (its Sandbox, and no log unless it has one) on a
// loopback port until the test ends, and returns the base URL and the
// Server.
func serve(tb testing.TB, cfg Config) (string, *Server) {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go s.Serve(ln) // with its connection caps and timeouts, as airlock serve
	tb.Cleanup(func() { s.Close() })
	return "http://" + ln.Addr().String(), s
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, url, token, body string) response {
	t.Helper()
	return do(t, "POST", url, token, body)
}

func decodeResult(t *testing.T, r response) Result {
	t.Helper()
	var res Result
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return res
}

func runJSON(t *testing.T, code string, limits RunLimits) string {
	b, err := json.Marshal(RunRequest{Code: code, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRun(t *testing.T) {
	url, _, _ := start(t, Config{})
	body := `{"code": "import sys\nprint(open('in.txt').read().upper())\nopen('out.txt','w').write('x')\nprint('oops', file=sys.stderr)\nsys.exit(3)",
		"files": {"in.txt": "aGVsbG8="}}`
	r := post(t, url+"/v1/run", "", body)
	res := decodeResult(t, r)
	if r.status != 200 || res.Stdout != "HELLO\n" || res.Stderr != "oops\n" || res.ExitCode != 3 || res.Error != nil {
		t.Fatalf("status %d, result %+v", r.status, res)
	}
	if len(res.Files) != 1 || res.Files[0].Path != "/home/user/out.txt" || string(res.Files[0].Data) != "x" {
		t.Fatalf("files %+v", res.Files)
	}
	// The result names the build that ran it: the own one by default.
	if py := res.Python; py.Build != "own" || !strings.HasPrefix(py.Version, "3.13.") || len(py.SHA256) != 64 {
		t.Fatalf("python %+v, want the own 3.13 build", py)
	}
	// A traceback comes back intact, with the kind-free error field.
	res = decodeResult(t, post(t, url+"/v1/run", "", runJSON(t, "1/0", RunLimits{})))
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "ZeroDivisionError") || res.Error != nil {
		t.Fatalf("result %+v", res)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	m := post(t, url+"/v1/run", "", runJSON(t, "while True: pass", RunLimits{TimeoutMS: 200}))
	if res := decodeResult(t, m); res.Error == nil || res.Error.Kind != "timeout" {
		t.Fatalf("timeout run: %+v", res)
	}
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Both runs above exited non-zero (sys.exit(3), an exception): not "ok".
	if bytes.Contains(metrics, []byte(`outcome="ok"`)) {
		t.Errorf("runs that exited non-zero counted as ok:\n%s", metrics)
	}
	for _, want := range []string{`airlock_runs_total{outcome="exit_nonzero"} 2`, `airlock_runs_total{outcome="timeout"} 1`,
		"airlock_run_duration_seconds_count 3", "airlock_queue_depth 0", "airlock_runs_in_flight 0",
		`airlock_python_info{build="own",engine="` + sb.Engine() + `",sha256="` + res.Python.SHA256 + `",version="` + res.Python.Version + `"} 1`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

func TestBadRequests(t *testing.T) {
	url, _, _ := start(t, Config{MaxBody: 1 << 10})
	cases := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"bad JSON", `{"code": `, 400, "bad request body"},
		{"not an object", `[1]`, 400, "bad request body"},
		{"unknown field", `{"code": "pass", "timeout": 5}`, 400, `unknown field "timeout"`},
		{"unknown limit", `{"code": "pass", "limits": {"cpu": 1}}`, 400, `unknown field "cpu"`},
		{"trailing data", `{"code": "pass"} {}`, 400, "unexpected data"},
		{"no code", `{}`, 400, `"code" is required`},
		{"bad base64", `{"code": "pass", "files": {"a": "!!"}}`, 400, "bad request body"},
		{"oversize", `{"code": "` + strings.Repeat("#", 2<<10) + `"}`, 413, "exceeds 1024 bytes"},
		{"oversize after the object", `{"code": "pass"}` + strings.Repeat(" ", 2<<10), 413, "exceeds 1024 bytes"},
		{"negative limit", `{"code": "pass", "limits": {"memory": -1}}`, 400, "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, url+"/v1/run", "", tc.body)
			var eb errorBody
			if err := json.Unmarshal(r.body, &eb); err != nil || eb.Error.Kind == "" {
				t.Fatalf("body %s is not {\"error\":{\"kind\",...}}: %v", r.body, err)
			}
			if r.status != tc.status || !strings.Contains(eb.Error.Message, tc.msg) {
				t.Fatalf("status %d body %s; want %d and %q", r.status, r.body, tc.status, tc.msg)
			}
		})
	}
}

func TestLimitsClamped(t *testing.T) {
	max := airlock.DefaultLimits()
	max.Timeout, max.Memory = 500*time.Millisecond, 64<<20
	url, _, _ := start(t, Config{MaxLimits: max})

	r := post(t, url+"/v1/run", "", runJSON(t, "x = bytearray(128 << 20)", RunLimits{Memory: 1 << 30}))
	res := decodeResult(t, r)
	if res.Error == nil || res.Error.Kind != "memory_limit" || r.header.Get("Airlock-Limits-Clamped") != "memory" {
		t.Fatalf("memory: header %q, result %+v", r.header.Get("Airlock-Limits-Clamped"), res)
	}
	start := time.Now()
	r = post(t, url+"/v1/run", "", runJSON(t, "while True: pass", RunLimits{TimeoutMS: 3600_000}))
	res = decodeResult(t, r)
	if res.Error == nil || res.Error.Kind != "timeout" || time.Since(start) > 5*time.Second ||
		r.header.Get("Airlock-Limits-Clamped") != "timeout_ms" {
		t.Fatalf("timeout: after %v, header %q, result %+v", time.Since(start), r.header.Get("Airlock-Limits-Clamped"), res)
	}
	// A request without limits gets the maxima where the Sandbox's defaults
	// are larger (10 s here), and nothing is named as clamped.
	start = time.Now()
	r = post(t, url+"/v1/run", "", `{"code": "while True: pass"}`)
	res = decodeResult(t, r)
	if res.Error == nil || res.Error.Kind != "timeout" || time.Since(start) > 5*time.Second || r.header.Get("Airlock-Limits-Clamped") != "" {
		t.Fatalf("no limits: after %v, header %q, result %+v", time.Since(start), r.header.Get("Airlock-Limits-Clamped"), res)
	}
	// Within the maxima nothing is clamped.
	r = post(t, url+"/v1/run", "", runJSON(t, "x = bytearray(16 << 20); print('ok')", RunLimits{Memory: 48 << 20}))
	if res := decodeResult(t, r); res.Stdout != "ok\n" || r.header.Get("Airlock-Limits-Clamped") != "" {
		t.Fatalf("in range: %+v", res)
	}
}

func TestAuth(t *testing.T) {
	url, _, _ := start(t, Config{Token: "s3cret"})
	body := runJSON(t, "print(1)", RunLimits{})
	for _, tok := range []string{"", "wrong", "s3cretX", "s3cre"} {
		if r := post(t, url+"/v1/run", tok, body); r.status != 401 {
			t.Fatalf("token %q: status %d", tok, r.status)
		}
	}
	if r := post(t, url+"/v1/run", "s3cret", body); r.status != 200 || decodeResult(t, r).Stdout != "1\n" {
		t.Fatalf("right token: %d %s", r.status, r.body)
	}
	for path, want := range map[string]int{"/healthz": 200, "/metrics": 401} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s without a token: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestOverload sends more concurrent runs than slots plus queue: the
// excess gets 429 with Retry-After at once, every admitted one its result.
func TestOverload(t *testing.T) {
	url, s, _ := start(t, Config{Concurrency: 1, Queue: 2})
	const n = 10
	var wg sync.WaitGroup
	results := make([]response, n)
	for i := range n {
		wg.Go(func() {
			code := fmt.Sprintf("import time; time.sleep(0.3); print(%d)", i)
			results[i] = post(t, url+"/v1/run", "", runJSON(t, code, RunLimits{}))
		})
	}
	wg.Wait()
	ok, busy := 0, 0
	for i, r := range results {
		switch r.status {
		case 200:
			ok++
			if res := decodeResult(t, r); res.Stdout != fmt.Sprintf("%d\n", i) || res.Error != nil {
				t.Errorf("request %d: %+v", i, res)
			}
		case 429:
			busy++
			if r.header.Get("Retry-After") == "" || !bytes.Contains(r.body, []byte("overloaded")) {
				t.Errorf("429 without Retry-After or kind: %v %s", r.header, r.body)
			}
		default:
			t.Errorf("request %d: status %d %s", i, r.status, r.body)
		}
	}
	// One running and two queued: at least three admitted, the rest refused.
	if ok < 3 || busy == 0 || ok+busy != n {
		t.Fatalf("%d answered, %d refused of %d", ok, busy, n)
	}
	if s.waiting.Load() != 0 || len(s.slots) != 0 {
		t.Fatalf("left %d waiting, %d slots taken", s.waiting.Load(), len(s.slots))
	}
}

func TestStream(t *testing.T) {
	url, _, _ := start(t, Config{})
	code := "import sys, time\nprint('first')\nsys.stdout.flush()\ntime.sleep(0.5)\nprint('err', file=sys.stderr)\nprint('second')"
	begin := time.Now()
	resp, err := http.Post(url+"/v1/run?stream=1", "application/json", strings.NewReader(runJSON(t, code, RunLimits{})))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	type event struct {
		name, data string
		at         time.Duration
	}
	var events []event
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			events = append(events, event{name, strings.TrimPrefix(line, "data: "), time.Since(begin)})
		}
	}
	var stdout, stderr string
	for _, e := range events[:len(events)-1] {
		var s string
		if err := json.Unmarshal([]byte(e.data), &s); err != nil {
			t.Fatalf("event %+v: %v", e, err)
		}
		switch e.name {
		case "stdout":
			stdout += s
		case "stderr":
			stderr += s
		default:
			t.Fatalf("event %+v", e)
		}
	}
	last := events[len(events)-1]
	var res Result
	if last.name != "result" || json.Unmarshal([]byte(last.data), &res) != nil {
		t.Fatalf("last event %+v", last)
	}
	if stdout != "first\nsecond\n" || stderr != "err\n" || res.Stdout != stdout || res.ExitCode != 0 {
		t.Fatalf("stdout %q stderr %q result %+v", stdout, stderr, res)
	}
	// "first" arrived while the run was still sleeping (its newline may
	// come in the same event: output of one stream waits as one).
	if !strings.HasPrefix(events[0].data, `"first`) || last.at-events[0].at < 300*time.Millisecond {
		t.Fatalf("first event %+v, result at %v: not streamed", events[0], last.at)
	}
}

// TestGracefulDrain shuts the server down while a run is going and a
// second waits in the queue: both are answered, then the port is closed.
func TestGracefulDrain(t *testing.T) {
	url, s, hs := start(t, Config{Concurrency: 1, Queue: 1})
	var wg sync.WaitGroup
	results := make([]response, 2)
	for i := range 2 {
		wg.Go(func() {
			results[i] = post(t, url+"/v1/run", "", runJSON(t, fmt.Sprintf("import time; time.sleep(0.4); print('done %d')", i), RunLimits{}))
		})
	}
	for range 200 { // up to 2 s until one runs and one waits
		if len(s.slots) == 1 && s.waiting.Load() == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(s.slots) != 1 || s.waiting.Load() != 1 {
		t.Fatalf("slots %d, waiting %d", len(s.slots), s.waiting.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	wg.Wait()
	for i, r := range results {
		if r.status != 200 || decodeResult(t, r).Stdout != fmt.Sprintf("done %d\n", i) {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	if _, err := http.Post(url+"/v1/run", "application/json", strings.NewReader(`{"code":"pass"}`)); err == nil {
		t.Fatal("the server still accepts requests after shutdown")
	}
}

// Idle counts from the last run's end, is 0 while one is in progress, and
// does not move for requests that run nothing.
func TestIdle(t *testing.T) {
	url, s, _ := start(t, Config{})
	if s.Idle() <= 0 {
		t.Fatalf("a server that ran nothing: Idle %v", s.Idle())
	}
	done := make(chan response, 1)
	go func() {
		done <- post(t, url+"/v1/run", "", runJSON(t, "import time; time.sleep(0.5)", RunLimits{}))
	}()
	busy := false
	for range 200 { // up to 2 s until the run is in progress
		if busy = s.Idle() == 0; busy {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !busy {
		t.Fatal("Idle stayed above 0 during a run")
	}
	if r := <-done; r.status != 200 {
		t.Fatalf("run: %d %s", r.status, r.body)
	}
	time.Sleep(100 * time.Millisecond)
	before := s.Idle()
	if before < 100*time.Millisecond || before > 5*time.Second {
		t.Fatalf("100 ms after the run: Idle %v", before)
	}
	if r := do(t, "GET", url+"/metrics", "", ""); r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
	if after := s.Idle(); after < before {
		t.Errorf("a metrics request moved Idle back: %v, then %v", before, after)
	}
}

// The fuel limit and the fuel consumed travel through the HTTP API; the
// server's engine decides whether they apply (wasmtime meters, wazero
// refuses a budget).
func TestFuelOverHTTP(t *testing.T) {
	url, _, _ := start(t, Config{})
	r := post(t, url+"/v1/run", "", runJSON(t, "while True: pass", RunLimits{Fuel: 20_000_000, TimeoutMS: 60_000}))
	if sb.Engine() != airlock.EngineWasmtime {
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "invalid_request") {
			t.Fatalf("fuel limit on %s: status %d, body %s", sb.Engine(), r.status, r.body)
		}
		return
	}
	if res := decodeResult(t, r); r.status != 200 || res.Error == nil || res.Error.Kind != "fuel_exhausted" || res.Fuel != 20_000_000 {
		t.Fatalf("status %d, result %+v", r.status, res)
	}
	if res := decodeResult(t, post(t, url+"/v1/run", "", runJSON(t, "pass", RunLimits{}))); res.Fuel <= 0 {
		t.Fatalf("fuel consumed not reported: %+v", res)
	}
}

// Bodies are read only while there is room among MaxBodyReads: clients
// trickling large bodies cannot make the server buffer them all.
func TestBodiesAreAdmittedBeforeTheyAreRead(t *testing.T) {
	url, s, _ := start(t, Config{Concurrency: 1, Queue: -1, MaxBodyReads: 1})
	host := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A body announced at 1 MiB of which only the start arrives.
	fmt.Fprintf(conn, "POST /v1/run HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"code\": \"", host, 1<<20)
	// Once it is being read (a request sent before might take the one
	// place first, and the trickle be refused instead).
	for deadline := time.Now().Add(5 * time.Second); s.bodies.count() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	var r response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r = post(t, url+"/v1/run", "", `{"code": "pass"}`); r.status == 429 {
			break
		}
	}
	if r.status != 429 || !bytes.Contains(r.body, []byte("bodies are being read")) {
		t.Fatalf("while another body arrives: %d %s, want 429", r.status, r.body)
	}
	conn.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r = post(t, url+"/v1/run", "", `{"code": "print(1)"}`); r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the trickling client left: %d %s", r.status, r.body)
		}
	}
}

// A client that stops reading its answer gives back its run slot when the
// run ends: the slot is for running, not for writing a large answer (a
// stream of output, or files) to a reader that has stalled.
func TestStalledReadersGiveBackTheirSlot(t *testing.T) {
	for _, tc := range []struct{ name, path, code string }{
		{"stream", "/v1/run?stream=1", "import sys\nfor i in range(1024):\n    sys.stdout.write('\\x01' * 1000)"},
		{"json", "/v1/run", "open('big', 'wb').write(b'x' * (16 << 20))"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, s, _ := start(t, Config{Concurrency: 1, Queue: -1})
			conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.(*net.TCPConn).SetReadBuffer(4096)
			body := runJSON(t, tc.code, RunLimits{})
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tc.path, len(body), body)
			// Never read: wait for the run to take the slot, then to give it back.
			deadline := time.Now().Add(10 * time.Second)
			for len(s.slots) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			for len(s.slots) != 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if len(s.slots) != 0 {
				t.Fatal("the slot is still held 10 s on: the answer's writer keeps it")
			}
			wantStatus(t, post(t, url+"/v1/run", "", runJSON(t, "print(1)", RunLimits{})), 200, "")
		})
	}
}

// The client holds a server's answers to what a run's result is: a 200
// that is not a result is an error, not a successful run, and a body past
// MaxResponse is refused rather than read whole.
func TestClientDistrustsOddAnswers(t *testing.T) {
	for _, tc := range []struct {
		body, kind string
		max        int64
	}{
		{"null", "bad_response", 0},
		{"{}", "bad_response", 0},
		{`{"exit_code": 0, "files": []}` + strings.Repeat(" ", 4096), "response_too_large", 1024},
	} {
		hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, tc.body)
		}))
		c := &Client{URL: hostile.URL, MaxResponse: tc.max}
		_, err := c.Run(context.Background(), RunRequest{Code: "pass"})
		hostile.Close()
		var api *APIError
		if !errors.As(err, &api) || api.Kind != tc.kind {
			t.Errorf("answer %.20q: %v, want an APIError of kind %s", tc.body, err, tc.kind)
		}
	}
}
