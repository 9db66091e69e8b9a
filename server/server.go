// Package server puts a Sandbox behind HTTP (POST /v1/run, sessions under
// /v1/sessions, GET /healthz, GET /metrics) and behind the Model Context
// Protocol ([NewMCP]). The JSON both ways is package
// [github.com/airlock-sandbox/airlock/server/wire], and the client
// `airlock run --server` uses is package
// [github.com/airlock-sandbox/airlock/server/client], which imports
// neither this package nor the sandbox.
//
// The HTTP server admits at most Config.Concurrency runs at once and
// Config.Queue more waiting; beyond that it answers 429 with Retry-After
// at once. An admitted request is always answered, also while the server
// shuts down (http.Server.Shutdown waits for running handlers).
package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/server/wire"
)

// Config configures a Server. As everywhere in Airlock, zero means the
// default noted; negative means none where a knob can be off (Queue,
// ReleaseIdle) and is refused by New elsewhere.
type Config struct {
	// Sandbox runs the requests; required.
	Sandbox *airlock.Sandbox
	// MaxLimits caps every request's limits (default airlock.DefaultLimits());
	// a request's zero limits take the Sandbox's defaults, capped the same.
	MaxLimits airlock.Limits
	// Concurrency is how many runs go at once (default runtime.NumCPU()).
	Concurrency int
	// Queue is how many admitted requests may wait for a slot (default
	// 4 × Concurrency); a negative value means none.
	Queue int
	// MaxBody caps a request body in bytes (default 32 MiB).
	MaxBody int64
	// MaxBodyReads caps the request bodies being read at once (default
	// 2 × (Concurrency + Queue), at least 16) and MaxBodyReadsPerClient
	// those from one client address (default a quarter of that, at least
	// 1); past either, 429. Bodies are read before a run slot is taken, so
	// these, not the slots, bound the memory bodies hold (each up to
	// MaxBody) and the clients uploading them.
	MaxBodyReads, MaxBodyReadsPerClient int
	// BodyTimeout and MinBodyRate bound how slowly a body may arrive: one
	// of n bytes must be whole within BodyTimeout + n/MinBodyRate seconds
	// (defaults 5 s and 32 KiB/s), else it is answered 408 and its
	// connection closed. A client trickling a body holds its place among
	// the bodies being read for about BodyTimeout, not indefinitely.
	BodyTimeout time.Duration
	MinBodyRate int64
	// MaxConns and MaxConnsPerClient cap open connections in all and from
	// one client address (defaults 1024 and 64); a connection past either
	// is answered 503 and closed. IdleTimeout closes a kept-alive
	// connection idle that long (default 30 s), ReadHeaderTimeout one
	// whose request headers take longer (default 10 s); MaxHeaderBytes
	// caps them (default 64 KiB; past it, 431). They apply to Serve.
	MaxConns, MaxConnsPerClient    int
	IdleTimeout, ReadHeaderTimeout time.Duration
	MaxHeaderBytes                 int
	// ReleaseIdle is how long the server runs nothing before it hands the
	// Go heap's free memory back to the OS (debug.FreeOSMemory; default
	// 5 s, negative: never). Without it a burst of runs leaves the process
	// tens of MiB above its baseline for good (docs/http-api.md).
	ReleaseIdle time.Duration
	// Network is the operator's network allow-list (the Sandbox's
	// WithNetwork): a request's "network" rules must lie within it; nil
	// allows no network.
	Network *airlock.NetworkPolicy
	// Token, if set, is required as "Authorization: Bearer TOKEN" on
	// /v1/ and /metrics (not on /healthz).
	Token string
	// Clients are bearer tokens of clients told apart (Token, if set, is
	// one more, named "default"): a session belongs to the client that
	// made it, and another client's calls, forks, deletes and listings
	// find nothing ("not found"). Each client holds at most
	// MaxSessionsPerClient sessions (0: no cap but the Sandbox's; 429
	// too_many_sessions) and MemoryPerClient bytes in its sessions and
	// runs in flight (0: none but MemoryBudget; 429 client_quota with
	// Retry-After while its runs hold part, else 507). Not with a
	// SessionStore, whose sessions are not bound to clients.
	Clients              []ClientToken
	MaxSessionsPerClient int
	MemoryPerClient      int64
	// Logger receives one record per request (default slog.Default()).
	Logger *slog.Logger
	// SessionStore, if set, holds sessions outside the process (e.g. a
	// RedisStore shared by replicas) instead of in it. The Sandbox should
	// then have a session key (airlock.WithSessionKey), so that what is
	// written into the store cannot raise limits or forge state.
	SessionStore SessionStore
	// MemoryBudget bounds, in bytes, the memory sessions hold between
	// calls (Session.HeldMemory, summed) together with the memory limits
	// of the runs and calls in flight (and, with CountProcessMemory, the
	// process's own; with ManageGoMemoryLimit the heap's garbage is kept
	// within it too; docs/http-api.md). Past it, the least recently used
	// idle sessions are saved to files under SpillDir and closed; their
	// next call loads them back; a run waits up to MemoryWait. What
	// cannot be placed is refused: 507 memory_budget if it needs more
	// than the whole budget, 429 memory_budget with Retry-After if runs
	// and calls in flight hold the room. Default (0):
	// DefaultMemoryBudget, a share of the container's limit; negative: no
	// budget. With a SessionStore, sessions are not held between calls,
	// and only runs are counted.
	MemoryBudget int64
	// MemoryWait is how long a run waits for its memory within the
	// budget while runs and calls in flight hold it (default 2 s; at
	// most Queue runs wait at once); then 429 memory_budget with
	// Retry-After. Each run reserves its memory limit, beside what the
	// sessions hold, for as long as it runs.
	MemoryWait time.Duration
	// ManageGoMemoryLimit lets the server set the Go runtime's soft memory
	// limit (debug.SetMemoryLimit, process-wide) to what the budget leaves
	// the heap: MemoryBudget less the memory limits of the runs in flight,
	// whose memory is mapped outside the heap. Without it the heap grows
	// to twice what it holds live between collections (GOGC), and a
	// server whose sessions hold the budget sat at several times it.
	// airlock serve sets it unless GOMEMLIMIT is set.
	ManageGoMemoryLimit bool
	// CountProcessMemory counts within MemoryBudget what the process holds
	// besides sessions and runs: its resident memory when New is called
	// (the program, the Sandbox's images and compiled code, which are
	// made before), the engine's idle regions kept for the next runs
	// (Sandbox.IdleMemory, sampled every second; a run's region counts at
	// its memory limit from its end to the next sample), and room for the
	// heap's own work (an eighth of MemoryBudget, at least 64 MiB): with
	// ManageGoMemoryLimit, resident memory stays under the budget.
	// airlock serve sets it; a process that holds other things before New
	// should give them room in MemoryBudget.
	CountProcessMemory bool
	// SpillDir is where the private directory of spilled sessions is made
	// (default os.TempDir()); it is removed by Shutdown and Close.
	SpillDir string
}

