package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// sessionCall is the airlock.Request a session call asks for, its limits
// clamped and its network rules narrowed from the server's; false after
// a 400 for rules the server does not allow.
func (s *Server) sessionCall(w http.ResponseWriter, in SessionRunRequest) (airlock.Request, []string, bool) {
	policy, err := s.networkPolicy(in.Network)
	if err != nil {
		s.rejected.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, string(airlock.KindInvalidRequest), err.Error())
		return airlock.Request{}, nil, false
	}
	req, clamped := s.request(w, RunRequest{
		Code: in.Code, Filename: in.Filename, Files: in.Files, Stdin: in.Stdin, Env: in.Env,
		Limits: in.Limits, Tools: in.Tools, RichOutput: in.RichOutput,
	})
	req.Network = policy
	return req, clamped, true
}

// sessions are the live sessions by ID. They belong to the Sandbox, which
// applies its TTL and cap; the table forgets those that ended. It keeps
// what GET /v1/sessions lists itself, so listing never waits for a
// session's lock (held through a call).
//
// With a memory budget (the HTTP server's), an idle session may be
// spilled: saved to a file and closed, its entry kept under the same ID
// until a call loads it back (spill.go).
type sessions struct {
	mu   sync.Mutex
	byID map[string]*sessionEntry
	// moved is signalled (on mu) when an entry stops moving.
	moved *sync.Cond
	// spill is nil without a memory budget (MCP's table).
	spill *spiller
	// reserved is memory promised to sessions being created or loaded,
	// counted as held until they are in the table.
	reserved int64
	// freed is closed when memory is given back (signalFreedLocked);
	// admitWaiting counts the runs waiting on it (admitRun).
	freed        chan struct{}
	admitWaiting int
	// clientRuns is what each client's runs in flight reserve within its
	// memory quota (Config.MemoryPerClient).
	clientRuns map[any]int64
	// fixed and idleRegions are what the process holds besides sessions
	// and runs, counted within the budget (Config.CountProcessMemory);
	// goFixed is the Go runtime's part of fixed, which its soft limit
	// counts itself (heapLimit).
	fixed, idleRegions, goFixed atomic.Int64
	// idleEnded is the memory limits of the runs that ended since
	// idleRegions was last sampled: each gave its region back to the
	// engine's pools holding up to that much, not yet measured.
	idleEnded atomic.Int64
	// heapRoom is kept within the budget for the heap's own work (results,
	// request bodies, a session's state while its call replaces it), once
	// the process's memory is counted: without it the heap's slack was
	// the budget's overshoot.
	heapRoom int64
	// dropIdle drops the engine's idle regions and counts them again
	// (set with CountProcessMemory).
	dropIdle func()
	// manageHeap keeps the Go runtime's soft memory limit within the
	// budget (heapLimit; Config.ManageGoMemoryLimit); runsReserved is the
	// memory limits of the runs in flight, limitMu orders the settings.
	manageHeap   bool
	runsReserved atomic.Int64
	limitMu      sync.Mutex
}

type sessionEntry struct {
	id       string
	sess     *airlock.Session // nil while spilled
	owner    any              // the MCP client that made it; nil for anyone's
	created  time.Time
	lastCall time.Time // when the last call ended; zero before one
	calls    int       // calls made through the server, ended
	running  bool      // an HTTP call is in progress (claim)
	// held is what the session held at its last count (HeldMemory after
	// its creation, its last call, or when it was spilled).
	held int64
	// file holds the saved session while it is spilled.
	file string
	// moving: being spilled, loaded or forked from its file; others wait.
	moving bool
}

// lastActive is when the entry was last used, for LRU and expiry.
func (e *sessionEntry) lastActive() time.Time {
	if e.lastCall.IsZero() {
		return e.created
	}
	return e.lastCall
}

func (t *sessions) add(s *airlock.Session) { t.addOwned(s, nil) }

