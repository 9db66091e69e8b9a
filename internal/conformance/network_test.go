package airlock_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/testenv"
	"github.com/airlock-sandbox/airlock/python"
)

// The network tests run the real python.wasm against loopback servers.
// Rules name 127.0.0.1 literally (the only way a loopback address is
// reachable); names come from an injected resolver.

// fakeResolver answers names from a map, as DNS would.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var netWheelsOnce sync.Once
var netWheelsErr error

// needNetWheels fetches the pinned network packages into the cache, as
// set-up does, when they are not there yet.
func needNetWheels(t *testing.T) {
	t.Helper()
	netWheelsOnce.Do(func() {
		// The cache the suite's Sandboxes use: $AIRLOCK_CACHE_DIR, as the
		// CLI reads it, else the user's.
		dir := testenv.FromEnv().CacheDir
		if dir == "" {
			var err error
			if dir, err = python.CacheDir(); err != nil {
				netWheelsErr = err
				return
			}
		}
		cmd := exec.Command("bash", "../../scripts/fetch-net-wheels.sh", airlock.NetworkWheelsDir(dir))
		out, err := cmd.CombinedOutput()
		if err != nil {
			netWheelsErr = fmt.Errorf("scripts/fetch-net-wheels.sh: %w\n%s", err, out)
		}
	})
	if netWheelsErr != nil {
		t.Fatal(netWheelsErr)
	}
}

// netServers are a plain and a TLS loopback server sharing one handler.
type netServers struct {
	plain, tls *httptest.Server
	roots      *x509.CertPool
}

func newNetServers(t *testing.T, h http.Handler) *netServers {
	t.Helper()
	s := &netServers{plain: httptest.NewServer(h), tls: httptest.NewTLSServer(h)}
	t.Cleanup(s.plain.Close)
	t.Cleanup(s.tls.Close)
	s.roots = x509.NewCertPool()
	s.roots.AddCert(s.tls.Certificate())
	return s
}

// rule parses a rule or fails the test.
func rule(t *testing.T, s string) airlock.NetworkRule {
	t.Helper()
	r, err := airlock.ParseNetworkRule(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// netSandbox is a Sandbox whose host trusts the TLS server and resolves
// names through res.
func netSandbox(t *testing.T, s *netServers, res fakeResolver, opts ...airlock.Option) *airlock.Sandbox {
	t.Helper()
	if res == nil {
		res = fakeResolver{}
	}
	env := airlock.NetworkEnv{Resolver: res}
	if s != nil {
		env.RootCAs = s.roots
	}
	// The own build, whichever the suite runs on: the guest's network
	// module needs its stand-in ssl and its standard library (the npm
	// build's CPython 3.12 has neither), as numpy's tests need numpy.
	return newSandbox(t, append([]airlock.Option{airlock.WithNetworkEnv(env), airlock.WithPython(python.SelectOwn)}, opts...)...)
}

func runNet(t *testing.T, s *airlock.Sandbox, req airlock.Request) *airlock.Result {
	t.Helper()
	if req.Limits.Timeout == 0 {
		req.Limits.Timeout = 60 * time.Second // imports of requests and httpx are slow under -race
	}
	res, err := s.Run(context.Background(), req)
	if res == nil {
		t.Fatalf("nil result (%v)", err)
	}
	return res
}

func mustNet(t *testing.T, s *airlock.Sandbox, req airlock.Request) (string, *airlock.Result) {
	t.Helper()
	res := runNet(t, s, req)
	if res.Error != nil || res.ExitCode != 0 {
		t.Fatalf("run failed: %v exit %d\nstdout:\n%s\nstderr:\n%s", res.Error, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout), res
}

func echoHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Seen-Host", r.Host)
		fmt.Fprintf(w, "%s %s %s body=%q", r.Method, r.URL.Path, r.URL.RawQuery, body)
	})
	return mux
}