// Server is an http.Handler serving the API.
type Server struct {
	cfg   Config
	slots chan struct{}
	// bodies bounds the request bodies read at once, in all and per
	// client: each may be MaxBody (and about as much again decoded), while
	// slots and the queue only bound requests already read.
	bodies   perClient
	conns    perClient // open connections (Serve)
	hs       *http.Server
	idle     idleRelease
	waiting  atomic.Int64
	mux      *http.ServeMux
	nextID   atomic.Uint64
	sessions sessions
	python   Python // the build runs use, named in every result
	// served and running count runs for GET /v1/status, as airlock_runs_total
	// and airlock_runs_in_flight do for /metrics.
	served, running atomic.Int64

	runs       *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	suspicious *prometheus.CounterVec
	duration   prometheus.Histogram
	queue      prometheus.GaugeFunc
	inFlight   prometheus.Gauge
	live       prometheus.GaugeFunc
	net        *netMetrics
	installs   *installMetrics
	// clients are the tokens of clients told apart (Config.Clients).
	clients []tokenHash
	// stopSampling ends countProcessMemory's sampling (Close, Shutdown).
	stopSampling chan struct{}
	stopOnce     sync.Once
}

type namedValue struct {
	name string
	v    int64
}

// notNegative is the one rule every config here follows: 0 takes the
// default, a negative value is an error rather than a silent default.
func notNegative(config string, fields []namedValue) error {
	for _, f := range fields {
		if f.v < 0 {
			return fmt.Errorf("server: %s.%s is negative; 0 takes the default", config, f.name)
		}
	}
	return nil
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Sandbox == nil {
		return nil, errors.New("server: Config.Sandbox is required")
	}
	if err := notNegative("Config", []namedValue{
		{"Concurrency", int64(cfg.Concurrency)}, {"MaxBody", cfg.MaxBody},
		{"MaxBodyReads", int64(cfg.MaxBodyReads)}, {"MaxBodyReadsPerClient", int64(cfg.MaxBodyReadsPerClient)},
		{"BodyTimeout", int64(cfg.BodyTimeout)}, {"MinBodyRate", cfg.MinBodyRate},
		{"MaxConns", int64(cfg.MaxConns)}, {"MaxConnsPerClient", int64(cfg.MaxConnsPerClient)},
		{"IdleTimeout", int64(cfg.IdleTimeout)}, {"ReadHeaderTimeout", int64(cfg.ReadHeaderTimeout)},
		{"MaxHeaderBytes", int64(cfg.MaxHeaderBytes)}, {"MemoryWait", int64(cfg.MemoryWait)},
		{"MaxSessionsPerClient", int64(cfg.MaxSessionsPerClient)}, {"MemoryPerClient", cfg.MemoryPerClient},
	}); err != nil {
		return nil, err
	}
	clients, err := clientTokens("Config", cfg.Token, cfg.Clients)
	if err != nil {
		return nil, err
	}
	if clients != nil && cfg.SessionStore != nil {
		return nil, errors.New("server: Config.Clients with a SessionStore: stored sessions are not bound to clients, so one client could use another's")
	}
	if cfg.MaxLimits == (airlock.Limits{}) {
		cfg.MaxLimits = airlock.DefaultLimits()
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = runtime.NumCPU()
	}
	switch {
	case cfg.Queue == 0:
		cfg.Queue = 4 * cfg.Concurrency
	case cfg.Queue < 0:
		cfg.Queue = 0
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 32 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyReads == 0 {
		cfg.MaxBodyReads = max(2*(cfg.Concurrency+cfg.Queue), 16)
	}
	if cfg.MaxBodyReadsPerClient == 0 {
		cfg.MaxBodyReadsPerClient = max(cfg.MaxBodyReads/4, 1)
	}
	defaults := []struct {
		v *time.Duration
		d time.Duration
	}{{&cfg.BodyTimeout, DefaultBodyTimeout}, {&cfg.IdleTimeout, DefaultIdleTimeout}, {&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout}}
	for _, f := range defaults {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if cfg.MinBodyRate == 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxConnsPerClient == 0 {
		cfg.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.ReleaseIdle == 0 {
		cfg.ReleaseIdle = DefaultReleaseIdle
	}
	if cfg.MemoryWait == 0 {
		cfg.MemoryWait = DefaultMemoryWait
	}
	s := &Server{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency),
		bodies: perClient{max: cfg.MaxBodyReads, each: cfg.MaxBodyReadsPerClient},
		conns:  perClient{max: cfg.MaxConns, each: cfg.MaxConnsPerClient},
		mux:    http.NewServeMux(), python: PythonOf(cfg.Sandbox), clients: clients}
	s.hs = &http.Server{Handler: s, ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: cfg.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	reg := prometheus.NewRegistry()
	s.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_runs_total", Help: "Runs by outcome: ok (exit 0), exit_nonzero (the guest exited non-zero, e.g. an uncaught exception), or the sandbox error kind.",
	}, []string{"outcome"})
	s.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_rejected_requests_total", Help: "Requests refused before running, by reason.",
	}, []string{"reason"})
	s.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "airlock_run_duration_seconds", Help: "Wall-clock time of runs.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	s.suspicious = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_suspicious_runs_total", Help: "Runs that look steered rather than honest, by reason (canary, credential_probe, host_probing, metadata_endpoint); see the run's audit.",
	}, []string{"reason"})
	s.queue = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_queue_depth", Help: "Admitted requests waiting for a run slot.",
	}, func() float64 { return float64(s.waiting.Load()) })
	s.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "airlock_runs_in_flight", Help: "Runs executing now.",
	})
	s.live = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_sessions_live", Help: "Sessions of the Sandbox not yet closed or expired.",
	}, func() float64 { return float64(cfg.Sandbox.Sessions()) })
	openConns := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_open_connections", Help: "Connections open (Serve), within MaxConns.",
	}, func() float64 { return float64(s.conns.count()) })
	bodyReads := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_body_reads", Help: "Request bodies being read, within MaxBodyReads.",
	}, func() float64 { return float64(s.bodies.count()) })
	releases := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "airlock_memory_releases_total", Help: "Times the idle server handed free heap memory back to the OS.",
	})
	s.idle = idleRelease{after: cfg.ReleaseIdle, done: releases.Inc, last: time.Now()}
	// The build in use, as Prometheus' *_info convention has it: a
	// constant 1 whose labels say which.
	sb := cfg.Sandbox
	info := sb.Info()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "airlock_python_info", Help: "The Python build runs use: build (own, npm, custom), CPython version, python.wasm sha256, engine.",
		ConstLabels: prometheus.Labels{"build": info.Build, "version": info.Version, "sha256": info.SHA256, "engine": sb.Engine()},
	})
	build.Set(1)
	// The process as any Go service exposes it: heap, GC, goroutines,
	// CPU, RSS and open files, beside the runs.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(s.suspicious)
	reg.MustRegister(s.runs, s.rejected, s.duration, s.queue, s.inFlight, s.live, openConns, bodyReads, releases, build)
	s.net = newNetMetrics(reg)
	s.installs = newInstallMetrics(reg)

	if cfg.MemoryBudget == 0 {
		s.cfg.MemoryBudget, _ = DefaultMemoryBudget()
	}
	if s.cfg.MemoryBudget > 0 {
		sp := &spiller{budget: s.cfg.MemoryBudget, sb: sb, load: airlock.LoadOptions{MaxLimits: cfg.MaxLimits},
			parent: cfg.SpillDir, log: cfg.Logger,
			spilled: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "airlock_sessions_spilled_total", Help: "Idle sessions saved to disk and closed to keep within the memory budget.",
			}),
			loaded: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "airlock_sessions_unspilled_total", Help: "Spilled sessions loaded back by a call or a fork.",
			}),
		}
		s.sessions.spill = sp
		held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "airlock_sessions_held_bytes", Help: "Memory the sessions in memory hold between calls, within the memory budget.",
		}, func() float64 { return float64(s.sessions.held()) })
		budget := prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "airlock_sessions_memory_budget_bytes", Help: "The memory budget for sessions held between calls.",
		})
		budget.Set(float64(s.cfg.MemoryBudget))
		reg.MustRegister(sp.spilled, sp.loaded, held, budget)
		if s.cfg.CountProcessMemory {
			s.countProcessMemory(reg)
		}
		if room, most := s.sessions.room(), s.cfg.MaxLimits.Memory; most > room {
			// Every run asking for the most would be refused 507.
			cfg.Logger.Warn("memory budget", slog.String("problem", fmt.Sprintf(
				"the budget leaves %s for sessions and runs, less than the %s memory limit a run may ask for: such runs are refused; raise the budget or lower the maximum",
				mib(room), mib(most))))
		}
		if s.cfg.ManageGoMemoryLimit {
			s.sessions.manageHeap = true
			s.sessions.heapLimit(0)
		}
	}

	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	s.mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	s.mux.Handle("GET /v1/status", s.auth(http.HandlerFunc(s.handleStatus)))
	s.mux.Handle("POST /v1/run", s.auth(http.HandlerFunc(s.handleRun)))
	s.routeSessions()
	return s, nil
}