// addOwned adds s as owner's: get and remove find it for owner only
// (any owner when nil).
func (t *sessions) addOwned(s *airlock.Session, owner any) { t.addHeld(s, owner, 0) }

// addHeld adds s, which holds held bytes of memory.
func (t *sessions) addHeld(s *airlock.Session, owner any, held int64) *sessionEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	// Expired sessions are dropped here, so the table stays as small as
	// the Sandbox's cap however many come and go.
	t.dropEnded()
	e := &sessionEntry{id: s.ID(), sess: s, owner: owner, created: time.Now(), held: held}
	t.byID[e.id] = e
	return e
}

func (t *sessions) init() {
	if t.byID == nil {
		t.byID = map[string]*sessionEntry{}
	}
	if t.moved == nil {
		t.moved = sync.NewCond(&t.mu)
	}
}

// ended tells whether e's session is over: closed or expired in memory,
// or spilled for longer than the Sandbox's TTL.
func (t *sessions) ended(e *sessionEntry) bool {
	if e.sess != nil {
		return e.sess.Err() != nil
	}
	return e.file != "" && !e.moving && t.spill.expired(e)
}

// closeAll closes every session in memory and empties the table (a
// server's end; a spilled one's file goes with the spill directory).
func (t *sessions) closeAll() {
	t.mu.Lock()
	var open []*airlock.Session
	for id, e := range t.byID {
		if e.sess != nil {
			open = append(open, e.sess)
		}
		delete(t.byID, id)
	}
	t.signalFreedLocked()
	t.mu.Unlock()
	// Without waiting: a session running a call ends when the call returns.
	now, cancel := context.WithCancel(context.Background())
	cancel()
	for _, sess := range open {
		sess.Close(now)
	}
}

// forget removes e from the table (under mu), and its file if spilled.
func (t *sessions) forget(e *sessionEntry) {
	delete(t.byID, e.id)
	t.signalFreedLocked()
	if e.file != "" && !e.moving {
		os.Remove(e.file)
		e.file = ""
	}
}

func (t *sessions) dropEnded() {
	for _, e := range t.byID {
		if t.ended(e) {
			t.forget(e)
		}
	}
}

// get returns a live session, or nil.
func (t *sessions) get(id string) *airlock.Session { return t.getOwned(id, nil) }

// getOwned returns a live session that is owner's or anyone's, or nil
// (also for another's, so that nobody learns it exists). Only tables
// without a budget (whose sessions are never spilled) use it.
func (t *sessions) getOwned(id string, owner any) *airlock.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || (e.owner != nil && e.owner != owner) || e.sess == nil {
		return nil
	}
	if t.ended(e) {
		t.forget(e)
		return nil
	}
	return e.sess
}

func (t *sessions) remove(id string) *airlock.Session { return t.removeOwned(id, nil) }

// removeOwned removes a session that is owner's or anyone's; another's
// stays, and the answer is nil as for one that is not there.
func (t *sessions) removeOwned(id string, owner any) *airlock.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || (e.owner != nil && e.owner != owner) {
		return nil
	}
	delete(t.byID, id)
	return e.sess
}

// removeEntry removes session id: found is false if there is none (or it
// ended). A spilled session's file goes with it (at once, or when the
// move under way ends).
func (t *sessions) removeEntry(id string) (sess *airlock.Session, found bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || t.ended(e) {
		if e != nil {
			t.forget(e)
		}
		return nil, false
	}
	t.forget(e)
	return e.sess, true
}

// len is the number of sessions in the table (ended ones included until
// they are dropped).
func (t *sessions) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// exists tells whether session id is in the table and not ended (an
// ended one is forgotten, its file removed).
func (t *sessions) exists(id string) bool { return t.existsFor(id, nil) }

// existsFor is exists for a session owner may use (another's is not
// there, to owner).
func (t *sessions) existsFor(id string, owner any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e != nil && t.ended(e) {
		t.forget(e)
		return false
	}
	return e != nil && ownedLocked(e, owner)
}

