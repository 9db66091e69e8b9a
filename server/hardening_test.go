package server

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialFrom connects to host from the loopback address local (127.0.0.0/8
// is all loopback on Linux), so that tests can be several clients.
func dialFrom(t *testing.T, local, host string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", host)
	if err != nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	return c
}

// statusOf reads the status line of the answer on c, within d; 0 when the
// connection closed or nothing came.
func statusOf(c net.Conn, d time.Duration) (int, string) {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, string(body)
}

// closedWithin tells whether the server closes c within d (a read ends in
// EOF or a reset, not a timeout).
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil || !isTimeout(err)
}

// trickle sends a POST announcing a body of size bytes, then one byte each
// gap, until the server answers; it returns the status and how long that
// took.
func trickle(t *testing.T, local, host string, size int, gap time.Duration) (int, time.Duration) {
	c := dialFrom(t, local, host)
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"code\": \"", size)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(gap):
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	status, _ := statusOf(c, 30*time.Second)
	close(stop)
	return status, time.Since(start)
}

// Ten connections trickling bodies (Content-Length 100000, a byte every
// 100 ms), reconnecting as soon as they are dropped, no longer deny runs to
// other clients: each is answered 408 about BodyTimeout after it started
// (or 429 past its address's share of the bodies being read), and every
// run another client sends meanwhile is answered 200. (Before, bodies were
// capped at Concurrency + Queue with a 60 s deadline each: ten trickles
// made every other POST /v1/run answer 429 for as long as they went on.)
func TestSlowUploadsDoNotDenyRuns(t *testing.T) {
	url, s, _ := start(t, Config{Concurrency: 2, Queue: 8, BodyTimeout: time.Second})
	host := strings.TrimPrefix(url, "http://")
	stop := time.Now().Add(4 * time.Second)
	var mu sync.Mutex
	outcomes := map[int]int{}
	var slowest time.Duration
	var wg sync.WaitGroup
	for i := range 10 {
		local := fmt.Sprintf("127.0.0.%d", 2+i%2) // two attacking addresses
		wg.Go(func() {
			for time.Now().Before(stop) {
				status, took := trickle(t, local, host, 100000, 100*time.Millisecond)
				mu.Lock()
				outcomes[status]++
				slowest = max(slowest, took)
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the trickles hold their bodies
	ok, runs := 0, 0
	for time.Now().Before(stop) {
		r := post(t, url+"/v1/run", "", runJSON(t, "print('mine')", RunLimits{}))
		runs++
		if r.status == 200 {
			ok++
		} else {
			t.Errorf("a run during the trickles: %d %s", r.status, r.body)
		}
	}
	wg.Wait()
	t.Logf("%d runs answered 200 of %d; trickles answered %v, the slowest after %v", ok, runs, outcomes, slowest.Round(time.Millisecond))
	if runs < 5 {
		t.Errorf("only %d runs in 4 s", runs)
	}
	if outcomes[http.StatusRequestTimeout] == 0 {
		t.Error("no trickle was answered 408")
	}
	for status := range outcomes {
		if status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
			t.Errorf("a trickle answered %d", status)
		}
	}
	if slowest > 4*time.Second {
		t.Errorf("a trickle held its body %v (BodyTimeout 1 s)", slowest)
	}
	if n := s.bodies.count(); n != 0 {
		t.Errorf("%d bodies still counted as being read", n)
	}
}

// A body slower than MinBodyRate is answered 408 (kind body_timeout) and
// its connection closed; a large body sent at speed is not affected.
func TestSlowBodyIs408(t *testing.T) {
	url, _, _ := start(t, Config{BodyTimeout: time.Second})
	host := strings.TrimPrefix(url, "http://")
	c := dialFrom(t, "127.0.0.1", host)
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"code\": \"")
	go func() {
		for range 50 {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte(strings.Repeat("x", 100))); err != nil { // 1 KB/s
				return
			}
		}
	}()
	status, body := statusOf(c, 10*time.Second)
	if took := time.Since(start); status != http.StatusRequestTimeout || !strings.Contains(body, "body_timeout") || took > 3*time.Second {
		t.Fatalf("after %v: %d %s", took, status, body)
	}
	if !closedWithin(c, 3*time.Second) {
		t.Error("the connection stayed open after the 408")
	}
	// 8 MiB of files, sent at loopback speed, has all the time it needs.
	data := base64.StdEncoding.EncodeToString(make([]byte, 6<<20))
	r := post(t, url+"/v1/run", "", `{"code": "import os; print(os.path.getsize('in.bin'))", "files": {"in.bin": "`+data+`"}}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"stdout":"6291456\n"`) {
		t.Fatalf("a large body at speed: %d %.200s", r.status, r.body)
	}
}

// Kept-alive connections idle past IdleTimeout are closed by the server.
// (Before, http.Server had only ReadHeaderTimeout: 300 connections that
// made one GET /healthz were all still open 65 s later.)
func TestIdleConnectionsAreClosed(t *testing.T) {
	url, s, _ := start(t, Config{IdleTimeout: time.Second, MaxConnsPerClient: 1000})
	host := strings.TrimPrefix(url, "http://")
	const n = 300
	conns := make([]net.Conn, n)
	for i := range conns {
		c := dialFrom(t, "127.0.0.1", host)
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		conns[i] = c
	}
	for i, c := range conns {
		if status, body := statusOf(c, 10*time.Second); status != 200 {
			t.Fatalf("conn %d: %d %s", i, status, body)
		}
	}
	start := time.Now()
	var open atomic.Int32
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			if !closedWithin(c, 5*time.Second) {
				open.Add(1)
			}
		})
	}
	wg.Wait()
	if open.Load() > 0 {
		t.Fatalf("%d of %d idle connections still open %v after their request", open.Load(), n, time.Since(start))
	}
	t.Logf("%d idle connections closed %v after their requests (IdleTimeout 1 s)", n, time.Since(start).Round(10*time.Millisecond))
	for deadline := time.Now().Add(2 * time.Second); s.conns.count() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if k := s.conns.count(); k != 0 {
		t.Errorf("%d connections still counted open", k)
	}
}