// handleStatus answers GET /v1/status: what the server has done and holds,
// in JSON, for a client that should not parse /metrics' text.
func (s *Server) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.Status{
		Runs: s.served.Load(), InFlight: s.running.Load(), Queued: s.waiting.Load(),
		Sessions: s.cfg.Sandbox.Sessions(), Python: s.python,
	})
}

// flag logs a suspicious run at warning level, with its reasons, and
// counts it by reason.
func (s *Server) flag(log *slog.Logger, res *airlock.Result) {
	if len(res.Suspicious) == 0 {
		return
	}
	attrs := make([]any, 0, len(res.Suspicious))
	for _, r := range res.Suspicious {
		s.suspicious.WithLabelValues(r.Reason).Inc()
		attrs = append(attrs, slog.String(r.Reason, r.Detail))
	}
	log.Warn("suspicious run", slog.Group("reasons", attrs...), slog.Int("audit_events", len(res.Audit)))
}

// statusWriter records the status for the access log; it keeps Flush
// reachable through Unwrap (http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP logs each request with log/slog.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.ContentLength != 0 {
		// A body no handler reads is still read after it (to keep the
		// connection), with whatever deadline is set: bound it as any
		// body. decodeBody sets its own.
		n := max(r.ContentLength, 0)
		_ = http.NewResponseController(w).SetReadDeadline(start.Add(s.cfg.BodyTimeout + time.Duration(n/s.cfg.MinBodyRate)*time.Second))
	}
	sw := &statusWriter{ResponseWriter: w}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// No route, or not this method: the mux's own answer, in the
		// JSON envelope every other error has.
		s.mux.ServeHTTP(&envelopeWriter{statusWriter: sw}, r)
	} else {
		s.mux.ServeHTTP(sw, r)
	}
	s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", sw.status), slog.Duration("duration", time.Since(start)),
		slog.String("remote", r.RemoteAddr))
}