// count is the number of sessions not ended, spilled ones included.
func (t *sessions) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropEnded()
	return len(t.byID)
}

// list is the live sessions owner may use, oldest first.
func (t *sessions) list(owner any) SessionList {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	t.dropEnded()
	out := SessionList{Sessions: make([]SessionStatus, 0, len(t.byID))}
	for id, e := range t.byID {
		if !ownedLocked(e, owner) {
			continue
		}
		st := SessionStatus{ID: id, Created: e.created.UTC(), Calls: e.calls, Running: e.running}
		if !e.lastCall.IsZero() {
			last := e.lastCall.UTC()
			st.LastCall = &last
		}
		out.Sessions = append(out.Sessions, st)
	}
	slices.SortFunc(out.Sessions, func(a, b SessionStatus) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (s *Server) routeSessions() {
	s.mux.Handle("POST /v1/sessions", s.auth(http.HandlerFunc(s.handleNewSession)))
	s.mux.Handle("GET /v1/sessions", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.SessionStore != nil {
			s.storeList(w, r)
			return
		}
		writeJSON(w, http.StatusOK, s.sessions.list(ownerOf(r)))
	})))
	s.mux.Handle("POST /v1/sessions/{id}/run", s.auth(http.HandlerFunc(s.handleSessionRun)))
	s.mux.Handle("POST /v1/sessions/{id}/fork", s.auth(http.HandlerFunc(s.handleFork)))
	s.mux.Handle("DELETE /v1/sessions/{id}", s.auth(http.HandlerFunc(s.handleDeleteSession)))
}