func TestNetworkStdlibHTTPAndHTTPS(t *testing.T) {
	srv := newNetServers(t, echoHandler())
	s := netSandbox(t, srv, nil)
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL), rule(t, srv.tls.URL)}}
	code := fmt.Sprintf(`
import urllib.request, http.client, json, ssl
plain, tls = %q, %q
print(urllib.request.urlopen(plain + "/a?x=1").read().decode())
req = urllib.request.Request(tls + "/b", data=b"hello", method="POST")
with urllib.request.urlopen(req) as r:
    print(r.status, r.read().decode())
host, port = tls[len("https://"):].split(":")
c = http.client.HTTPSConnection(host, int(port))
c.request("PUT", "/c", body=b"put-body")
r = c.getresponse()
print(r.status, r.getheader("X-Seen-Host"), r.read().decode())
c.close()
host, port = plain[len("http://"):].split(":")
c = http.client.HTTPConnection(host, int(port))
c.request("GET", "/d")
print(c.getresponse().read().decode())
print(type(ssl.create_default_context()).__name__)
`, srv.plain.URL, srv.tls.URL)
	out, res := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	plainHost := strings.TrimPrefix(srv.plain.URL, "http://")
	tlsHost := strings.TrimPrefix(srv.tls.URL, "https://")
	want := "GET /a x=1 body=\"\"\n" +
		"200 POST /b  body=\"hello\"\n" +
		"200 " + tlsHost + " PUT /c  body=\"put-body\"\n" +
		"GET /d  body=\"\"\n" +
		"SSLContext\n"
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if len(res.Network) != 4 {
		t.Fatalf("decisions: %+v", res.Network)
	}
	wantURLs := []string{"http://" + plainHost + "/a", "https://" + tlsHost + "/b", "https://" + tlsHost + "/c", "http://" + plainHost + "/d"}
	for i, d := range res.Network {
		if !d.Allowed || d.Status != 200 || d.URL != wantURLs[i] || d.Rule == "" || d.ResponseBytes == 0 {
			t.Errorf("decision %d: %+v (want allowed, 200, %s)", i, d, wantURLs[i])
		}
		if ap, err := netip.ParseAddrPort(d.Address); err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("decision %d: address %q, want the loopback address dialled", i, d.Address)
		}
	}
	if res.Network[1].RequestBytes != 5 {
		t.Errorf("POST request bytes = %d, want 5", res.Network[1].RequestBytes)
	}
}

func TestNetworkRefusalsNameTheRule(t *testing.T) {
	srv := newNetServers(t, echoHandler())
	s := netSandbox(t, srv, fakeResolver{"api.example.test": {netip.MustParseAddr("127.0.0.1")}})
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, "GET "+srv.plain.URL+"/v1/")}}
	code := fmt.Sprintf(`
import urllib.request, urllib.error
base = %q
def attempt(url, **kw):
    try:
        urllib.request.urlopen(urllib.request.Request(url, **kw))
        print("allowed", url)
    except urllib.error.URLError as e:
        print(type(e.reason).__name__ + ":", e.reason)
print(urllib.request.urlopen(base + "/v1/ok").read().decode())
attempt("http://api.evil.com/")
attempt("https://api.evil.com/")
attempt(base + "/v2/x")
attempt(base + "/v1/x", data=b"x", method="POST")
attempt(base.replace("http://", "https://") + "/v1/x")
`, srv.plain.URL)
	out, res := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	host := strings.TrimPrefix(srv.plain.URL, "http://")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || lines[0] != `GET /v1/ok  body=""` {
		t.Fatalf("stdout:\n%s", out)
	}
	for _, l := range lines[1:3] {
		if !strings.HasPrefix(l, "PermissionError: network: api.evil.com is not in this run's allow-list (allowed: GET http://"+host+"/v1/)") {
			t.Errorf("refusal %q does not name the host and the rules", l)
		}
	}
	for i, what := range []string{"GET http://" + host + "/v2/x", "POST http://" + host + "/v1/x"} {
		want := "PermissionError: network: " + what + " is not in this run's allow-list (its rules for 127.0.0.1: GET http://" + host + "/v1/)"
		if lines[3+i] != want {
			t.Errorf("refusal\n %q\nwant\n %q", lines[3+i], want)
		}
	}
	if !strings.HasPrefix(lines[5], "PermissionError: network: ") || !strings.Contains(lines[5], "is not in this run's allow-list") {
		t.Errorf("https to an http-only rule: %q", lines[5])
	}
	var allowed, denied int
	for _, d := range res.Network {
		if d.Allowed {
			allowed++
		} else if strings.Contains(d.Reason, "not in this run's allow-list") {
			denied++
		}
	}
	if allowed != 1 || denied != 5 {
		t.Fatalf("decisions (want 1 allowed, 5 denied): %+v", res.Network)
	}
}