func (s *Server) auth(h http.Handler) http.Handler {
	refused := func() { s.rejected.WithLabelValues("unauthorized").Inc() }
	if s.clients != nil {
		return clientAuth(s.clients, h, refused)
	}
	return bearerAuth(s.cfg.Token, h, refused)
}

// bearerAuth lets through requests that carry token as a bearer token
// (all of them when token is ""); the others get 401, after refused().
func bearerAuth(token string, h http.Handler, refused func()) http.Handler {
	if token == "" {
		return h
	}
	// Hashes are compared, not the strings: ConstantTimeCompare returns at
	// once on a length mismatch, which would time out the token's length.
	want := sha256.Sum256([]byte("Bearer " + token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			refused()
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// envelopeWriter turns the mux's plain-text 404 and 405 (its Allow header
// kept) into the JSON error envelope; the plain text is dropped.
type envelopeWriter struct {
	*statusWriter
	replaced bool
}

func (w *envelopeWriter) WriteHeader(code int) {
	kind, msg := "", ""
	switch code {
	case http.StatusNotFound:
		kind, msg = "not_found", "no such endpoint: docs/http-api.md lists the routes"
	case http.StatusMethodNotAllowed:
		kind, msg = "method_not_allowed", "this endpoint takes "+w.Header().Get("Allow")
	default:
		w.statusWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	h := w.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	writeError(w.statusWriter, code, kind, msg)
}

func (w *envelopeWriter) Write(p []byte) (int, error) {
	if w.replaced {
		return len(p), nil
	}
	return w.statusWriter.Write(p)
}

// errorBody is the body of a refused request: {"error":{"kind","message"}}.
type errorBody = wire.ErrorBody

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	writeJSON(w, status, errorBody{Error: ErrorInfo{Kind: kind, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// errBusy means the slots and the queue are full.
var errBusy = errors.New("server busy")

// acquire takes a run slot, waiting in the queue if there is room there.
func (s *Server) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-s.slots }
	select {
	case s.slots <- struct{}{}:
		return release, nil
	default:
	}
	if s.waiting.Add(1) > int64(s.cfg.Queue) {
		s.waiting.Add(-1)
		return nil, errBusy
	}
	defer s.waiting.Add(-1)
	select {
	case s.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// overloaded answers 429 with Retry-After: the server has no room now.
func (s *Server) overloaded(w http.ResponseWriter, msg string) {
	s.rejected.WithLabelValues("overloaded").Inc()
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusTooManyRequests, "overloaded", msg)
}

// decodeBody reads a JSON request body into v, answering a bad one, 408
// for one that arrives too slowly, or 429 when MaxBodyReads bodies (or
// MaxBodyReadsPerClient of this client's) are being read.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	addr := clientAddr(r.RemoteAddr)
	switch s.bodies.take(addr) {
	case "":
		defer s.bodies.give(addr)
	case "client":
		s.overloaded(w, fmt.Sprintf("%d request bodies from %s are being read; retry later", s.cfg.MaxBodyReadsPerClient, addr))
		return false
	default:
		s.overloaded(w, fmt.Sprintf("%d request bodies are being read; retry later", s.cfg.MaxBodyReads))
		return false
	}
	rc := http.NewResponseController(w)
	ok, late := false, false
	defer func() {
		switch {
		case ok:
			// The run may outlast any deadline the body had, and the
			// connection's read past the body (which notices a client
			// that left) must not end it: no deadline once the body is in.
			_ = rc.SetReadDeadline(time.Time{})
		case !late:
			// What is left of a refused body is read after the handler
			// (to keep the connection) within BodyTimeout, not at the
			// sender's pace. Not a deadline already passed: the read past
			// a body that was all there would fail at once, and its error
			// cancels the context of every later request on the
			// connection.
			_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
		}
	}()
	body := &rateReader{r: r.Body, rc: rc, start: time.Now(), grace: s.cfg.BodyTimeout, rate: s.cfg.MinBodyRate}
	dec := json.NewDecoder(http.MaxBytesReader(w, io.NopCloser(body), s.cfg.MaxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	}
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("unexpected data after the JSON object")
			var tooBig *http.MaxBytesError
			if errors.As(e, &tooBig) {
				err = e // trailing bytes past the cap: too large, not malformed
			}
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case isTimeout(err):
		late = true // its deadline has passed: the connection closes
		s.bodyTimeout(w)
		return false
	case errors.As(err, &tooBig):
		s.rejected.WithLabelValues("too_large").Inc()
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
		return false
	case err != nil:
		s.rejected.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, string(airlock.KindInvalidRequest), "bad request body: "+err.Error())
		return false
	}
	ok = true
	return true
}

// decode reads POST /v1/run's body, which must hold code.
func (s *Server) decode(w http.ResponseWriter, r *http.Request) (RunRequest, bool) {
	var req RunRequest
	return req, s.decodeBody(w, r, &req) && s.needCode(w, req.Code)
}

func (s *Server) needCode(w http.ResponseWriter, code string) bool {
	if code == "" {
		s.rejected.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, string(airlock.KindInvalidRequest), `"code" is required`)
		return false
	}
	return true
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	in, ok := s.decode(w, r)
	if !ok {
		return
	}
	req, clamped := s.request(w, in)
	var err error
	if req.Network, err = s.networkPolicy(in.Network); err != nil {
		s.rejected.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, string(airlock.KindInvalidRequest), err.Error())
		return
	}
	s.execute(w, r, req, clamped, 0, s.cfg.Sandbox.Run, func(res *airlock.Result) any { return NewResult(res, s.python, true) })
}

// request is the airlock.Request in asks for, with its limits clamped.
func (s *Server) request(w http.ResponseWriter, in RunRequest) (airlock.Request, []string) {
	limits, clamped := s.clampLimits(w, in.Limits)
	return airlock.Request{
		Code: in.Code, Filename: in.Filename, Files: in.Files, Stdin: in.Stdin, Env: in.Env,
		Limits: limits, Deterministic: in.Deterministic, Seed: in.Seed, HostFuncs: in.Tools,
		RichOutput: richOutput(in.RichOutput),
	}, clamped
}

// clampLimits clamps l to the server's maxima and names what it clamped
// in the Airlock-Limits-Clamped header.
func (s *Server) clampLimits(w http.ResponseWriter, l RunLimits) (airlock.Limits, []string) {
	limits, clamped := clampLimits(l, s.cfg.Sandbox.Limits(), s.cfg.MaxLimits)
	if len(clamped) > 0 {
		w.Header().Set("Airlock-Limits-Clamped", strings.Join(clamped, ","))
	}
	return limits, clamped
}

// execute runs req with run in a slot and answers with shape(result), as
// JSON or (?stream=1) as server-sent events; shape returns nil for a
// result that means the target is gone (404).
func (s *Server) execute(w http.ResponseWriter, r *http.Request, req airlock.Request, clamped []string, alongside int64,
	run func(context.Context, airlock.Request) (*airlock.Result, error), shape func(*airlock.Result) any) {
	s.idle.start()
	var idle sync.Once
	defer idle.Do(s.idle.end)
	release, err := s.acquire(r.Context())
	switch {
	case errors.Is(err, errBusy):
		s.overloaded(w, fmt.Sprintf("%d runs in flight and %d queued; retry later", s.cfg.Concurrency, s.cfg.Queue))
		return
	case err != nil: // the client left while queued; no one reads an answer
		s.rejected.WithLabelValues("client_gone").Inc()
		return
	}
	// The slot is for running: it is given back as soon as the run ends,
	// before the answer is written to a client that may read it slowly.
	var giveBack sync.Once
	defer giveBack.Do(release)
	unadmit, err := s.admit(r.Context(), req, alongside)
	if err != nil {
		if a := s.budgetAnswer(err); a.status > 0 {
			s.writeAnswer(w, a)
		} else if a := s.quotaAnswer(err); a.status > 0 {
			s.writeAnswer(w, a)
		} else {
			s.rejected.WithLabelValues("client_gone").Inc()
		}
		return
	}
	var admitted sync.Once
	defer admitted.Do(unadmit)
	id := s.nextID.Add(1)
	log := s.cfg.Logger.With(slog.Uint64("run", id))
	stream := r.URL.Query().Get("stream") == "1"
	var sse *sseWriter
	if stream {
		sse = newSSE(w)
		req.OnOutput = sse.output
	}
	s.inFlight.Inc()
	s.running.Add(1)
	res, _ := run(r.Context(), req)
	s.running.Add(-1)
	s.inFlight.Dec()
	admitted.Do(unadmit)
	giveBack.Do(release)
	idle.Do(s.idle.end)
	outcome := Outcome(res)
	s.runs.WithLabelValues(outcome).Inc()
	s.served.Add(1)
	s.net.observe(res)
	s.installs.observe(res)
	s.duration.Observe(res.Duration.Seconds())
	log.Info("run", slog.String("outcome", outcome), slog.Int("exit_code", res.ExitCode),
		slog.Duration("duration", res.Duration), slog.Any("clamped", clamped))
	s.flag(log, res)
	out := shape(res)
	if a, ok := out.(errorAnswer); ok {
		// The run went, but what it leaves could not be kept (a store).
		if stream {
			sse.finish(errorBody{Error: ErrorInfo{Kind: a.kind, Message: a.msg}})
			return
		}
		s.writeAnswer(w, a)
		return
	}
	if stream {
		if out == nil {
			out = NewResult(res, s.python, true)
		}
		sse.finish(out)
		return
	}
	if out == nil {
		s.notFound(w, res.Error.Message)
		return
	}
	status := http.StatusOK
	if res.Error != nil && res.Error.Kind == airlock.KindInvalidRequest {
		status = http.StatusBadRequest
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(responseWriteTimeout))
	writeJSON(w, status, out)
}

// admit reserves req's memory limit within the memory budget for its
// run (admitRun); alongside is what a called session holds meanwhile.
// None to reserve without a budget.
func (s *Server) admit(ctx context.Context, req airlock.Request, alongside int64) (func(), error) {
	need := s.memoryLimit(req)
	// The client's own quota first: its runs wait for nobody else's.
	var owner any
	if c := clientOf(ctx); c != "" {
		owner = c
	}
	if err := s.sessions.clientReserve(owner, need, s.cfg.MemoryPerClient, true); err != nil {
		return nil, err
	}
	unclient := func() { s.sessions.clientUnreserve(owner, need) }
	if s.sessions.spill == nil {
		return unclient, nil
	}
	done, err := s.sessions.admitRun(ctx, need, alongside, s.cfg.MemoryWait, s.cfg.Queue)
	if err != nil {
		unclient()
		return nil, err
	}
	done = func(unbudget func()) func() { return func() { unbudget(); unclient() } }(done)
	return s.sessions.heapRun(need, done), nil
}

// memoryLimit is the memory limit req runs with: its own, or the
// Sandbox's default.
func (s *Server) memoryLimit(req airlock.Request) int64 {
	if req.Limits.Memory != 0 {
		return req.Limits.Memory
	}
	return s.cfg.Sandbox.Limits().Memory
}

// responseWriteTimeout bounds each write of an answer: a client that stops
// reading must not keep its handler, and a graceful drain, waiting.
const responseWriteTimeout = 30 * time.Second

// sseWriter sends a run's output as server-sent events while it runs:
// "stdout" and "stderr" events whose data is a JSON string, then one
// "result" event with the Result. Output is queued by the run and written
// by a goroutine, so a slow client never stalls the guest. Consecutive
// output of one stream waits as one event, so the queue holds about the
// bytes the run's output caps allow (one event per write held ~40 times
// that). Each write has responseWriteTimeout; once one fails, the rest is
// dropped.
type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	mu   sync.Mutex
	q    []sseEvent
	wake chan struct{}
	done chan struct{}
}

type sseEvent struct {
	name string
	raw  []byte // stdout and stderr: the bytes, encoded when written
	data []byte // result: the JSON
}

func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w), wake: make(chan struct{}, 1), done: make(chan struct{})}
	_ = s.rc.Flush()
	go s.loop()
	return s
}

