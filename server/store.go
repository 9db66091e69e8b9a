package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/airlock-sandbox/airlock"
)

// SessionStore holds sessions outside the process, so that any replica of
// a server can continue any session (Config.SessionStore; RedisStore).
// Without one, sessions live in the process (the default): faster, but a
// second replica answers 404 and a restart loses them.
//
// Between calls a stored session is its saved state (Session.Save); a
// call takes the session's lock (Begin), runs on a live session loaded
// from that state, stores the new state (Commit) and lets go (Release).
type SessionStore interface {
	// Name names the store in errors and logs, without credentials.
	Name() string
	// Create stores sess (just made) as a new session and returns its ID.
	Create(ctx context.Context, sess *airlock.Session) (string, error)
	// Begin takes session id's lock for one call and loads it into sb
	// under opts: ErrNoSession, ErrSessionBusy, a *StoreError or a
	// *StateError.
	Begin(ctx context.Context, sb *airlock.Sandbox, id string, opts airlock.LoadOptions) (StoreCall, error)
	// Fork copies session id's state as a new session, and returns its ID.
	Fork(ctx context.Context, id string) (string, error)
	// Delete removes session id (ErrNoSession if there is none).
	Delete(ctx context.Context, id string) error
	// List is the stored sessions, oldest first.
	List(ctx context.Context) (SessionList, error)
}

// StoreCall is one call's hold on a stored session (SessionStore.Begin).
type StoreCall interface {
	// Session is the live session the call runs on.
	Session() *airlock.Session
	// Commit stores the state the call left (res is its result): ErrLeaseLost
	// if the lock was lost meanwhile (the state is then not written),
	// ErrNoSession if the session was deleted, or a *StoreError.
	Commit(ctx context.Context, res *airlock.Result) error
	// Release lets go of the lock; it may be called more than once.
	Release()
}

// Errors of a SessionStore.
var (
	// ErrNoSession: no stored session has that ID (never made, deleted
	// or expired).
	ErrNoSession = errors.New("no such session (it may have expired or been deleted)")
	// ErrSessionBusy: another call holds the session's lock, maybe on
	// another replica.
	ErrSessionBusy = errors.New("session is running another call")
	// ErrLeaseLost: the call outlived its lock's lease (the store was
	// unreachable to renew it, or this replica stalled), so another call
	// may have taken the session: this call's state was not stored.
	ErrLeaseLost = errors.New("the session's lock was lost during the call; its state was not stored")
	// ErrStoreUnavailable is what every *StoreError is (errors.Is).
	ErrStoreUnavailable = errors.New("session store unavailable")
)

// StoreError is a session store that could not be reached or answered in
// time: the session is unchanged in the store (writes are atomic), and the
// request may be retried. HTTP answers it 503 session_store_unavailable.
type StoreError struct {
	Store string // the store's Name
	Op    string // what was being done
	Err   error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("session store %s unavailable (%s): %v", e.Store, e.Op, e.Err)
}

func (e *StoreError) Unwrap() error        { return e.Err }
func (e *StoreError) Is(target error) bool { return target == ErrStoreUnavailable }

// StateError is a stored session's state that the Sandbox refused to
// load: not signed with its session key (airlock.ErrSessionUnauthenticated,
// e.g. written into the store by someone without the key), corrupt, made
// by another image, or over the limits. HTTP answers it 500
// session_state_rejected; the state is left in the store as it is.
type StateError struct {
	ID  string
	Err error
}

func (e *StateError) Error() string {
	return fmt.Sprintf("stored state of session %q refused: %v", e.ID, e.Err)
}

func (e *StateError) Unwrap() error { return e.Err }

// errorAnswer is an error a handler's shape function gives execute to
// write instead of a result (a store that failed after the run).
type errorAnswer struct {
	status     int
	kind, msg  string
	retryAfter bool
}