// sessionError answers an error of NewSession or Fork.
func (s *Server) sessionError(w http.ResponseWriter, err error) {
	var e *airlock.Error
	switch {
	case errors.Is(err, airlock.ErrTooManySessions):
		s.rejected.WithLabelValues("too_many_sessions").Inc()
		writeError(w, http.StatusTooManyRequests, "too_many_sessions", err.Error()+"; delete one or let one expire")
	case errors.Is(err, airlock.ErrSessionsUnavailable):
		writeError(w, http.StatusNotImplemented, "sessions_unavailable", "this server has no sessions: its Python build is not prepared for snapshots (`airlock setup` on the server's host)")
	case errors.Is(err, airlock.ErrSessionClosed), errors.Is(err, airlock.ErrSessionExpired):
		s.notFound(w, err.Error())
	case errors.As(err, &e):
		s.rejected.WithLabelValues("bad_request").Inc()
		writeError(w, http.StatusBadRequest, string(e.Kind), e.Message)
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func (s *Server) notFound(w http.ResponseWriter, msg string) {
	s.rejected.WithLabelValues("no_session").Inc()
	writeError(w, http.StatusNotFound, "not_found", msg)
}

// budgetAnswer answers a session that cannot be placed within the
// memory budget: 507 if it never could, 429 with Retry-After if running
// calls hold the room.
func (s *Server) budgetAnswer(err error) errorAnswer {
	var b *budgetError
	if !errors.As(err, &b) {
		return errorAnswer{status: -1}
	}
	s.rejected.WithLabelValues("memory_budget").Inc()
	if b.never {
		return errorAnswer{status: http.StatusInsufficientStorage, kind: "memory_budget", msg: err.Error()}
	}
	return errorAnswer{status: http.StatusTooManyRequests, kind: "memory_budget", msg: err.Error(), retryAfter: true}
}

// placeError answers err of placing a session: the budget's, else as
// sessionError.
func (s *Server) placeError(w http.ResponseWriter, err error) {
	if a := s.budgetAnswer(err); a.status > 0 {
		s.writeAnswer(w, a)
		return
	}
	s.sessionError(w, err)
}

// reserve makes room for need bytes of a session on its way into the
// table (none to make without a budget).
func (s *Server) reserve(need int64) error {
	if s.sessions.spill == nil {
		return nil
	}
	return s.sessions.reserve(need, nil)
}

func (s *Server) unreserve(need int64) {
	if s.sessions.spill != nil {
		s.sessions.unreserve(need)
	}
}

// roomForOneMore answers 429 when the table (spilled sessions included)
// is at the Sandbox's cap: spilled sessions are out of the Sandbox's
// count, not out of the server's.
func (s *Server) roomForOneMore(w http.ResponseWriter) bool {
	if s.sessions.spill == nil {
		return true
	}
	if max := s.cfg.Sandbox.MaxSessions(); s.sessions.count() >= max {
		s.sessionError(w, fmt.Errorf("%w (%d, spilled ones included)", airlock.ErrTooManySessions, max))
		return false
	}
	return true
}

// clientRoom answers 429 too_many_sessions when owner holds
// MaxSessionsPerClient sessions, and client_quota when need more bytes
// would pass its MemoryPerClient; true if there is room.
func (s *Server) clientRoom(w http.ResponseWriter, owner any, need int64) bool {
	if owner == nil {
		return true
	}
	if max := s.cfg.MaxSessionsPerClient; max > 0 {
		if n := s.sessions.countOwned(owner); n >= max {
			s.rejected.WithLabelValues("too_many_sessions").Inc()
			writeError(w, http.StatusTooManyRequests, "too_many_sessions",
				fmt.Sprintf("%v: client %q holds %d sessions, the most one client may; delete one or let one expire", ErrClientQuota, owner, n))
			return false
		}
	}
	if err := s.sessions.clientReserve(owner, need, s.cfg.MemoryPerClient, false); err != nil {
		s.writeAnswer(w, s.quotaAnswer(err))
		return false
	}
	return true
}

// ownedBy tells whether claimed entry e is owner's to use.
func ownedBy(e *sessionEntry, owner any) bool { return e.owner == nil || e.owner == owner }

// heldOf is what session id holds (0 if there is none).
func (t *sessions) heldOf(id string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byID[id]; e != nil {
		return e.held
	}
	return 0
}

func heldBy(sess *airlock.Session) int64 {
	img, files := sess.HeldMemory()
	return img + files
}

func (s *Server) handleNewSession(w http.ResponseWriter, r *http.Request) {
	var in SessionRequest
	// Every field is optional, so is the body.
	if r.ContentLength != 0 && !s.decodeBody(w, r, &in) {
		return
	}
	limits, _ := s.clampLimits(w, in.Limits)
	opts := airlock.SessionOptions{Limits: limits, Files: in.Files, Env: in.Env, HostFuncs: in.Tools}
	if s.cfg.SessionStore != nil {
		s.storeNewSession(w, r, opts)
		return
	}
	if !s.roomForOneMore(w) {
		return
	}
	owner := ownerOf(r)
	var need int64
	for _, data := range in.Files {
		need += int64(len(data))
	}
	if !s.clientRoom(w, owner, need) {
		return
	}
	if err := s.reserve(need); err != nil {
		s.placeError(w, err)
		return
	}
	sess, err := s.cfg.Sandbox.NewSession(r.Context(), opts)
	if err != nil {
		s.unreserve(need)
		s.sessionError(w, err)
		return
	}
	s.sessions.addHeld(sess, owner, heldBy(sess))
	s.unreserve(need)
	s.cfg.Logger.Info("session", slog.String("id", sess.ID()), slog.String("event", "new"))
	writeJSON(w, http.StatusCreated, SessionInfo{ID: sess.ID()})
}

func (s *Server) handleSessionRun(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SessionStore != nil {
		var in SessionRunRequest
		if s.decodeBody(w, r, &in) && s.needCode(w, in.Code) {
			s.storeSessionRun(w, r, in)
		}
		return
	}
	id := r.PathValue("id")
	noSession := fmt.Sprintf("no session %q (it may have expired or been deleted)", id)
	owner := ownerOf(r)
	if !s.sessions.existsFor(id, owner) {
		s.notFound(w, noSession)
		return
	}
	var in SessionRunRequest
	if !s.decodeBody(w, r, &in) || !s.needCode(w, in.Code) {
		return
	}
	req, clamped, ok := s.sessionCall(w, in)
	if !ok {
		return
	}
	e, err := s.sessions.claim(id)
	switch {
	case errors.Is(err, errBusySession) && !s.sessions.ownedBy(id, owner):
		s.notFound(w, noSession)
		return
	case e != nil && !ownedBy(e, owner):
		s.sessions.unclaim(e)
		s.notFound(w, noSession)
		return
	case errors.Is(err, errBusySession):
		s.rejected.WithLabelValues("session_busy").Inc()
		writeError(w, http.StatusConflict, "session_busy", fmt.Sprintf("session %q is running another call; send the next one after it", id))
		return
	case e == nil:
		s.notFound(w, noSession)
		return
	}
	// Released as the call ends, before its answer is written: a client
	// that lists sessions once it has the result sees the call done.
	var release sync.Once
	defer release.Do(func() { s.sessions.unclaim(e) })
	// A call that can never fit beside its session is refused before a
	// spilled session is loaded for it: the load would only take room
	// (and, the budget full, answer 429 for what no retry makes fit).
	if s.sessions.spill != nil {
		if err := s.sessions.neverFits(s.memoryLimit(req), e.held); err != nil {
			s.writeAnswer(w, s.budgetAnswer(err))
			return
		}
	}
	if err := s.sessions.bringBack(r.Context(), e); err != nil {
		s.cfg.Logger.Warn("session", slog.String("id", id), slog.String("event", "load"), slog.String("error", err.Error()))
		if errors.Is(err, airlock.ErrSessionClosed) {
			s.notFound(w, noSession)
			return
		}
		if a := s.budgetAnswer(err); a.status > 0 {
			s.writeAnswer(w, a)
			return
		}
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	sess := e.sess
	s.execute(w, r, req, clamped, e.held, sess.Run, func(res *airlock.Result) any {
		release.Do(func() { s.sessions.release(e, heldBy(sess)) })
		if s.sessions.spill != nil {
			s.sessions.fit()
		}
		if res.Error != nil && (errors.Is(res.Error, airlock.ErrSessionClosed) || errors.Is(res.Error, airlock.ErrSessionExpired)) {
			return nil // ended between the look-up and the call
		}
		return SessionResult{Result: NewResult(res, s.python, true), RolledBack: res.RolledBack}
	})
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SessionStore != nil {
		s.storeFork(w, r)
		return
	}
	from := r.PathValue("id")
	owner := ownerOf(r)
	if !s.sessions.existsFor(from, owner) {
		s.notFound(w, fmt.Sprintf("no session %q (it may have expired or been deleted)", from))
		return
	}
	if !s.roomForOneMore(w) || !s.clientRoom(w, owner, s.sessions.heldOf(from)) {
		return
	}
	fork, held, err := s.sessions.fork(r.Context(), from)
	switch {
	case err != nil:
		s.placeError(w, err)
		return
	case fork == nil:
		s.notFound(w, fmt.Sprintf("no session %q (it may have expired or been deleted)", from))
		return
	}
	s.sessions.addHeld(fork, owner, held)
	s.cfg.Logger.Info("session", slog.String("id", fork.ID()), slog.String("event", "fork"), slog.String("from", from))
	writeJSON(w, http.StatusCreated, SessionInfo{ID: fork.ID()})
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SessionStore != nil {
		s.storeDelete(w, r)
		return
	}
	id := r.PathValue("id")
	sess, found := s.sessions.removeOwnedEntry(id, ownerOf(r))
	if !found {
		s.notFound(w, fmt.Sprintf("no session %q (it may have expired or been deleted)", id))
		return
	}
	if sess != nil {
		sess.Close(context.Background()) // waits for a running call
	}
	s.cfg.Logger.Info("session", slog.String("id", id), slog.String("event", "delete"))
	w.WriteHeader(http.StatusNoContent)
}
