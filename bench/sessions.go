package bench

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// SessionState is what a session holds before its operations are timed.
type SessionState struct {
	Name  string
	Setup string // run once in the session
}

// SessionStates are measured by `airlock bench --sessions` and
// BenchmarkSession: an almost empty session, and one holding ~10 MB of
// Python objects (random bytes, so no page of it matches the snapshot's).
var SessionStates = []SessionState{
	{"small", "counter = 0"},
	{"10MB", "import random\ncounter = 0\nblob = random.randbytes(10 << 20)\nwords = [str(i) for i in range(20000)]"},
}

// SessionCall is the call timed in a session: it advances the state.
const SessionCall = "counter += 1"

// SessionStats are medians of a session's operations over a number of
// runs, with a fresh run of the same call measured alongside.
type SessionStats struct {
	State      string
	Runs       int
	Call       time.Duration // Session.Run of SessionCall
	Fresh      time.Duration // Sandbox.Run of "counter = 1" in a fresh instance
	Fork       time.Duration // Session.Fork (and nothing run in the fork)
	Save       time.Duration // Session.Save into memory
	Load       time.Duration // Sandbox.LoadSession from memory
	SavedBytes int
	// HeldImage and HeldFiles are what the live session held between
	// calls (Session.HeldMemory), after its set-up and the calls.
	HeldImage, HeldFiles int64
}

// MeasureSession builds st in a new session, then times runs of each
// operation.
func MeasureSession(ctx context.Context, sb *airlock.Sandbox, st SessionState, runs int) (SessionStats, error) {
	if runs < 1 {
		return SessionStats{}, fmt.Errorf("bench: need at least one run")
	}
	sess, err := sb.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		return SessionStats{}, fmt.Errorf("bench: %w", err)
	}
	defer sess.Close(ctx)
	if err := runOK(sess.Run(ctx, airlock.Request{Code: st.Setup})); err != nil {
		return SessionStats{}, fmt.Errorf("bench: session %s: setup: %w", st.Name, err)
	}
	var saved bytes.Buffer
	ops := []struct {
		name string
		op   func() error
	}{
		{"call", func() error { return runOK(sess.Run(ctx, airlock.Request{Code: SessionCall})) }},
		{"fresh run", func() error { return runOK(sb.Run(ctx, airlock.Request{Code: "counter = 1"})) }},
		{"fork", func() error {
			f, err := sess.Fork()
			if err == nil {
				f.Close(ctx)
			}
			return err
		}},
		{"save", func() error { saved.Reset(); return sess.Save(&saved) }},
		{"load", func() error {
			l, err := sb.LoadSession(ctx, bytes.NewReader(saved.Bytes()), airlock.LoadOptions{})
			if err == nil {
				l.Close(ctx)
			}
			return err
		}},
	}
	// Each operation is timed in its own loop: interleaved, a load's
	// ~100 MB of garbage would be collected during the next call.
	var medians [5]time.Duration
	for i, o := range ops {
		d := make([]time.Duration, runs)
		for j := range runs {
			t := time.Now()
			if err := o.op(); err != nil {
				return SessionStats{}, fmt.Errorf("bench: session %s: %s: %w", st.Name, o.name, err)
			}
			d[j] = time.Since(t)
		}
		medians[i] = Median(d)
		runtime.GC()
	}
	heldImage, heldFiles := sess.HeldMemory()
	return SessionStats{
		State: st.Name, Runs: runs, HeldImage: heldImage, HeldFiles: heldFiles,
		Call: medians[0], Fresh: medians[1], Fork: medians[2], Save: medians[3], Load: medians[4],
		SavedBytes: saved.Len(),
	}, nil
}

// runOK turns a run that did not exit 0 into an error.
func runOK(res *airlock.Result, err error) error {
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	return err
}

// Median is the middle of d (the upper one of an even count), d unchanged.
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, 50)
}
