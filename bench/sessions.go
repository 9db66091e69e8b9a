package bench

import (
	"bytes"
	"context"
	"fmt"
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
}

// MeasureSession builds st in a new session, then times runs of each
// operation, interleaved so that a noisy neighbour hits all of them alike.
func MeasureSession(ctx context.Context, sb *airlock.Sandbox, st SessionState, runs int) (SessionStats, error) {
	if runs < 1 {
		return SessionStats{}, fmt.Errorf("bench: need at least one run")
	}
	sess, err := sb.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		return SessionStats{}, fmt.Errorf("bench: %w", err)
	}
	defer sess.Close()
	if err := runOK(sess.Run(ctx, st.Setup)); err != nil {
		return SessionStats{}, fmt.Errorf("bench: session %s: setup: %w", st.Name, err)
	}
	var call, fresh, fork, save, load []time.Duration
	var saved bytes.Buffer
	for range runs {
		t := time.Now()
		if err := runOK(sess.Run(ctx, SessionCall)); err != nil {
			return SessionStats{}, fmt.Errorf("bench: session %s: call: %w", st.Name, err)
		}
		call = append(call, time.Since(t))

		t = time.Now()
		if err := runOK(sb.Run(ctx, airlock.Request{Code: "counter = 1"})); err != nil {
			return SessionStats{}, fmt.Errorf("bench: fresh run: %w", err)
		}
		fresh = append(fresh, time.Since(t))

		t = time.Now()
		f, err := sess.Fork()
		if err != nil {
			return SessionStats{}, fmt.Errorf("bench: session %s: fork: %w", st.Name, err)
		}
		fork = append(fork, time.Since(t))
		f.Close()

		saved.Reset()
		t = time.Now()
		if err := sess.Save(&saved); err != nil {
			return SessionStats{}, fmt.Errorf("bench: session %s: save: %w", st.Name, err)
		}
		save = append(save, time.Since(t))

		t = time.Now()
		loaded, err := sb.LoadSession(ctx, bytes.NewReader(saved.Bytes()))
		if err != nil {
			return SessionStats{}, fmt.Errorf("bench: session %s: load: %w", st.Name, err)
		}
		load = append(load, time.Since(t))
		loaded.Close()
	}
	return SessionStats{
		State: st.Name, Runs: runs,
		Call: median(call), Fresh: median(fresh), Fork: median(fork), Save: median(save), Load: median(load),
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

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, 50)
}
