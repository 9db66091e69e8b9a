package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-sandbox/airlock/internal/frame"
)

// DevicePath is where a run's network device appears in the guest.
const DevicePath = "/dev/airlock-net"

// Protocol bounds.
const (
	// MaxFrame caps a request frame's payload: a JSON line and up to
	// MaxChunk bytes of data.
	MaxChunk = 256 << 10
	MaxFrame = MaxChunk + 4<<10
	// MaxConns caps the connections a run has open at once.
	MaxConns = 16
	// maxHead caps a request's head (request line and headers).
	maxHead = 64 << 10
	// pipeLimit is what each direction of a connection buffers.
	pipeLimit = 256 << 10
	// maxRecords bounds the decisions kept beyond MaxRequests.
	extraRecords = 64
)

// Decision records what the host did with one attempt of the guest's.
type Decision struct {
	Allowed bool
	// Method and URL are the request's (URL without its query, which
	// may carry secrets); a refused connection has no method.
	Method string
	URL    string
	// Rule is the rule that allowed it, as ParseRule reads it.
	Rule string
	// Reason is a refusal's message, or the error that ended an allowed
	// request.
	Reason string
	// Address is the address dialled, ip:port.
	Address string
	Status  int
	// RequestBytes and ResponseBytes are body bytes.
	RequestBytes  int64
	ResponseBytes int64
	Duration      time.Duration
}

// Device is one run's network: the guest's end of the protocol, the
// run's policy, its connections and its records. It implements the
// wasi.Device methods; Close ends it.
//
// The guest writes a request frame: 8 hex digits giving the payload's
// length, then the payload: one line of JSON, "\n", and data. Ops:
//
//	{"op":"connect","host":H,"port":P}  -> {"id":N}
//	{"op":"tls","id":N}                 -> {}      (the connection is https)
//	{"op":"send","id":N} DATA           -> {"n":LEN}
//	{"op":"recv","id":N,"max":K,"timeout":SECONDS} -> {} DATA (none: end)
//	{"op":"close","id":N}               -> {}
//
// The response frame that the following reads return is the same shape,
// its JSON {"ok":{...}} or {"error":{"kind":K,"message":M}}; kinds are
// denied, timeout, refused, reset, dns, closed, invalid and io. What a
// connection carries is HTTP/1.1, which the host parses (net/http),
// checks against the policy and sends with its Gate; the answer comes
// back as HTTP/1.1 with Connection: close. Nothing the guest writes
// makes the device fail: bad input gets an invalid error.
type Device struct {
	gate   *Gate
	policy Policy
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	frames frame.Conn // the framing (internal/frame)
	resp   []byte     // the answer handle is building, unframed

	conns  map[int]*conn
	nextID int

	requests  atomic.Int64
	respBytes atomic.Int64

	recMu   sync.Mutex
	records []Decision
	dropped int
}

// NewDevice makes a run's device. ctx bounds every request (the run's
// lifetime); Close ends them all.
func NewDevice(ctx context.Context, g *Gate, p Policy) (*Device, error) {
	p, err := p.Validate()
	if err != nil {
		return nil, err
	}
	d := &Device{gate: g, policy: p.WithDefaults(), conns: map[int]*conn{}}
	d.frames = frame.Conn{
		Max: MaxFrame,
		Handle: func(ctx context.Context, payload []byte) []byte {
			d.resp = d.resp[:0]
			d.handle(ctx, payload)
			return d.resp
		},
		Fail: func(msg string) []byte {
			d.fail("invalid", "network: "+msg)
			return d.resp
		},
	}
	d.ctx, d.cancel = context.WithCancel(ctx)
	return d, nil
}

