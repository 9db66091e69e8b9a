package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-sandbox/airlock"
)

// setupBudget gives the MCP server's session table the memory budget
// (a spiller) that serve's has, as MCPConfig says.
func (m *mcpServer) setupBudget() {
	if m.cfg.MemoryBudget == 0 {
		m.cfg.MemoryBudget, _ = DefaultMemoryBudget()
	}
	if m.cfg.MemoryBudget < 0 {
		m.cfg.MemoryBudget = 0
		return
	}
	logger := m.cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m.table.spill = &spiller{budget: m.cfg.MemoryBudget, sb: m.cfg.Sandbox, load: airlock.LoadOptions{MaxLimits: m.cfg.MaxLimits},
		parent: m.cfg.SpillDir, log: logger,
		// Counted, not registered: the MCP server has no metrics endpoint.
		spilled: prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_mcp_sessions_spilled_total"}),
		loaded:  prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_mcp_sessions_unspilled_total"}),
	}
	if m.cfg.ManageGoMemoryLimit {
		m.table.manageHeap = true
		m.table.heapLimit(0)
	}
}

// mcpAdmitQueue is how many MCP runs may wait for memory at once.
const mcpAdmitQueue = 16

// admit reserves a run's memory limit (need) within owner's quota
// (MemoryPerClient) and the budget, as the HTTP server's runs do;
// alongside is what a called session holds.
func (m *mcpServer) admit(ctx context.Context, owner any, need, alongside int64) (func(), error) {
	// The client's own quota first: its runs wait for nobody else's.
	if err := m.table.clientReserve(owner, need, m.cfg.MemoryPerClient, true); err != nil {
		return nil, err
	}
	unclient := func() { m.table.clientUnreserve(owner, need) }
	if m.table.spill == nil {
		return unclient, nil
	}
	wait := m.cfg.MemoryWait
	if wait <= 0 {
		wait = DefaultMemoryWait
	}
	done, err := m.table.admitRun(ctx, need, alongside, wait, mcpAdmitQueue)
	if err != nil {
		unclient()
		return nil, err
	}
	return m.table.heapRun(need, func() { done(); unclient() }), nil
}

// mcpBudgetError is a refusal in MCP's form: a tool result flagged as an
// error whose text starts "error: KIND:", as run_python's others do; a
// client's quota names owner (ownerName) and says what frees it.
func mcpBudgetError(err error, owner any) string {
	var b *budgetError
	var q *quotaError
	switch {
	case errors.As(err, &q) && q.retry:
		return fmt.Sprintf("error: client_quota: %v: %s holds %s of its %s memory quota (sessions and calls in flight) and this call needs %s; retry when its other calls end",
			ErrClientQuota, ownerName(owner), mib(q.used), mib(q.quota), mib(q.need))
	case errors.As(err, &q):
		return fmt.Sprintf("error: client_quota: %v: %s holds %s of its %s memory quota in its sessions and this call needs %s; end a session it no longer needs (end_session), then retry",
			ErrClientQuota, ownerName(owner), mib(q.used), mib(q.quota), mib(q.need))
	case errors.As(err, &b):
		return fmt.Sprintf("error: memory_budget: %v", err)
	}
	return fmt.Sprintf("error: %v", err)
}

// newSessionFor starts a session for owner, within the Sandbox's cap
// (spilled sessions counted), owner's quotas and the memory budget;
// need is its first call's memory limit, which owner's memory quota
// must hold too.
func (m *mcpServer) newSessionFor(ctx context.Context, owner any, need int64) (*sessionEntry, string) {
	t := m.table
	if m.cfg.MaxSessionsPerClient > 0 && owner != nil {
		if n := t.countOwned(owner); n >= m.cfg.MaxSessionsPerClient {
			return nil, fmt.Sprintf("error: too_many_sessions: %v: %s holds %d sessions, the most one client may; end one it no longer needs (end_session), then pass session \"new\" again",
				ErrClientQuota, ownerName(owner), n)
		}
	}
	// Checked, not reserved: the call reserves it (admit) once the
	// session is made.
	if err := t.clientReserve(owner, need, m.cfg.MemoryPerClient, false); err != nil {
		return nil, mcpBudgetError(err, owner)
	}
	if t.spill != nil {
		if max := m.cfg.Sandbox.MaxSessions(); t.count() >= max {
			return nil, fmt.Sprintf("error: cannot start a session: %v (%d, spilled ones included)", airlock.ErrTooManySessions, max)
		}
	}
	sess, err := m.cfg.Sandbox.NewSession(ctx, airlock.SessionOptions{Limits: m.cfg.MaxLimits})
	if err != nil {
		return nil, fmt.Sprintf("error: cannot start a session: %v", err)
	}
	t.addHeld(sess, owner, heldBy(sess))
	e, _ := t.claim(sess.ID())
	if e == nil { // ended at once (closed by the Sandbox)
		return nil, "error: cannot start a session: it ended as it started"
	}
	return e, ""
}

// claimFor claims owner's session id for a call whose memory limit is
// need, loading it back if it was spilled: "" and the entry, or the
// error text to answer with.
func (m *mcpServer) claimFor(ctx context.Context, id string, owner any, need int64) (*sessionEntry, string) {
	t := m.table
	notFound := fmt.Sprintf("error: not_found: no session %q (it may have expired); pass session \"new\" to start one", id)
	e, err := t.claim(id)
	switch {
	case errors.Is(err, errBusySession):
		if !t.ownedBy(id, owner) {
			return nil, notFound
		}
		return nil, fmt.Sprintf("error: session_busy: session %q is running another call; send the next one after it", id)
	case e == nil:
		return nil, notFound
	case e.owner != nil && e.owner != owner:
		t.unclaim(e)
		return nil, notFound
	}
	// A call that can never fit beside its session is refused before a
	// spilled session is loaded for it, as serve's are: the load would
	// only move other sessions out for a call admit then refuses.
	if t.spill != nil {
		if err := t.neverFits(need, e.held); err != nil {
			t.unclaim(e)
			return nil, mcpBudgetError(err, owner)
		}
	}
	if err := t.bringBack(ctx, e); err != nil {
		t.unclaim(e)
		if errors.Is(err, airlock.ErrSessionClosed) {
			return nil, notFound
		}
		return nil, mcpBudgetError(err, owner)
	}
	return e, ""
}

// endCall releases e after its call and spills idle sessions past the
// budget.
func (m *mcpServer) endCall(e *sessionEntry) {
	m.table.release(e, heldBy(e.sess))
	if m.table.spill != nil {
		m.table.fit()
	}
}

// countOwned is how many sessions (spilled ones included) owner holds.
func (t *sessions) countOwned(owner any) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.byID {
		if e.owner == owner && !t.ended(e) {
			n++
		}
	}
	return n
}

// ownedBy tells whether session id is owner's or anyone's.
func (t *sessions) ownedBy(id string, owner any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	return e != nil && (e.owner == nil || e.owner == owner)
}

// removeOwnedEntry removes owner's session id, spilled or not: found is
// false for none, or another's.
func (t *sessions) removeOwnedEntry(id string, owner any) (*airlock.Session, bool) {
	if !t.ownedBy(id, owner) {
		return nil, false
	}
	return t.removeEntry(id)
}