func TestNetworkRedirectsAreCheckedAgain(t *testing.T) {
	other := httptest.NewServer(echoHandler()) // loopback too, but no rule names it
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/to-evil", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://api.evil.com/steal", http.StatusFound)
	})
	mux.HandleFunc("/to-other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusFound)
	})
	mux.HandleFunc("/to-self", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/landed", http.StatusFound)
	})
	mux.Handle("/landed", echoHandler())
	srv := newNetServers(t, mux)
	s := netSandbox(t, srv, nil)
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}}
	code := fmt.Sprintf(`
import urllib.request, urllib.error
base = %q
print(urllib.request.urlopen(base + "/to-self").read().decode())
for path in ("/to-evil", "/to-other"):
    try:
        urllib.request.urlopen(base + path)
        print("followed", path)
    except urllib.error.URLError as e:
        print(e.reason)
`, srv.plain.URL)
	out, res := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	otherHost := strings.TrimPrefix(other.URL, "http://")
	if len(lines) != 3 || lines[0] != `GET /landed  body=""` ||
		!strings.HasPrefix(lines[1], "network: api.evil.com is not in this run's allow-list") ||
		lines[2] != "network: "+otherHost+" is not in this run's allow-list (its rules for 127.0.0.1: "+srv.plain.URL+")" {
		t.Fatalf("stdout:\n%s", out)
	}
	var redirects int
	for _, d := range res.Network {
		if d.Allowed && d.Status == http.StatusFound {
			redirects++
		}
	}
	if redirects != 3 {
		t.Fatalf("want the 3 redirects recorded as allowed 302s: %+v", res.Network)
	}
}

func TestNetworkResolverAnsweringInternalAddresses(t *testing.T) {
	srv := newNetServers(t, echoHandler())
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.plain.URL, "http://"))
	res := fakeResolver{
		"rebind.example.test":   {netip.MustParseAddr("127.0.0.1")},
		"private.example.test":  {netip.MustParseAddr("10.1.2.3")},
		"metadata.example.test": {netip.MustParseAddr("169.254.169.254")},
		"v6meta.example.test":   {netip.MustParseAddr("fd00:ec2::254")},
		"cgnat.example.test":    {netip.MustParseAddr("100.64.1.1")},
	}
	s := netSandbox(t, srv, res)
	pol := &airlock.NetworkPolicy{}
	for name := range res {
		pol.Rules = append(pol.Rules, rule(t, "http://"+name+":"+port))
	}
	code := fmt.Sprintf(`
import urllib.request, urllib.error
for name in ("rebind", "private", "metadata", "v6meta", "cgnat"):
    try:
        urllib.request.urlopen("http://%%s.example.test:%s/" %% name, timeout=5)
        print(name, "reached")
    except urllib.error.URLError as e:
        print(name, type(e.reason).__name__, e.reason)
`, port)
	out, r := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	for _, want := range []string{
		"rebind PermissionError network: rebind.example.test resolved to 127.0.0.1, a loopback address;",
		"private PermissionError network: private.example.test resolved to 10.1.2.3, a private address;",
		"metadata PermissionError network: metadata.example.test resolved to 169.254.169.254, a cloud metadata address;",
		"v6meta PermissionError network: v6meta.example.test resolved to fd00:ec2::254, a cloud metadata address;",
		"cgnat PermissionError network: cgnat.example.test resolved to 100.64.1.1, a carrier-grade NAT address;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, d := range r.Network {
		if d.Status != 0 || d.Address != "" || !strings.Contains(d.Reason, "resolved to") {
			t.Errorf("decision %+v: the request must be refused before any connection", d)
		}
	}
	// The audit has each decision, and the metadata service makes the
	// run suspicious even though it was refused.
	if got := reasons(r); got != "metadata_endpoint" || !hasEvent(r, airlock.AuditNetwork, "GET http://metadata.example.test:"+port+"/ allowed, then failed: network: metadata.example.test resolved to 169.254.169.254") {
		t.Errorf("reasons %q, audit %+v", got, r.Audit)
	}
}