// Close ends the run's connections and waits (briefly) for their
// goroutines. Decisions after Close are final.
func (d *Device) Close() {
	d.cancel()
	for id, c := range d.conns {
		c.shut()
		delete(d.conns, id)
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// Decisions are the run's records, in order.
func (d *Device) Decisions() []Decision {
	d.recMu.Lock()
	defer d.recMu.Unlock()
	return append([]Decision(nil), d.records...)
}

// Dropped counts decisions not kept (past the cap on records).
func (d *Device) Dropped() int {
	d.recMu.Lock()
	defer d.recMu.Unlock()
	return d.dropped
}

func (d *Device) record(r Decision) int {
	d.recMu.Lock()
	defer d.recMu.Unlock()
	if len(d.records) >= d.policy.MaxRequests+extraRecords {
		d.dropped++
		return -1
	}
	d.records = append(d.records, r)
	return len(d.records) - 1
}

func (d *Device) update(i int, f func(*Decision)) {
	if i < 0 {
		return
	}
	d.recMu.Lock()
	f(&d.records[i])
	d.recMu.Unlock()
}

// Write takes request frames; it never fails.
func (d *Device) Write(ctx context.Context, p []byte) (int, error) { return d.frames.Write(ctx, p) }

// Read returns response bytes; 0 (end of file) when none is pending.
func (d *Device) Read(ctx context.Context, p []byte) (int, error) { return d.frames.Read(ctx, p) }

type op struct {
	Op      string   `json:"op"`
	ID      int      `json:"id"`
	Host    string   `json:"host"`
	Port    int      `json:"port"`
	Max     int      `json:"max"`
	Timeout *float64 `json:"timeout"`
}

// guestError is an error with the kind the guest maps to an exception.
type guestError struct{ kind, msg string }

func (e *guestError) Error() string { return e.msg }

func (d *Device) handle(ctx context.Context, frame []byte) {
	line, data, ok := bytes.Cut(frame, []byte("\n"))
	var o op
	if !ok || json.Unmarshal(line, &o) != nil {
		d.fail("invalid", "network: malformed frame: a JSON line, then data")
		return
	}
	if ctx.Err() != nil {
		d.fail("timeout", "network: the run's deadline has passed")
		return
	}
	switch o.Op {
	case "connect":
		d.connect(o)
		return
	}
	c := d.conns[o.ID]
	if c == nil {
		d.fail("closed", fmt.Sprintf("network: no open connection %d", o.ID))
		return
	}
	switch o.Op {
	case "tls":
		if c.started {
			d.fail("invalid", "network: TLS must start before the first request")
			return
		}
		c.tls = true
		d.ok(nil, nil)
	case "send":
		c.start(d)
		timeout := seconds(o.Timeout)
		if err := c.decision(); err != nil {
			d.failErr(c, err)
			return
		}
		if _, err := c.in.write(ctx, data, timeout); err != nil {
			d.failErr(c, err)
			return
		}
		// A refusal or a failed connection surfaces here, in the
		// library's send (urllib's URLError, say), once the host has
		// what it needs to decide.
		if err := c.awaitDecision(ctx, timeout); err != nil {
			d.failErr(c, err)
			return
		}
		d.ok(map[string]int{"n": len(data)}, nil)
	case "recv":
		c.start(d)
		size := min(max(o.Max, 1), MaxChunk)
		if cap(c.rbuf) < size {
			c.rbuf = make([]byte, size)
		}
		n, err := c.out.read(ctx, c.rbuf[:size], seconds(o.Timeout))
		if err == io.EOF {
			d.ok(nil, nil)
			return
		}
		if err != nil {
			d.failErr(c, err)
			return
		}
		d.ok(nil, c.rbuf[:n])
	case "close":
		c.shut()
		delete(d.conns, o.ID)
		d.ok(nil, nil)
	default:
		d.fail("invalid", fmt.Sprintf("network: unknown op %q", clip(o.Op)))
	}
}

func seconds(t *float64) time.Duration {
	if t == nil || *t <= 0 || *t > 1e6 {
		return 0
	}
	return time.Duration(*t * float64(time.Second))
}

// connect opens a connection the guest will speak HTTP on; only the
// endpoint is checked here (the request, once read, is checked in full).
func (d *Device) connect(o op) {
	host, err := canonicalHost(o.Host, false)
	if err != nil || o.Port < 1 || o.Port > 65535 {
		d.fail("invalid", fmt.Sprintf("network: cannot connect to %q port %d: not a host name or address", clip(o.Host), o.Port))
		return
	}
	u := "//" + hostPort(host, o.Port)
	if d.requests.Load() >= int64(d.policy.MaxRequests) {
		d.deny(Decision{URL: u}, "network: this run has made its %d allowed requests", d.policy.MaxRequests)
		return
	}
	if !d.endpointAllowed(host, o.Port) {
		d.requests.Add(1) // a refused connection counts as its request would
		d.deny(Decision{URL: u}, "%s", d.notAllowed(host, hostPort(host, o.Port)))
		return
	}
	if len(d.conns) >= MaxConns {
		d.fail("io", fmt.Sprintf("network: this run has %d connections open, the most it may; close responses when done (a with block, response.close())", MaxConns))
		return
	}
	d.nextID++
	c := &conn{id: d.nextID, host: host, port: o.Port, in: newPipe(pipeLimit), out: newPipe(pipeLimit), decided: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(d.ctx)
	d.conns[c.id] = c
	d.ok(map[string]int{"id": c.id}, nil)
}

func (d *Device) endpointAllowed(host string, port int) bool {
	for _, r := range d.policy.Rules {
		if r.Port == port && matchHost(r.Host, host) {
			return true
		}
	}
	return false
}

// notAllowed is the message for what no rule allows; what names it.
func (d *Device) notAllowed(host, what string) string {
	var near []string
	for _, r := range d.policy.Rules {
		if matchHost(r.Host, host) {
			near = append(near, r.String())
		}
	}
	if len(near) > 0 {
		return fmt.Sprintf("network: %s is not in this run's allow-list (its rules for %s: %s)", what, host, strings.Join(near, ", "))
	}
	if len(d.policy.Rules) == 0 {
		return fmt.Sprintf("network: %s is not in this run's allow-list, which is empty", host)
	}
	return fmt.Sprintf("network: %s is not in this run's allow-list (allowed: %s)", host, d.policy.describe())
}

func (d *Device) deny(r Decision, format string, args ...any) {
	r.Reason = fmt.Sprintf(format, args...)
	d.record(r)
	d.fail("denied", r.Reason)
}

func (d *Device) ok(v any, data []byte) {
	if v == nil {
		v = struct{}{}
	}
	b, _ := json.Marshal(map[string]any{"ok": v})
	d.respond(b, data)
}

func (d *Device) fail(kind, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"kind": kind, "message": msg}})
	d.respond(b, nil)
}

