package egress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// readings are the ways an upstream server may read a request path: as
// sent, percent-decoded once or until nothing changes, with backslashes
// as separators, ";parameters" dropped from segments (as Tomcat does),
// and then dot segments resolved and empty ones collapsed. Each is a list
// of segments.
func readings(raw string) [][]string {
	decodeOnce := func(s string) string {
		if d, err := url.PathUnescape(s); err == nil {
			return d
		}
		return s
	}
	decodeAll := func(s string) string {
		for range 8 {
			d := decodeOnce(s)
			if d == s {
				break
			}
			s = d
		}
		return s
	}
	var out [][]string
	for _, decode := range []func(string) string{func(s string) string { return s }, decodeOnce, decodeAll} {
		for _, backslash := range []bool{false, true} {
			for _, params := range []bool{false, true} {
				p := decode(raw)
				if backslash {
					p = strings.ReplaceAll(p, `\`, "/")
				}
				var segs []string
				for _, s := range strings.Split(p, "/")[1:] {
					if params {
						s, _, _ = strings.Cut(s, ";")
					}
					switch s {
					case "", ".":
					case "..":
						if len(segs) > 0 {
							segs = segs[:len(segs)-1]
						}
					default:
						segs = append(segs, s)
					}
				}
				out = append(out, segs)
			}
		}
	}
	return out
}

// under tells whether segs lie under prefix, segment by segment: a
// prefix ending in "/" needs a segment after its own.
func under(segs []string, prefix string) bool {
	ps := strings.Split(strings.TrimPrefix(prefix, "/"), "/")
	open := ps[len(ps)-1] == ""
	if open {
		ps = ps[:len(ps)-1]
	}
	if len(segs) < len(ps) {
		return false
	}
	for i, p := range ps {
		if segs[i] != p {
			return false
		}
	}
	return true
}

var pathPieces = []string{"api", "v1", "v10", "admin", "x", "", ".", "..", "%2e", "%2E", "%2e%2e", ".%2E", "%2E.", "%2f", "%2F",
	"a%2fb", "..%2f", "%2f..", "%5c", "%5C", `\`, `..\`, `\..`, "%252e%252e", "%252f", "..;", ".;x", ";", "v1;x", "%41", "%61pi",
	"%c0%ae%c0%ae", "..%00", "%2e%2e%2f", "%2e%2e;", ".%2e;a", "%2e%2e%5c", "api%2fv1", "%20", "~", "%7e"}

func genPath(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(10) < 7 {
		b.WriteString("/api/v1")
	}
	for range 1 + r.IntN(5) {
		b.WriteString("/" + pathPieces[r.IntN(len(pathPieces))])
	}
	return b.String()
}

// A rule's path prefix holds for every reading of the path an upstream
// may make: over generated paths with encoded dots and separators, dot
// segments, backslashes, repeated separators and parameters, each request
// is refused, or the path the loopback server received lies under the
// prefix however it is read. Plain paths under the prefix still pass.
func TestPathPrefixHoldsForEveryReading(t *testing.T) {
	var mu sync.Mutex
	var received string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received, _, _ = strings.Cut(r.RequestURI, "?")
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer ts.Close()
	host, port := hostPortOf(t, ts.URL)
	g := NewGate(Env{})
	defer g.Close()
	for _, prefix := range []string{"/api/v1", "/api/v1/"} {
		d, err := NewDevice(context.Background(), g, Policy{Rules: []Rule{mustRule(t, fmt.Sprintf("http://%s:%d%s", host, port, prefix))}, MaxRequests: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		c := client{t, d}
		fetch := func(p string) (string, bool) {
			mu.Lock()
			received = ""
			mu.Unlock()
			out, e := c.fetch(host, port, false, "GET "+p+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if e != nil {
				return fmt.Sprint(e["message"]), false
			}
			if !strings.HasSuffix(out, "ok") {
				t.Fatalf("%s: answer %q", p, out)
			}
			mu.Lock()
			defer mu.Unlock()
			return received, true
		}
		for _, plain := range []string{"/api/v1/x", "/api/v1/a%20b", "/api/v1/%41/b", "/api/v1/a%2Fb", "/api/v1/x;y"} {
			if _, ok := fetch(plain); !ok {
				t.Errorf("%s: a plain path under %s refused", plain, prefix)
			}
		}
		for _, bad := range []string{"/api/v1/../admin", "/api/v1/%2e%2e/admin", "/api/v1/%2E%2e/admin", "/api/v1/..%2fadmin", "/api/v1%2f..%2fadmin",
			`/api/v1/..\admin`, "/api/v1/%5c..%5cadmin", "/api/v1/..;/admin", "/api/v1/%252e%252e/admin", "/api%2fv1/x", "/api/v1/./../admin"} {
			if got, ok := fetch(bad); ok {
				t.Errorf("%s under %s reached the server as %q", bad, prefix, got)
			} else if !strings.Contains(got, "network:") {
				t.Errorf("%s: refusal %q names no reason", bad, got)
			}
		}
		r := rand.New(rand.NewPCG(1, uint64(len(prefix))))
		allowed := 0
		const n = 3000
		for range n {
			p := genPath(r)
			got, ok := fetch(p)
			if !ok {
				continue
			}
			allowed++
			// Sent as written, but for what Go escapes (a backslash, a
			// space): then as escaped, and checked in that form.
			if got != p && !strings.ContainsAny(p, `\ `) {
				t.Errorf("sent %q, the server received %q", p, got)
			}
			for _, segs := range readings(got) {
				if !under(segs, prefix) {
					t.Fatalf("%q (received %q) reads as /%s, outside %s", p, got, strings.Join(segs, "/"), prefix)
				}
			}
		}
		t.Logf("%s: %d of %d generated paths allowed", prefix, allowed, n)
		if allowed < n/10 {
			t.Errorf("only %d of %d generated paths allowed: the check refuses too much to be tested", allowed, n)
		}
		d.Close()
	}
}