func (s *sseWriter) output(stream string, p []byte) {
	s.mu.Lock()
	if n := len(s.q); n > 0 && s.q[n-1].name == stream {
		s.q[n-1].raw = append(s.q[n-1].raw, p...)
	} else {
		s.q = append(s.q, sseEvent{name: stream, raw: bytes.Clone(p)})
	}
	s.mu.Unlock()
	s.signal()
}

func (s *sseWriter) push(e sseEvent) {
	s.mu.Lock()
	s.q = append(s.q, e)
	s.mu.Unlock()
	s.signal()
}

func (s *sseWriter) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sseWriter) loop() {
	defer close(s.done)
	failed := false
	for range s.wake {
		s.mu.Lock()
		q := s.q
		s.q = nil
		s.mu.Unlock()
		last := false
		for _, e := range q {
			last = last || e.name == "result"
			if failed {
				continue
			}
			data := e.data
			if e.name != "result" {
				data, _ = json.Marshal(string(e.raw))
			}
			_ = s.rc.SetWriteDeadline(time.Now().Add(responseWriteTimeout))
			_, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", e.name, data)
			failed = err != nil
		}
		if !failed {
			failed = s.rc.Flush() != nil
		}
		if last {
			return
		}
	}
}

// finish sends the result event and waits until everything is written.
func (s *sseWriter) finish(res any) {
	data, _ := json.Marshal(res)
	s.push(sseEvent{name: "result", data: data})
	<-s.done
}