// failErr reports a connection's error with the kind that fits it.
func (d *Device) failErr(c *conn, err error) {
	var ge *guestError
	var dns *net.DNSError
	switch {
	case errors.As(err, &ge):
		d.fail(ge.kind, ge.msg)
	case errors.Is(err, errTimeout):
		d.fail("timeout", "network: timed out (the socket's timeout)")
	case errors.Is(err, context.DeadlineExceeded):
		d.fail("timeout", "network: the run's deadline passed")
	case errors.Is(err, context.Canceled):
		d.fail("closed", "network: the connection was closed")
	case errors.Is(err, io.ErrClosedPipe):
		d.fail("reset", fmt.Sprintf("network: the host closed the connection to %s", hostPort(c.host, c.port)))
	case errors.As(err, &dns):
		d.fail("dns", err.Error())
	default:
		d.fail("io", err.Error())
	}
}

func (d *Device) respond(js, data []byte) {
	d.resp = append(d.resp[:0], js...)
	d.resp = append(d.resp, '\n')
	d.resp = append(d.resp, data...)
}

func clip(s string) string {
	if len(s) <= 200 {
		return s
	}
	return strings.ToValidUTF8(s[:200], "") + "..."
}

// conn is one guest connection: bytes in (the request), bytes out (the
// response), and the goroutine between them.
type conn struct {
	id      int
	host    string
	port    int
	tls     bool
	started bool
	in, out *pipe
	rbuf    []byte
	ctx     context.Context
	cancel  context.CancelFunc

	// decided is closed once the request is refused, failed to connect
	// or has its connection; decideErr is why it failed.
	decideOnce sync.Once
	decided    chan struct{}
	decideErr  error
}

func (c *conn) decide(err error) {
	c.decideOnce.Do(func() {
		c.decideErr = err
		close(c.decided)
	})
}

// decision is the request's failure once decided, else nil.
func (c *conn) decision() error {
	select {
	case <-c.decided:
		return c.decideErr
	default:
		return nil
	}
}

// awaitDecision waits until the request is decided, or the host waits
// for more of it than the guest has sent.
func (c *conn) awaitDecision(ctx context.Context, timeout time.Duration) error {
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	for {
		select {
		case <-c.decided:
			return c.decideErr
		default:
		}
		idle, wake := c.in.idle()
		if idle {
			return nil
		}
		select {
		case <-c.decided:
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-expire:
			return errTimeout
		}
	}
}