// storeAnswer is how HTTP answers a store's error.
func (s *Server) storeAnswer(err error) errorAnswer {
	var stateErr *StateError
	switch {
	case errors.Is(err, ErrNoSession):
		s.rejected.WithLabelValues("no_session").Inc()
		return errorAnswer{status: http.StatusNotFound, kind: "not_found", msg: err.Error()}
	case errors.Is(err, ErrSessionBusy):
		s.rejected.WithLabelValues("session_busy").Inc()
		return errorAnswer{status: http.StatusConflict, kind: "session_busy", msg: err.Error() + "; send the next one after it"}
	case errors.Is(err, ErrLeaseLost):
		return errorAnswer{status: http.StatusConflict, kind: "session_lease_lost", msg: err.Error()}
	case errors.Is(err, ErrStoreUnavailable):
		s.rejected.WithLabelValues("session_store_unavailable").Inc()
		return errorAnswer{status: http.StatusServiceUnavailable, kind: "session_store_unavailable", msg: err.Error(), retryAfter: true}
	case errors.As(err, &stateErr):
		return errorAnswer{status: http.StatusInternalServerError, kind: "session_state_rejected", msg: err.Error()}
	}
	return errorAnswer{status: -1}
}

func (s *Server) writeAnswer(w http.ResponseWriter, a errorAnswer) {
	if a.retryAfter {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, a.status, a.kind, a.msg)
}

// storeError answers err of a store: its own errors as storeAnswer says,
// the Sandbox's as sessionError.
func (s *Server) storeError(w http.ResponseWriter, err error) {
	if a := s.storeAnswer(err); a.status > 0 {
		if a.status >= 500 {
			s.cfg.Logger.Warn("session store", slog.String("store", s.cfg.SessionStore.Name()), slog.String("error", err.Error()))
		}
		s.writeAnswer(w, a)
		return
	}
	s.sessionError(w, err)
}

func (s *Server) storeNewSession(w http.ResponseWriter, r *http.Request, opts airlock.SessionOptions) {
	sess, err := s.cfg.Sandbox.NewSession(r.Context(), opts)
	if err != nil {
		s.sessionError(w, err)
		return
	}
	id, err := s.cfg.SessionStore.Create(r.Context(), sess)
	if err != nil {
		s.storeError(w, err)
		return
	}
	s.cfg.Logger.Info("session", slog.String("id", id), slog.String("event", "new"), slog.String("store", s.cfg.SessionStore.Name()))
	writeJSON(w, http.StatusCreated, SessionInfo{ID: id})
}

func (s *Server) storeSessionRun(w http.ResponseWriter, r *http.Request, in SessionRunRequest) {
	id := r.PathValue("id")
	req, clamped, ok := s.sessionCall(w, in)
	if !ok {
		return
	}
	call, err := s.cfg.SessionStore.Begin(r.Context(), s.cfg.Sandbox, id, airlock.LoadOptions{MaxLimits: s.cfg.MaxLimits})
	if err != nil {
		s.storeError(w, err)
		return
	}
	var release sync.Once
	defer release.Do(call.Release)
	var commitErr error
	run := func(ctx context.Context, req airlock.Request) (*airlock.Result, error) {
		res, err := call.Session().Run(ctx, req)
		// The call ran: its state is stored even if the client has left.
		commitErr = call.Commit(context.WithoutCancel(ctx), res)
		// Released before the answer is written, as in-process sessions
		// are: a client that lists sessions once it has the result sees
		// the call done.
		release.Do(call.Release)
		return res, err
	}
	s.execute(w, r, req, clamped, 0, run, func(res *airlock.Result) any {
		if commitErr != nil {
			s.cfg.Logger.Warn("session store", slog.String("id", id), slog.String("store", s.cfg.SessionStore.Name()), slog.String("error", commitErr.Error()))
			if a := s.storeAnswer(commitErr); a.status > 0 {
				return a
			}
			return errorAnswer{status: http.StatusInternalServerError, kind: "internal", msg: commitErr.Error()}
		}
		return SessionResult{Result: NewResult(res, s.python, true), RolledBack: res.RolledBack}
	})
}

func (s *Server) storeFork(w http.ResponseWriter, r *http.Request) {
	from := r.PathValue("id")
	id, err := s.cfg.SessionStore.Fork(r.Context(), from)
	if err != nil {
		s.storeError(w, err)
		return
	}
	s.cfg.Logger.Info("session", slog.String("id", id), slog.String("event", "fork"), slog.String("from", from))
	writeJSON(w, http.StatusCreated, SessionInfo{ID: id})
}

func (s *Server) storeDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.cfg.SessionStore.Delete(r.Context(), id); err != nil {
		s.storeError(w, err)
		return
	}
	s.cfg.Logger.Info("session", slog.String("id", id), slog.String("event", "delete"))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) storeList(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.SessionStore.List(r.Context())
	if err != nil {
		s.storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}