func TestNetworkCapsAndDeadline(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := strings.Repeat("x", 64<<10)
		for range 64 { // 4 MiB
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.Handle("/", echoHandler())
	srv := newNetServers(t, mux)
	s := netSandbox(t, srv, nil)

	t.Run("response bytes", func(t *testing.T) {
		pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}, MaxResponseBytes: 1 << 20}
		code := fmt.Sprintf(`
import urllib.request
r = urllib.request.urlopen(%q)
try:
    data = r.read()
    print("read", len(data))
except OSError as e:
    print(type(e).__name__, e)
`, srv.plain.URL+"/big")
		out, res := mustNet(t, s, airlock.Request{Code: code, Network: pol})
		if !strings.Contains(out, "network: the responses passed this run's cap of 1048576 bytes") {
			t.Fatalf("stdout: %s", out)
		}
		if len(res.Network) != 1 || res.Network[0].ResponseBytes > 1<<20 {
			t.Fatalf("decisions: %+v", res.Network)
		}
	})
	t.Run("request count", func(t *testing.T) {
		pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}, MaxRequests: 3}
		code := fmt.Sprintf(`
import urllib.request, urllib.error
for i in range(5):
    try:
        urllib.request.urlopen(%q).read()
        print(i, "ok")
    except urllib.error.URLError as e:
        print(i, e.reason)
`, srv.plain.URL+"/n")
		out, _ := mustNet(t, s, airlock.Request{Code: code, Network: pol})
		want := "0 ok\n1 ok\n2 ok\n3 network: this run has made its 3 allowed requests\n4 network: this run has made its 3 allowed requests\n"
		if out != want {
			t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
		}
	})
	t.Run("request bytes", func(t *testing.T) {
		pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}, MaxRequestBytes: 100 << 10}
		code := fmt.Sprintf(`
import urllib.request, urllib.error
try:
    urllib.request.urlopen(urllib.request.Request(%q, data=b"y" * (1 << 20)))
    print("sent")
except (urllib.error.URLError, OSError) as e:
    print(getattr(e, "reason", e))
`, srv.plain.URL+"/up")
		out, _ := mustNet(t, s, airlock.Request{Code: code, Network: pol})
		if !strings.Contains(out, "network: the request is over this run's cap of") {
			t.Fatalf("stdout: %s", out)
		}
	})
	t.Run("network timeout", func(t *testing.T) {
		pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}, Timeout: time.Second}
		code := fmt.Sprintf(`
import urllib.request, urllib.error
try:
    urllib.request.urlopen(%q)
except (urllib.error.URLError, OSError) as e:
    e = getattr(e, "reason", e)
    print(type(e).__name__, e)
`, srv.plain.URL+"/slow")
		out, _ := mustNet(t, s, airlock.Request{Code: code, Network: pol})
		if !strings.HasPrefix(out, "TimeoutError network: the request to ") {
			t.Fatalf("stdout: %s", out)
		}
	})
	t.Run("run deadline", func(t *testing.T) {
		pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}}
		code := fmt.Sprintf(`
import urllib.request
urllib.request.urlopen(%q)
`, srv.plain.URL+"/slow")
		start := time.Now()
		res := runNet(t, s, airlock.Request{Code: code, Network: pol, Limits: airlock.Limits{Timeout: 3 * time.Second}})
		if res.Error == nil || res.Error.Kind != airlock.KindTimeout {
			t.Fatalf("want a timeout, got %v\n%s", res.Error, res.Stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the run took %v past its 3 s deadline", d)
		}
	})
}

