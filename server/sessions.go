package server

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// SessionRequest is the body of POST /v1/sessions: what every call of the
// session starts from. Limits are each call's defaults (fs_bytes and
// fs_files bound the session's files as a whole), clamped to the server's
// maxima.
type SessionRequest struct {
	Files  InputFiles        `json:"files,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Limits RunLimits         `json:"limits,omitzero"`
	Tools  []string          `json:"tools,omitempty"`
}

// SessionRunRequest is the body of POST /v1/sessions/{id}/run: a RunRequest
// without what a session refuses (deterministic, seed: its clock and hash
// seed were fixed when it started). Files are added to the session's.
type SessionRunRequest struct {
	Code     string            `json:"code"`
	Filename string            `json:"filename,omitempty"`
	Files    InputFiles        `json:"files,omitempty"`
	Stdin    []byte            `json:"stdin,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Limits   RunLimits         `json:"limits,omitzero"`
	Tools    []string          `json:"tools,omitempty"`
	// RichOutput is as for RunRequest: on unless false.
	RichOutput *bool `json:"rich_output,omitempty"`
	// Network narrows the server's --allow-net rules for this call, as
	// for RunRequest; omitted, the call has the server's own policy.
	Network []string `json:"network,omitempty"`
}

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

// SessionInfo answers POST /v1/sessions and POST /v1/sessions/{id}/fork.
type SessionInfo struct {
	ID string `json:"id"`
}

// SessionResult is a session call's result: a Result and whether the call
// was rolled back (it hit a limit, crashed or left the interpreter, and
// the session keeps its state from before it).
type SessionResult struct {
	Result
	RolledBack bool `json:"rolled_back"`
}

// sessions are the live sessions by ID. They belong to the Sandbox, which
// applies its TTL and cap; the table forgets those that ended. It keeps
// what GET /v1/sessions lists itself, so listing never waits for a
// session's lock (held through a call).
type sessions struct {
	mu   sync.Mutex
	byID map[string]*sessionEntry
}

type sessionEntry struct {
	sess     *airlock.Session
	owner    any // the MCP client that made it; nil for anyone's
	created  time.Time
	lastCall time.Time // when the last call ended; zero before one
	calls    int       // calls made through the server, ended
	running  bool      // an HTTP call is in progress (claim)
}

// SessionStatus is one session in GET /v1/sessions.
type SessionStatus struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	// LastCall is when the last call ended; absent before the first.
	LastCall *time.Time `json:"last_call,omitempty"`
	Calls    int        `json:"calls"`
	Running  bool       `json:"running"`
}

// SessionList answers GET /v1/sessions, oldest first.
type SessionList struct {
	Sessions []SessionStatus `json:"sessions"`
}

// claim marks s as running a call and tells whether it was free: a session
// runs one call at a time, and a second one waiting for it would hold a
// run slot doing nothing (one client could so take every slot).
func (t *sessions) claim(s *airlock.Session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[s.ID()]
	if e == nil || e.sess != s {
		return true // deleted meanwhile: the call fails as closed
	}
	if e.running {
		return false
	}
	e.running = true
	return true
}

func (t *sessions) release(s *airlock.Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byID[s.ID()]; e != nil && e.sess == s {
		e.running = false
		e.calls++
		e.lastCall = time.Now()
	}
}

func (t *sessions) add(s *airlock.Session) { t.addOwned(s, nil) }

// addOwned adds s as owner's: get and remove find it for owner only
// (any owner when nil).
func (t *sessions) addOwned(s *airlock.Session, owner any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID = map[string]*sessionEntry{}
	}
	// Expired sessions are dropped here, so the table stays as small as
	// the Sandbox's cap however many come and go.
	t.dropEnded()
	t.byID[s.ID()] = &sessionEntry{sess: s, owner: owner, created: time.Now()}
}

func (t *sessions) dropEnded() {
	for id, e := range t.byID {
		if e.sess.Err() != nil {
			delete(t.byID, id)
		}
	}
}

// get returns a live session, or nil.
func (t *sessions) get(id string) *airlock.Session { return t.getOwned(id, nil) }

// getOwned returns a live session that is owner's or anyone's, or nil
// (also for another's, so that nobody learns it exists).
func (t *sessions) getOwned(id string, owner any) *airlock.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || (e.owner != nil && e.owner != owner) {
		return nil
	}
	if e.sess.Err() != nil {
		delete(t.byID, id)
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

// len is the number of sessions in the table (ended ones included until
// they are dropped).
func (t *sessions) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// list is the live sessions, oldest first.
func (t *sessions) list() SessionList {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropEnded()
	out := SessionList{Sessions: make([]SessionStatus, 0, len(t.byID))}
	for id, e := range t.byID {
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
		writeJSON(w, http.StatusOK, s.sessions.list())
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
		writeError(w, http.StatusNotImplemented, "sessions_unavailable", err.Error())
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

func (s *Server) session(w http.ResponseWriter, r *http.Request) *airlock.Session {
	id := r.PathValue("id")
	sess := s.sessions.get(id)
	if sess == nil {
		s.notFound(w, fmt.Sprintf("no session %q (it may have expired or been deleted)", id))
	}
	return sess
}

func (s *Server) handleNewSession(w http.ResponseWriter, r *http.Request) {
	var in SessionRequest
	// Every field is optional, so is the body.
	if r.ContentLength != 0 && !s.decodeBody(w, r, &in) {
		return
	}
	limits, _ := s.clampLimits(w, in.Limits)
	opts := airlock.SessionOptions{Limits: limits, Files: in.Files, Env: in.Env, Tools: in.Tools}
	if s.cfg.SessionStore != nil {
		s.storeNewSession(w, r, opts)
		return
	}
	sess, err := s.cfg.Sandbox.NewSession(r.Context(), opts)
	if err != nil {
		s.sessionError(w, err)
		return
	}
	s.sessions.add(sess)
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
	sess := s.session(w, r)
	if sess == nil {
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
	if !s.sessions.claim(sess) {
		s.rejected.WithLabelValues("session_busy").Inc()
		writeError(w, http.StatusConflict, "session_busy", fmt.Sprintf("session %q is running another call; send the next one after it", sess.ID()))
		return
	}
	// Released as the call ends, before its answer is written: a client
	// that lists sessions once it has the result sees the call done.
	var release sync.Once
	defer release.Do(func() { s.sessions.release(sess) })
	s.execute(w, r, req, clamped, sess.Exec, func(res *airlock.Result) any {
		release.Do(func() { s.sessions.release(sess) })
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
	sess := s.session(w, r)
	if sess == nil {
		return
	}
	fork, err := sess.Fork()
	if err != nil {
		s.sessionError(w, err)
		return
	}
	s.sessions.add(fork)
	s.cfg.Logger.Info("session", slog.String("id", fork.ID()), slog.String("event", "fork"), slog.String("from", sess.ID()))
	writeJSON(w, http.StatusCreated, SessionInfo{ID: fork.ID()})
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SessionStore != nil {
		s.storeDelete(w, r)
		return
	}
	id := r.PathValue("id")
	sess := s.sessions.remove(id)
	if sess == nil || sess.Err() != nil {
		s.notFound(w, fmt.Sprintf("no session %q (it may have expired or been deleted)", id))
		return
	}
	sess.Close() // waits for a running call
	s.cfg.Logger.Info("session", slog.String("id", id), slog.String("event", "delete"))
	w.WriteHeader(http.StatusNoContent)
}