func (c *conn) start(d *Device) {
	if c.started {
		return
	}
	c.started = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		err := d.serve(c)
		c.decide(err)
		c.out.close(err)
		c.in.drop()
	}()
}

func (c *conn) shut() {
	c.cancel()
	c.in.close(nil)
	c.in.drop()
	c.out.close(io.ErrClosedPipe)
	c.out.drop()
}

func (c *conn) scheme() string {
	if c.tls {
		return "https"
	}
	return "http"
}

// headLimiter fails a read past the head's cap, until the head is read;
// then (the body) the request cap counts.
type headLimiter struct {
	r     io.Reader
	left  int64
	total int64
	max   int64
	head  bool
}

func (h *headLimiter) Read(b []byte) (int, error) {
	n, err := h.r.Read(b)
	h.total += int64(n)
	if h.head {
		h.left -= int64(n)
		if h.left < 0 {
			return n, &guestError{"invalid", fmt.Sprintf("network: the request's head is over %d bytes", maxHead)}
		}
	}
	if h.total > h.max {
		return n, &guestError{"denied", fmt.Sprintf("network: the request is over this run's cap of %d bytes", h.max)}
	}
	return n, err
}

// hop-by-hop headers (RFC 9110 7.6.1) and those the host sets itself.
var dropHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Expect", "Content-Length"}

func stripHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range dropHeaders {
		h.Del(k)
	}
}

// serve reads the guest's request from c, checks it, sends it and writes
// the response back. Its error reaches the guest after what was written.
func (d *Device) serve(c *conn) error {
	hl := &headLimiter{r: reader{c.ctx, c.in}, left: maxHead + 16<<10, max: d.policy.MaxRequestBytes + maxHead, head: true}
	br := bufio.NewReaderSize(hl, 16<<10)
	req, err := http.ReadRequest(br)
	if err != nil {
		var ge *guestError
		if errors.As(err, &ge) || errors.Is(err, context.Canceled) {
			return err
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &guestError{"reset", "network: the connection closed before a whole request"}
		}
		return &guestError{"invalid", fmt.Sprintf("network: only HTTP/1.x requests go through the host: %v", err)}
	}
	hl.head = false
	start := time.Now()
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	u := c.scheme() + "://" + hostPort(c.host, c.port) + path
	rec := Decision{Method: req.Method, URL: u}
	if d.requests.Add(1) > int64(d.policy.MaxRequests) {
		rec.Reason = fmt.Sprintf("network: this run has made its %d allowed requests", d.policy.MaxRequests)
		d.record(rec)
		return &guestError{"denied", rec.Reason}
	}
	var rule *Rule
	if req.Method == http.MethodConnect {
		rec.Reason = "network: CONNECT (a tunnel) is not supported; the host makes each HTTP request itself"
		d.record(rec)
		return &guestError{"denied", rec.Reason}
	}
	for i := range d.policy.Rules {
		r := &d.policy.Rules[i]
		// The path as it is sent (escaped), not as Go decoded it: what
		// the upstream routes on is what the prefix must hold for.
		if r.matchEndpoint(c.scheme(), c.host, c.port) && r.matchRequest(req.Method, path) {
			rule = r
			break
		}
	}
	if rule == nil {
		rec.Reason = d.notAllowed(c.host, req.Method+" "+u)
		if ambiguousPath(path) {
			rec.Reason = fmt.Sprintf("network: the path %q has a segment servers read differently (\".\" or \"..\", encoded or not, or a backslash): "+
				"it is checked against the allow-list's path prefixes only in a plain form; send the path without them", path)
		}
		d.record(rec)
		return &guestError{"denied", rec.Reason}
	}
	rec.Allowed, rec.Rule = true, rule.String()
	idx := d.record(rec)

	ctx, cancel := context.WithTimeout(c.ctx, d.policy.Timeout)
	defer cancel()
	var p permit
	if a, ok := rule.literal(); ok {
		p.literal = a
	}
	ctx = context.WithValue(ctx, permitKey{}, &p)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		c.decide(nil)
		if ap, err := netip.ParseAddrPort(info.Conn.RemoteAddr().String()); err == nil {
			d.update(idx, func(r *Decision) { r.Address = ap.String() })
		}
	}})
	target := c.scheme() + "://" + hostForURL(c.host)
	if c.port != defaultPort(c.scheme()) {
		target = c.scheme() + "://" + hostPort(c.host, c.port)
	}
	target += path
	if req.URL.RawQuery != "" {
		target += "?" + req.URL.RawQuery
	}
	body := &countReader{r: req.Body}
	var outBody io.Reader = body
	if req.ContentLength == 0 {
		outBody = nil
	}
	out, err := http.NewRequestWithContext(ctx, req.Method, target, outBody)
	if err != nil {
		d.update(idx, func(r *Decision) { r.Reason = err.Error() })
		return &guestError{"invalid", fmt.Sprintf("network: %v", err)}
	}
	out.ContentLength = req.ContentLength
	if outBody == nil {
		out.ContentLength = 0
	}
	out.Header = req.Header.Clone()
	stripHop(out.Header)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil // send none rather than Go's
	}
	for k, v := range rule.Headers {
		out.Header.Set(k, v)
	}
	resp, err := d.gate.tr.RoundTrip(out)
	if err != nil {
		d.update(idx, func(r *Decision) {
			r.Reason, r.Duration, r.RequestBytes = err.Error(), time.Since(start), body.n.Load()
		})
		return transportError(err, c)
	}
	defer resp.Body.Close()
	d.update(idx, func(r *Decision) { r.Status, r.RequestBytes = resp.StatusCode, body.n.Load() })

	bw := bufio.NewWriterSize(writer{c.ctx, c.out}, 16<<10)
	text := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)))
	fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, text)
	h := resp.Header.Clone()
	length := h.Get("Content-Length")
	stripHop(h)
	scrub(h, rule.Headers)
	noBody := req.Method == http.MethodHead || resp.StatusCode == 204 || resp.StatusCode == 304 || resp.StatusCode < 200
	switch {
	case noBody && length != "":
		h.Set("Content-Length", length)
	case !noBody && resp.ContentLength >= 0:
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	h.Set("Connection", "close") // no Content-Length: the body ends with the connection
	h.Write(bw)
	bw.WriteString("\r\n")
	var n int64
	if !noBody {
		n, err = d.copyBody(bw, resp.Body)
	}
	if err == nil {
		err = bw.Flush()
	}
	d.update(idx, func(r *Decision) {
		r.ResponseBytes, r.Duration, r.RequestBytes = n, time.Since(start), body.n.Load()
		if err != nil {
			r.Reason = err.Error()
		}
	})
	if err != nil {
		return transportError(err, c)
	}
	return nil
}

