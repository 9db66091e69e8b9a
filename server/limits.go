package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"
)

// Defaults of the Config fields that bound what clients hold.
const (
	DefaultBodyTimeout       = 5 * time.Second
	DefaultMinBodyRate       = 32 << 10 // bytes per second
	DefaultMaxConns          = 1024
	DefaultMaxConnsPerClient = 64
	DefaultIdleTimeout       = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultReleaseIdle       = 5 * time.Second
	DefaultMemoryWait        = 2 * time.Second
)

// perClient counts what each client address holds, within a total and a
// per-address cap.
type perClient struct {
	mu         sync.Mutex
	total, max int
	each       int
	by         map[string]int
}

// take counts one for addr; "" when it may, else why not.
func (p *perClient) take(addr string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.total >= p.max:
		return "total"
	case p.by[addr] >= p.each:
		return "client"
	}
	if p.by == nil {
		p.by = map[string]int{}
	}
	p.by[addr]++
	p.total++
	return ""
}

func (p *perClient) give(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total--
	if p.by[addr]--; p.by[addr] <= 0 {
		delete(p.by, addr) // the map stays as small as the clients holding one
	}
}

func (p *perClient) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// clientAddr is the client's IP: the per-client caps count by it. Behind
// a proxy every client has the proxy's.
func clientAddr(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// rateReader enforces a body's minimum rate through the connection's read
// deadline: byte n must have arrived within grace + n/rate of the start,
// so a client trickling its body loses the connection after about grace,
// while a large body sent at any reasonable speed has all the time it
// needs.
type rateReader struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64
	n     int64
}

func (b *rateReader) Read(p []byte) (int, error) {
	due := b.start.Add(b.grace + time.Duration(float64(b.n)/float64(b.rate)*float64(time.Second)))
	_ = b.rc.SetReadDeadline(due) // not every ResponseWriter can; then only the cap on bodies applies
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}

// isTimeout tells a read that hit its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// limitListener accepts within the Server's connection caps, closing at
// once (after a one-line 503) a connection over them.
type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c.RemoteAddr().String())
		if why := l.s.conns.take(addr); why != "" {
			l.s.rejected.WithLabelValues("too_many_connections").Inc()
			l.s.cfg.Logger.Warn("connection refused", "remote", c.RemoteAddr().String(), "cap", why)
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			c.Close()
			continue
		}
		return &countedConn{Conn: c, give: func() { l.s.conns.give(addr) }}, nil
	}
}

type countedConn struct {
	net.Conn
	once sync.Once
	give func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.give)
	return c.Conn.Close()
}

// Serve accepts connections on ln and serves the API on them until
// Shutdown or Close, with the Config's connection caps (MaxConns,
// MaxConnsPerClient) and timeouts (ReadHeaderTimeout, IdleTimeout,
// MaxHeaderBytes). A Server used as a handler in an http.Server of one's
// own bounds request bodies just the same, but those are that server's to
// set.
func (s *Server) Serve(ln net.Listener) error {
	return s.hs.Serve(&limitListener{Listener: ln, s: s})
}

// Shutdown stops accepting and waits for the requests in progress (every
// admitted run is answered) until ctx ends; see http.Server.Shutdown.
// The sessions end then: in-memory ones are closed, spilled ones
// (Config.MemoryBudget) removed from disk.
func (s *Server) Shutdown(ctx context.Context) error {
	defer s.endSessions()
	return s.hs.Shutdown(ctx)
}

// Close closes the listeners and every connection at once, and ends the
// sessions as Shutdown does.
func (s *Server) Close() error {
	defer s.endSessions()
	return s.hs.Close()
}

// endSessions closes the sessions in memory, which would otherwise stay
// with the Sandbox after the server (an embedder making servers in turn
// kept each one's), and removes the spilled ones.
func (s *Server) endSessions() {
	s.sessions.closeAll()
	s.stopOnce.Do(func() {
		if s.stopSampling != nil {
			close(s.stopSampling)
		}
	})
	if s.sessions.spill != nil {
		s.sessions.spill.removeAll()
	}
}

// idleRelease gives the Go heap's free memory back to the OS once the
// server has run nothing for a while. Runs allocate and free a lot of
// memory (results, bodies, output), and the runtime keeps what a burst
// freed for reuse (up to about twice the live heap, as GOGC=100 sets its
// goal, and returns only what passes ~1.1 times that): after a load test
// the process stayed ~40-120 MiB above its baseline indefinitely.
type idleRelease struct {
	mu    sync.Mutex
	busy  int
	gen   uint64
	last  time.Time // when the last run ended, or the server was made
	after time.Duration
	done  func() // counts a release (metrics)
}

// idleFor is how long no run has been in progress; 0 while one is.
func (r *idleRelease) idleFor() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy > 0 {
		return 0
	}
	return time.Since(r.last)
}

// Idle is how long the server has had no run in progress (0 while one
// is, queued ones included), counted from New if none ran yet: what a
// server that should exit when unused waits on. Other requests (health,
// metrics, session listings) do not count.
func (s *Server) Idle() time.Duration { return s.idle.idleFor() }

func (r *idleRelease) start() {
	r.mu.Lock()
	r.busy++
	r.gen++
	r.mu.Unlock()
}

func (r *idleRelease) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy--
	r.last = time.Now()
	if r.busy > 0 || r.after <= 0 {
		return
	}
	r.gen++
	gen := r.gen
	time.AfterFunc(r.after, func() {
		r.mu.Lock()
		idle := r.busy == 0 && r.gen == gen
		r.mu.Unlock()
		if idle {
			debug.FreeOSMemory()
			r.done()
		}
	})
}

// bodyTimeoutError answers a body that arrived too slowly.
func (s *Server) bodyTimeout(w http.ResponseWriter) {
	s.rejected.WithLabelValues("body_timeout").Inc()
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestTimeout, "body_timeout",
		fmt.Sprintf("the request body did not arrive within %s plus 1 s per %d bytes", s.cfg.BodyTimeout, s.cfg.MinBodyRate))
}
