package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func mustRule(t *testing.T, s string) Rule {
	t.Helper()
	r, err := ParseRule(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseRule(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "TOKEN" {
			return "Bearer t0k3n", true
		}
		return "", false
	}
	for _, c := range []struct{ in, want string }{
		{"api.example.com", "https://api.example.com"},
		{"API.Example.COM.", "https://api.example.com"},
		{"api.example.com:8443", "https://api.example.com:8443"},
		{"https://api.example.com/v1/", "https://api.example.com/v1/"},
		{"http://api.example.com:80", "http://api.example.com"},
		{"get,POST https://api.example.com/v1", "https://api.example.com/v1"}, // lower-case first word is a target
		{"GET,POST https://api.example.com/v1", "GET,POST https://api.example.com/v1"},
		{"*.example.com", "https://*.example.com"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"https://api.example.com header:Authorization=$TOKEN", "https://api.example.com (+host headers)"},
	} {
		r, err := ParseRule(c.in, env)
		if c.in == "get,POST https://api.example.com/v1" {
			if err == nil {
				t.Errorf("%q: want an error (two targets)", c.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if r.String() != c.want {
			t.Errorf("%q: %q, want %q", c.in, r.String(), c.want)
		}
	}
	r, _ := ParseRule("api.example.com header:Authorization=$TOKEN header:x-api-key=abc", env)
	if r.Headers["Authorization"] != "Bearer t0k3n" || r.Headers["X-Api-Key"] != "abc" {
		t.Errorf("headers: %v", r.Headers)
	}
	for _, bad := range []string{"", "ftp://x.com", "https://user@x.com", "https://x.com/?q", "x..com", "https://x.com:0",
		"https://x.com:70000", "https://x.com/a/../b", "https://x.com/a//b", "https://x.com/./a", "https://x.com/a%5Cb", "x.com header:A=$MISSING", "x.com extra", "*.", "https://a b", "http://[fe80::1%25eth0]:80",
		"https://" + strings.Repeat("a", 64) + ".com"} {
		if _, err := ParseRule(bad, env); !errors.Is(err, ErrInvalidRule) {
			t.Errorf("%q: want ErrInvalidRule, got %v", bad, err)
		}
	}
}

func TestMatching(t *testing.T) {
	r := mustRule(t, "GET,HEAD https://*.example.com/v1")
	for _, c := range []struct {
		scheme, host string
		port         int
		method, path string
		ok           bool
	}{
		{"https", "api.example.com", 443, "GET", "/v1", true},
		{"https", "a.b.example.com", 443, "HEAD", "/v1/x", true},
		{"https", "example.com", 443, "GET", "/v1", false},
		{"https", "api.example.com", 443, "POST", "/v1", false},
		{"https", "api.example.com", 443, "GET", "/v10", false},
		{"https", "api.example.com", 443, "GET", "/v2", false},
		{"http", "api.example.com", 443, "GET", "/v1", false},
		{"https", "api.example.com", 8443, "GET", "/v1", false},
		{"https", "evilexample.com", 443, "GET", "/v1", false},
	} {
		got := r.matchEndpoint(c.scheme, c.host, c.port) && r.matchRequest(c.method, c.path)
		if got != c.ok {
			t.Errorf("%+v: %v", c, got)
		}
	}
	if mustRule(t, "https://*.3.4").matchEndpoint("https", "1.2.3.4", 443) {
		t.Error("a wildcard matched an IP address")
	}
}

func TestNarrow(t *testing.T) {
	ceiling := Policy{Rules: []Rule{mustRule(t, "https://*.example.com/api/"), mustRule(t, "GET,POST https://pay.example.org")}, MaxRequests: 10}
	ceiling.Rules[1].Headers = map[string]string{"Authorization": "secret"}
	ok := Policy{Rules: []Rule{mustRule(t, "https://a.example.com/api/v1"), mustRule(t, "https://*.x.example.com/api/"), mustRule(t, "GET https://pay.example.org/charges")}, MaxRequests: 50}
	got, err := ok.Narrow(ceiling)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxRequests != 10 || got.Rules[2].Headers["Authorization"] != "secret" || got.Rules[0].Headers != nil {
		t.Fatalf("narrowed: %+v", got)
	}
	for _, wider := range []string{"https://example.com/api/", "https://a.example.com/", "https://a.example.com/apix", "http://a.example.com/api/",
		"https://pay.example.org", "DELETE https://pay.example.org", "https://a.example.com:444/api/", "https://*.com/api/"} {
		_, err := Policy{Rules: []Rule{mustRule(t, wider)}}.Narrow(ceiling)
		if !errors.Is(err, ErrWiderRule) {
			t.Errorf("%s: want ErrWiderRule, got %v", wider, err)
		}
	}
	withHeader := Policy{Rules: []Rule{mustRule(t, "GET https://pay.example.org")}}
	withHeader.Rules[0].Headers = map[string]string{"X": "y"}
	if _, err := withHeader.Narrow(ceiling); !errors.Is(err, ErrInvalidRule) {
		t.Errorf("a client's header: %v", err)
	}
	if p, err := (Policy{}).Narrow(ceiling); err != nil || len(p.Rules) != 0 {
		t.Errorf("no rules narrows to nothing: %+v %v", p, err)
	}
}

func TestInternalAddresses(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"224.0.0.1", "0.0.0.0", "255.255.255.255", "::1", "::", "fe80::1", "fd00:ec2::254", "fc00::1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:a00:1::1"} {
		if _, bad := internal(netip.MustParseAddr(s)); !bad {
			t.Errorf("%s is not refused", s)
		}
	}
	for _, s := range []string{"93.184.216.34", "8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "172.32.0.1", "100.128.0.1"} {
		if cls, bad := internal(netip.MustParseAddr(s)); bad {
			t.Errorf("%s is refused as %s", s, cls)
		}
	}
}

type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// client speaks the device protocol, as the guest module does.
type client struct {
	t *testing.T
	d *Device
}

func (c client) op(req map[string]any, data []byte) (map[string]any, []byte, map[string]any) {
	c.t.Helper()
	line, _ := json.Marshal(req)
	payload := append(append(line, '\n'), data...)
	frame := append(fmt.Appendf(nil, "%08x", len(payload)), payload...)
	if n, err := c.d.Write(context.Background(), frame); n != len(frame) || err != nil {
		c.t.Fatalf("write %d of %d: %v", n, len(frame), err)
	}
	var resp []byte
	buf := make([]byte, 4096)
	for {
		n, _ := c.d.Read(context.Background(), buf)
		if n == 0 {
			break
		}
		resp = append(resp, buf[:n]...)
	}
	if len(resp) < 8 {
		c.t.Fatalf("short response %q", resp)
	}
	body := resp[8:]
	js, rest, _ := bytes.Cut(body, []byte("\n"))
	var reply map[string]any
	if err := json.Unmarshal(js, &reply); err != nil {
		c.t.Fatalf("reply %q: %v", js, err)
	}
	if e, ok := reply["error"].(map[string]any); ok {
		return nil, nil, e
	}
	ok, _ := reply["ok"].(map[string]any)
	return ok, rest, nil
}

// fetch sends raw HTTP over a new connection and returns the raw answer
// or the first error.
func (c client) fetch(host string, port int, tls bool, raw string) (string, map[string]any) {
	c.t.Helper()
	ok, _, e := c.op(map[string]any{"op": "connect", "host": host, "port": port}, nil)
	if e != nil {
		return "", e
	}
	id := ok["id"]
	defer c.op(map[string]any{"op": "close", "id": id}, nil) // also after an error: connections are capped
	if tls {
		if _, _, e := c.op(map[string]any{"op": "tls", "id": id}, nil); e != nil {
			return "", e
		}
	}
	if _, _, e := c.op(map[string]any{"op": "send", "id": id, "timeout": 10}, []byte(raw)); e != nil {
		return "", e
	}
	var out []byte
	for {
		_, data, e := c.op(map[string]any{"op": "recv", "id": id, "max": 65536, "timeout": 10}, nil)
		if e != nil {
			return string(out), e
		}
		if len(data) == 0 {
			break
		}
		out = append(out, data...)
	}
	return string(out), nil
}

func hostPortOf(t *testing.T, u string) (string, int) {
	t.Helper()
	u = u[strings.Index(u, "://")+3:]
	h, p, _ := net.SplitHostPort(u)
	var port int
	fmt.Sscan(p, &port)
	return h, port
}

func TestDeviceHeadersAndCredentials(t *testing.T) {
	var seen http.Header
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		seen.Set("Host", r.Host)
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("Authorization", "x")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Ok", "1")
		fmt.Fprint(w, "hello")
	}))
	defer ts.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	g := NewGate(Env{RootCAs: roots})
	defer g.Close()
	r := mustRule(t, ts.URL)
	r.Headers = map[string]string{"authorization": "Bearer host-secret"}
	d, err := NewDevice(context.Background(), g, Policy{Rules: []Rule{r}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	host, port := hostPortOf(t, ts.URL)
	raw := "GET /p?q=1 HTTP/1.1\r\nHost: evil.example\r\nAuthorization: guest\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n" +
		"Proxy-Authorization: p\r\nTE: trailers\r\nUpgrade: h2c\r\nX-Keep: yes\r\n\r\n"
	out, e := client{t, d}.fetch(host, port, true, raw)
	if e != nil {
		t.Fatal(e)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
	if err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello" || resp.Header.Get("X-Ok") != "1" || resp.Header.Get("X-Echo") != "" ||
		resp.Header.Get("Authorization") != "" || resp.Header.Get("Keep-Alive") != "" || !resp.Close {
		t.Fatalf("response to the guest: %q", out)
	}
	if seen.Get("Authorization") != "Bearer host-secret" || seen.Get("X-Keep") != "yes" || seen.Get("Host") != host+":"+fmt.Sprint(port) {
		t.Fatalf("the server saw %v", seen)
	}
	for _, hop := range []string{"X-Hop", "Proxy-Authorization", "Te", "Upgrade"} {
		if seen.Get(hop) != "" {
			t.Errorf("hop-by-hop %s reached the server", hop)
		}
	}
	ds := d.Decisions()
	if len(ds) != 1 || !ds[0].Allowed || ds[0].Status != 200 || ds[0].ResponseBytes != 5 || strings.Contains(ds[0].URL, "q=1") {
		t.Fatalf("decisions: %+v", ds)
	}
}

func TestDeviceRefusals(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "x") }))
	defer ts.Close()
	_, port := hostPortOf(t, ts.URL)
	res := mapResolver{"rebind.test": {netip.MustParseAddr("127.0.0.1")}, "mixed.test": {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")}}
	g := NewGate(Env{Resolver: res})
	p := Policy{Rules: []Rule{mustRule(t, fmt.Sprintf("http://rebind.test:%d", port)), mustRule(t, fmt.Sprintf("http://mixed.test:%d", port)),
		mustRule(t, fmt.Sprintf("GET http://127.0.0.1:%d/ok", port))}, MaxRequests: 5}
	d, _ := NewDevice(context.Background(), g, p)
	defer d.Close()
	c := client{t, d}
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }
	if out, e := c.fetch("127.0.0.1", port, false, get("/ok")); e != nil || !strings.HasSuffix(out, "x") {
		t.Fatalf("the literal rule: %q %v", out, e)
	}
	for _, name := range []string{"rebind.test", "mixed.test"} {
		_, e := c.fetch(name, port, false, get("/"))
		if e == nil || e["kind"] != "denied" || !strings.Contains(e["message"].(string), name+" resolved to") {
			t.Errorf("%s: %v", name, e)
		}
	}
	if _, e := c.fetch("127.0.0.1", port, false, "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz"); e == nil || e["kind"] != "denied" {
		t.Errorf("POST: %v", e)
	}
	if _, e := c.fetch("127.0.0.1", port, false, "SSH-2.0-OpenSSH\r\n\r\n"); e == nil || e["kind"] != "invalid" {
		t.Errorf("not HTTP: %v", e)
	}
	if _, e := c.fetch("other.test", 80, false, get("/")); e == nil || e["message"] != "network: other.test is not in this run's allow-list (allowed: "+d.policy.describe()+")" {
		t.Errorf("other host: %v", e)
	}
	if _, e := c.fetch("127.0.0.1", port, false, get("/ok")); e == nil || !strings.Contains(e["message"].(string), "allowed requests") {
		t.Errorf("past MaxRequests: %v", e)
	}
}

