package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
)

// ClientToken is one client of an HTTP server with several bearer tokens
// (Config.Clients): Name tells it apart in logs and quotas (never the
// token, which is a secret).
type ClientToken struct {
	Name, Token string
}

// ErrClientQuota is what a client's requests past its own share are
// refused with (errors.Is): Config.MaxSessionsPerClient sessions, or
// Config.MemoryPerClient bytes held by its sessions and runs in flight.
var ErrClientQuota = errors.New("client quota exceeded")

// quotaError is a client's request past its memory quota: retry when its
// runs in flight may end (429), or never until it holds less (507).
type quotaError struct {
	client            string
	need, used, quota int64
	retry             bool
}

func (e *quotaError) Error() string {
	if e.retry {
		return fmt.Sprintf("%v: client %q holds %s of its %s memory quota (sessions and runs in flight) and this needs %s; retry when its runs end",
			ErrClientQuota, e.client, mib(e.used), mib(e.quota), mib(e.need))
	}
	return fmt.Sprintf("%v: client %q holds %s of its %s memory quota in its sessions and this needs %s; delete one (DELETE /v1/sessions/{id}) or ask for a lower memory limit",
		ErrClientQuota, e.client, mib(e.used), mib(e.quota), mib(e.need))
}

func (e *quotaError) Is(target error) bool { return target == ErrClientQuota }

type clientKey struct{}

// clientOf is the client whose token the request carried: "" when the
// server tells no clients apart (no token, or one Config.Token alone).
func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}

// ownerOf is what sessions are bound to for the request's client: nil
// (anyone's) when clients are not told apart.
func ownerOf(r *http.Request) any {
	if c := clientOf(r.Context()); c != "" {
		return c
	}
	return nil
}

// tokenHash is a client's token as auth compares it.
type tokenHash struct {
	name string
	sum  [32]byte
}

// clientTokens checks config's Clients (with Token as the client
// "default") and returns their hashes: nil when clients are not told
// apart. config names the struct they came from, for its errors.
func clientTokens(config, token string, clients []ClientToken) ([]tokenHash, error) {
	if len(clients) == 0 {
		return nil, nil
	}
	given := len(clients) // their indexes in config's Clients end here
	if token != "" {
		clients = append([]ClientToken{{Name: "default", Token: token}}, clients...)
	}
	names, tokens := map[string]bool{}, map[string]bool{}
	var out []tokenHash
	for i, c := range clients {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("server: %s.Clients[%d] has no name", config, i-(len(clients)-given))
		case c.Token == "":
			return nil, fmt.Errorf("server: client %q has an empty token", c.Name)
		case names[c.Name]:
			return nil, fmt.Errorf("server: client name %q is given twice (%s.Token is the client \"default\")", c.Name, config)
		case tokens[c.Token]:
			// Named by client, never by token: the error may be logged.
			return nil, fmt.Errorf("server: client %q has the same token as another client", c.Name)
		}
		names[c.Name], tokens[c.Token] = true, true
		out = append(out, tokenHash{name: c.Name, sum: sha256.Sum256([]byte("Bearer " + c.Token))})
	}
	return out, nil
}

// clientAuth lets through requests that carry one of the clients' tokens,
// with the client in their context; the others get 401, after refused().
// Every token is compared, in constant time, so the time taken tells
// neither a token nor which client's came close.
func clientAuth(clients []tokenHash, h http.Handler, refused func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		match := -1
		for i := range clients {
			if subtle.ConstantTimeCompare(got[:], clients[i].sum[:]) == 1 {
				match = i
			}
		}
		if match < 0 {
			refused()
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, clients[match].name)))
	})
}

// ownedLocked tells whether e is owner's to use (under mu).
func ownedLocked(e *sessionEntry, owner any) bool { return e.owner == nil || e.owner == owner }

// clientHeldLocked is what owner's sessions hold (in memory or spilled)
// and its runs in flight reserve (under mu).
func (t *sessions) clientHeldLocked(owner any) int64 {
	sum := t.clientRuns[owner]
	for _, e := range t.byID {
		if e.owner == owner && !t.ended(e) {
			sum += e.held
		}
	}
	return sum
}

// clientReserve reserves need for owner within quota (no check when
// quota is 0; nothing when owner is nil); for a run (run), it is counted
// until clientUnreserve; a *quotaError's retry tells whether its runs in flight hold part of
// it (waiting helps). The caller gives it back with clientUnreserve.
func (t *sessions) clientReserve(owner any, need, quota int64, run bool) error {
	if owner == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if quota > 0 {
		if used := t.clientHeldLocked(owner); used+need > quota {
			return &quotaError{client: fmt.Sprint(owner), need: need, used: used, quota: quota, retry: t.clientRuns[owner] > 0}
		}
	}
	if run {
		if t.clientRuns == nil {
			t.clientRuns = map[any]int64{}
		}
		t.clientRuns[owner] += need
	}
	return nil
}

func (t *sessions) clientUnreserve(owner any, need int64) {
	if owner == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.clientRuns[owner] -= need; t.clientRuns[owner] <= 0 {
		delete(t.clientRuns, owner)
	}
}

// quotaAnswer answers a request past its client's quota: 429 with
// Retry-After when its runs in flight hold part of it, else 507.
func (s *Server) quotaAnswer(err error) errorAnswer {
	var q *quotaError
	if !errors.As(err, &q) {
		return errorAnswer{status: -1}
	}
	s.rejected.WithLabelValues("client_quota").Inc()
	if q.retry {
		return errorAnswer{status: http.StatusTooManyRequests, kind: "client_quota", msg: err.Error(), retryAfter: true}
	}
	return errorAnswer{status: http.StatusInsufficientStorage, kind: "client_quota", msg: err.Error()}
}