// Headers over MaxHeaderBytes are answered 431; headers that take longer
// than ReadHeaderTimeout lose the connection.
func TestHeaderLimits(t *testing.T) {
	url, _, _ := start(t, Config{ReadHeaderTimeout: time.Second})
	host := strings.TrimPrefix(url, "http://")
	c := dialFrom(t, "127.0.0.1", host)
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 100<<10))
	if status, body := statusOf(c, 5*time.Second); status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KiB of headers: %d %s", status, body)
	}
	slow := dialFrom(t, "127.0.0.1", host)
	defer slow.Close()
	start := time.Now()
	fmt.Fprintf(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	if !closedWithin(slow, 5*time.Second) {
		t.Fatal("a connection whose headers never end stayed open")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("closed after %v (ReadHeaderTimeout 1 s)", took)
	}
}

// Connections past MaxConnsPerClient from one address, or past MaxConns in
// all, are answered 503 and closed; others' connections, and later ones
// once some closed, are served.
func TestConnectionCaps(t *testing.T) {
	url, s, _ := start(t, Config{MaxConns: 12, MaxConnsPerClient: 4})
	host := strings.TrimPrefix(url, "http://")
	open := func(local string, n int) (held []net.Conn, refused int) {
		t.Helper()
		for range n {
			c := dialFrom(t, local, host)
			t.Cleanup(func() { c.Close() })
			// A refused connection is answered at once; a held one hears
			// nothing until it asks.
			if status, _ := statusOf(c, 300*time.Millisecond); status == http.StatusServiceUnavailable {
				refused++
				c.Close()
				continue
			}
			held = append(held, c)
		}
		return held, refused
	}
	first, refused := open("127.0.0.2", 6)
	if len(first) != 4 || refused != 2 {
		t.Fatalf("6 from one address: %d held, %d refused; want 4, 2", len(first), refused)
	}
	if _, refused := open("127.0.0.3", 4); refused != 0 {
		t.Fatalf("another address refused %d", refused)
	}
	if _, refused := open("127.0.0.4", 4); refused != 0 {
		t.Fatalf("a third address refused %d", refused)
	}
	if _, refused := open("127.0.0.5", 1); refused != 1 {
		t.Fatal("a 13th connection was held (MaxConns 12)")
	}
	for _, c := range first {
		c.Close()
	}
	// The server counts a connection out when it sees it closed: until
	// then a new one may still be refused.
	var r response
	retries := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r = tryGet(url + "/healthz"); r.status == 200 {
			break
		}
		retries++
	}
	if r.status != 200 {
		t.Fatalf("after four closed: %d %s", r.status, r.body)
	}
	if n := metricValue(t, url, `airlock_rejected_requests_total{reason="too_many_connections"}`); n < 3 || n > float64(3+retries) {
		t.Errorf("/metrics counts %v refused connections; 3 were, and %d retries at most", n, retries)
	}
	if n := s.conns.count(); n > 8+1 {
		t.Errorf("%d connections counted open; 8 held, plus the one asking", n)
	}
}

// tryGet is a GET on a connection of its own, whatever the outcome.
func tryGet(url string) response {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset") {
			return response{}
		}
		return response{body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// A refused body leaves the connection usable: the read past a body that
// was all there must not fail on a deadline already passed, as its error
// cancels every later request on the connection (a run after a 400 on a
// kept-alive connection was "cancelled" at once).
func TestRefusedBodyLeavesTheConnectionUsable(t *testing.T) {
	url, _, _ := start(t, Config{})
	c := dialFrom(t, "127.0.0.1", strings.TrimPrefix(url, "http://"))
	defer c.Close()
	br := bufio.NewReader(c)
	send := func(body string) (int, string) {
		t.Helper()
		fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for i := range 20 {
		if status, body := send(`{"code": "pass", "no_such_field": true}`); status != 400 {
			t.Fatalf("round %d: the bad body: %d %s", i, status, body)
		}
		if status, body := send(`{"code": "import time\ntime.sleep(0.01)\nprint('still here')"}`); status != 200 || !strings.Contains(body, `"stdout":"still here\n"`) {
			t.Fatalf("round %d: a run after a 400 on the same connection: %d %s", i, status, body)
		}
	}
}