func TestDeviceConnectionCapAndClose(t *testing.T) {
	g := NewGate(Env{})
	d, _ := NewDevice(context.Background(), g, Policy{Rules: []Rule{mustRule(t, "http://127.0.0.1:9")}})
	c := client{t, d}
	for range MaxConns {
		if _, _, e := c.op(map[string]any{"op": "connect", "host": "127.0.0.1", "port": 9}, nil); e != nil {
			t.Fatal(e)
		}
	}
	if _, _, e := c.op(map[string]any{"op": "connect", "host": "127.0.0.1", "port": 9}, nil); e == nil {
		t.Fatal("connections past the cap")
	}
	// A recv blocked on a connection with nothing sent ends at the
	// socket timeout, not never.
	start := time.Now()
	if _, _, e := c.op(map[string]any{"op": "recv", "id": 1, "max": 10, "timeout": 0.2}, nil); e == nil || e["kind"] != "timeout" {
		t.Fatalf("recv: %v", e)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("recv outlived its timeout")
	}
	done := make(chan struct{})
	go func() { d.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
}

// FuzzDevice feeds the device arbitrary frames: it must answer every one,
// never panic, hang or keep unbounded state.
func FuzzDevice(f *testing.F) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) }))
	defer ts.Close()
	u := ts.URL[len("http://"):]
	host, portS, _ := net.SplitHostPort(u)
	var port int
	fmt.Sscan(portS, &port)
	frame := func(js string, data string) []byte {
		p := js + "\n" + data
		return []byte(fmt.Sprintf("%08x", len(p)) + p)
	}
	connect := fmt.Sprintf(`{"op":"connect","host":%q,"port":%d}`, host, port)
	f.Add(frame(connect, ""), frame(`{"op":"send","id":1}`, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"), frame(`{"op":"recv","id":1,"max":100,"timeout":1}`, ""))
	f.Add(frame(connect, ""), frame(`{"op":"send","id":1}`, "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), frame(`{"op":"recv","id":1,"max":-5,"timeout":0.5}`, ""))
	f.Add([]byte("zzzzzzzz"), []byte("00000000"), []byte("ffffffff"))
	f.Add(frame(`{"op":"connect","host":"\u0000","port":99999}`, ""), frame(`{"op":"tls","id":1}`, ""), frame(`{"op":"nope"}`, "x"))
	f.Add(frame(connect, ""), frame(`{"op":"tls","id":1}`, ""), frame(`{"op":"close","id":1}`, ""))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		g := NewGate(Env{})
		defer g.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := NewDevice(ctx, g, Policy{Rules: []Rule{{Scheme: "http", Host: host, Port: port}}, Timeout: 2 * time.Second, MaxRequestBytes: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for _, w := range [][]byte{a, b, c} {
			n, err := d.Write(ctx, w)
			if err != nil || n < 0 || n > len(w) {
				t.Fatalf("Write: %d of %d, %v", n, len(w), err)
			}
			buf := make([]byte, 1<<10)
			total := 0
			for {
				k, err := d.Read(ctx, buf)
				if err != nil {
					t.Fatal(err)
				}
				if k == 0 {
					break
				}
				total += k
				if total > MaxChunk+8<<10 {
					t.Fatalf("a response of %d bytes", total)
				}
			}
		}
		if len(d.conns) > MaxConns {
			t.Fatalf("%d connections", len(d.conns))
		}
	})
}