func TestNetworkCredentialsStayOnTheHost(t *testing.T) {
	const secret = "Bearer sk-airlock-test-7f3a9c51e2"
	var mu sync.Mutex
	var got []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		// A careless API echoing the credential in its headers.
		w.Header().Set("Authorization", r.Header.Get("Authorization"))
		w.Header().Set("X-Debug", "auth was "+r.Header.Get("Authorization"))
		w.Header().Set("X-Fine", "kept")
		fmt.Fprint(w, "ok")
	})
	srv := newNetServers(t, h)
	s := netSandbox(t, srv, nil)
	r := rule(t, srv.tls.URL)
	r.Headers = map[string]string{"Authorization": secret}
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{r}}
	code := fmt.Sprintf(`
import os, urllib.request
secret_part = "sk-airlock-" + "test-7f3a9c51e2"
req = urllib.request.Request(%q, headers={"Authorization": "guest-chosen"})
with urllib.request.urlopen(req) as resp:
    headers = str(resp.headers)
    body = resp.read()
print("X-Fine: kept" in headers, body)
found = [k for k, v in os.environ.items() if secret_part in v or secret_part in k]
if secret_part in headers:
    found.append("response headers")
for root, dirs, files in os.walk("/"):
    for f in files:
        p = os.path.join(root, f)
        try:
            with open(p, "rb") as fh:
                if secret_part.encode() in fh.read():
                    found.append(p)
        except OSError:
            pass
print("found:", found)
`, srv.tls.URL+"/api")
	out, res := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	if out != "True b'ok'\nfound: []\n" {
		t.Fatalf("stdout:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != secret {
		t.Fatalf("the server got Authorization %q, want the rule's", got)
	}
	for _, d := range res.Network {
		if strings.Contains(fmt.Sprintf("%+v", d), "sk-airlock") {
			t.Fatalf("a decision shows the credential: %+v", d)
		}
	}
	if strings.Contains(string(res.Stdout)+string(res.Stderr), "sk-airlock") {
		t.Fatal("the output shows the credential")
	}
}