// copyBody copies the response body within the run's cap.
func (d *Device) copyBody(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if d.respBytes.Add(int64(k)) > d.policy.MaxResponseBytes {
				return n, &guestError{"denied", fmt.Sprintf("network: the responses passed this run's cap of %d bytes", d.policy.MaxResponseBytes)}
			}
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// scrub keeps the host's headers out of the response: a header of the
// same name, or any value holding one of theirs.
func scrub(h http.Header, added map[string]string) {
	for k := range added {
		h.Del(k)
	}
	for k, vs := range h {
		for _, v := range vs {
			for _, secret := range added {
				if len(secret) >= 4 && strings.Contains(v, secret) {
					delete(h, k)
				}
			}
		}
	}
}

func transportError(err error, c *conn) error {
	var ge *guestError
	var re *RefusedError
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &ge):
		return ge
	case errors.As(err, &re):
		return &guestError{"denied", re.Msg}
	case errors.Is(err, context.DeadlineExceeded):
		return &guestError{"timeout", fmt.Sprintf("network: the request to %s ran out of time (this run's network timeout, or its deadline)", hostPort(c.host, c.port))}
	case errors.As(err, &dns):
		return &guestError{"dns", fmt.Sprintf("network: %s: %v", c.host, dns)}
	case errors.As(err, &op) && op.Op == "dial":
		return &guestError{"refused", fmt.Sprintf("network: cannot connect to %s: %v", hostPort(c.host, c.port), op.Err)}
	}
	return &guestError{"io", fmt.Sprintf("network: %s: %v", hostPort(c.host, c.port), err)}
}

// countReader counts a request body; the transport may still be
// sending it while the response is read, hence atomic.
type countReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}