func TestNetworkRequestsAndHttpx(t *testing.T) {
	needNetWheels(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"method": %q, "body": %q, "ua": %q}`, r.Method, body, r.Header.Get("User-Agent"))
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		for i := range 5 {
			fmt.Fprintf(w, "line %d\n", i)
			f.Flush()
		}
	})
	srv := newNetServers(t, mux)
	s := netSandbox(t, srv, nil)
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL), rule(t, srv.tls.URL)}}
	code := fmt.Sprintf(`
import asyncio, requests, httpx
plain, tls = %q, %q
r = requests.post(tls + "/json", json={"a": 1})
print("requests", r.status_code, r.json()["method"], r.json()["body"], r.json()["ua"].split("/")[0])
with requests.get(plain + "/stream", stream=True) as r:
    print("requests stream", [l for l in r.iter_lines()])
try:
    requests.get("https://api.evil.com/")
except requests.exceptions.ConnectionError as e:
    print("requests refused:", "network: api.evil.com is not in this run's allow-list" in str(e))
print("httpx", httpx.get(tls + "/json").json()["method"])
with httpx.stream("GET", plain + "/stream") as r:
    print("httpx stream", list(r.iter_lines()))
try:
    httpx.get("https://api.evil.com/")
except httpx.ConnectError as e:
    print("httpx refused:", str(e).startswith("network: api.evil.com is not in this run's allow-list"))
async def main():
    async with httpx.AsyncClient() as c:
        r = await c.put(tls + "/json", content=b"async-body")
        print("httpx async", r.json()["method"], r.json()["body"])
        async with c.stream("GET", plain + "/stream") as r:
            print("httpx async stream", [l async for l in r.aiter_lines()])
        try:
            await c.get("https://api.evil.com/")
        except httpx.ConnectError as e:
            print("httpx async refused:", "allow-list" in str(e))
asyncio.run(main())
`, srv.plain.URL, srv.tls.URL)
	out, _ := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	lines := "line 0', 'line 1', 'line 2', 'line 3', 'line 4'"
	want := "requests 200 POST {\"a\": 1} python-requests\n" +
		"requests stream [b'" + strings.ReplaceAll(lines, "', '", "', b'") + "]\n" +
		"requests refused: True\n" +
		"httpx GET\n" +
		"httpx stream ['" + lines + "]\n" +
		"httpx refused: True\n" +
		"httpx async PUT async-body\n" +
		"httpx async stream ['" + lines + "]\n" +
		"httpx async refused: True\n"
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestNetworkRawSocketsStayRefused(t *testing.T) {
	srv := newNetServers(t, echoHandler())
	s := netSandbox(t, srv, nil)
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.plain.URL)}}
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.plain.URL, "http://"))
	code := fmt.Sprintf(`
import socket, ssl
for attempt in (lambda: socket.socket().connect((%q, %s)),
                lambda: socket.create_connection((%q, %s)),
                lambda: socket.getaddrinfo("example.com", 80)):
    try:
        attempt()
        print("connected")
    except OSError as e:
        print(type(e).__name__, e)
try:
    ssl.create_default_context().wrap_socket(object(), server_hostname="x")
except ssl.SSLError as e:
    print("SSLError", "no sockets" in str(e))
`, host, port, host, port)
	out, _ := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[3] != "SSLError True" {
		t.Fatalf("stdout:\n%s", out)
	}
	for _, l := range lines[:3] {
		if !strings.HasPrefix(l, "PermissionError airlock: raw sockets and DNS are not available in this sandbox, even with a network allow-list") {
			t.Errorf("%q: want the raw-socket refusal", l)
		}
	}
	// Without a policy there is no network at all, as before.
	res := runNet(t, s, airlock.Request{Code: fmt.Sprintf(`
import urllib.request
urllib.request.urlopen(%q)
`, srv.plain.URL)})
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "network access is disabled in this sandbox") || res.Network != nil {
		t.Fatalf("a run without a policy reached the network: exit %d\n%s", res.ExitCode, res.Stderr)
	}
}

func TestNetworkConcurrentRunsAreIsolated(t *testing.T) {
	const n = 6
	var servers []*httptest.Server
	for i := range n {
		i := i
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "server %d", i)
		}))
		t.Cleanup(ts.Close)
		servers = append(servers, ts)
	}
	s := netSandbox(t, nil, nil)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, theirs := servers[i].URL, servers[(i+1)%n].URL
			code := fmt.Sprintf(`
import urllib.request, urllib.error
print(urllib.request.urlopen(%q).read().decode())
try:
    urllib.request.urlopen(%q)
    print("reached the other run's server")
except urllib.error.URLError as e:
    print("refused" if "allow-list" in str(e.reason) else e.reason)
`, mine, theirs)
			r, err := airlock.ParseNetworkRule(mine, nil)
			if err != nil {
				errs <- err
				return
			}
			res, err := s.Run(context.Background(), airlock.Request{Code: code, Network: &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{r}}, Limits: airlock.Limits{Timeout: 60 * time.Second}})
			if err != nil {
				errs <- fmt.Errorf("run %d: %w\n%s", i, err, res.Stderr)
				return
			}
			if want := fmt.Sprintf("server %d\nrefused\n", i); string(res.Stdout) != want {
				errs <- fmt.Errorf("run %d: stdout %q, want %q (stderr %s)", i, res.Stdout, want, res.Stderr)
			}
			if len(res.Network) != 2 || !res.Network[0].Allowed || res.Network[1].Allowed {
				errs <- fmt.Errorf("run %d: decisions %+v", i, res.Network)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNetworkInvalidPolicy(t *testing.T) {
	s := netSandbox(t, nil, nil)
	res := runNet(t, s, airlock.Request{Code: "pass", Network: &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{{Scheme: "ftp", Host: "x"}}}})
	if res.Error == nil || res.Error.Kind != airlock.KindInvalidRequest || !errors.Is(res.Error, airlock.ErrInvalidNetworkRule) {
		t.Fatalf("want an invalid request naming the rule, got %v", res.Error)
	}
	if _, err := airlock.New(context.Background(), airlock.WithNetwork(airlock.NetworkPolicy{MaxRequests: -1})); err == nil {
		t.Fatal("New took a negative cap")
	}
}

// WithNetwork is the default of runs and session calls; a session keeps
// its interpreter (and the patched libraries) from call to call while
// each call gets its own device and records.
func TestSessionNetworkWithTheSandboxPolicy(t *testing.T) {
	needNetWheels(t)
	srv := newNetServers(t, echoHandler())
	pol := airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, srv.tls.URL)}}
	s := netSandbox(t, srv, nil, airlock.WithNetwork(pol))
	sess, err := s.NewSession(context.Background(), airlock.SessionOptions{Limits: airlock.Limits{Timeout: 60 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	for i, path := range []string{"/one", "/two"} {
		code := fmt.Sprintf(`
import requests
print(requests.get(%q).text)
`, srv.tls.URL+path)
		res, err := sess.Run(context.Background(), airlock.Request{Code: code})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("call %d: %v\n%s", i, err, res.Stderr)
		}
		if want := "GET " + path + "  body=\"\"\n"; string(res.Stdout) != want || res.RolledBack {
			t.Fatalf("call %d: %q rolled back %v, want %q", i, res.Stdout, res.RolledBack, want)
		}
		if len(res.Network) != 1 || !res.Network[0].Allowed {
			t.Fatalf("call %d: decisions %+v", i, res.Network)
		}
	}
	// A run's own empty policy overrides the Sandbox's.
	res := runNet(t, s, airlock.Request{Code: fmt.Sprintf(`
import urllib.request, urllib.error
try:
    urllib.request.urlopen(%q)
except urllib.error.URLError as e:
    print(e.reason)
`, srv.tls.URL), Network: &airlock.NetworkPolicy{}})
	if !strings.HasPrefix(string(res.Stdout), "network: 127.0.0.1 is not in this run's allow-list, which is empty") {
		t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
	}
}

// Certificates are checked on the host whatever the guest's context
// says: an unverified context does not reach a server the host does not
// trust.
func TestNetworkTLSIsVerifiedOnTheHost(t *testing.T) {
	untrusted := httptest.NewTLSServer(echoHandler())
	defer untrusted.Close()
	s := netSandbox(t, nil, nil) // the system's roots: not httptest's CA
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{rule(t, untrusted.URL)}}
	code := fmt.Sprintf(`
import ssl, urllib.request, urllib.error
try:
    urllib.request.urlopen(%q, context=ssl._create_unverified_context())
    print("reached")
except urllib.error.URLError as e:
    print(type(e.reason).__name__, e.reason)
`, untrusted.URL+"/")
	out, res := mustNet(t, s, airlock.Request{Code: code, Network: pol})
	if !strings.HasPrefix(out, "OSError network: ") || !strings.Contains(out, "certificate") {
		t.Fatalf("stdout: %s", out)
	}
	if len(res.Network) != 1 || !res.Network[0].Allowed || res.Network[0].Status != 0 || !strings.Contains(res.Network[0].Reason, "certificate") {
		t.Fatalf("decisions: %+v", res.Network)
	}
}
