package server

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

func TestClampHugeTimeoutWithoutMaximum(t *testing.T) {
	// Maxima set for memory only: the timeout has no server maximum, yet a
	// huge value must not wrap into a negative duration.
	l, clamped := clampLimits(RunLimits{TimeoutMS: math.MaxInt64}, airlock.Limits{}, airlock.Limits{Memory: 64 << 20})
	if l.Timeout <= 0 || l.Timeout != time.Duration(math.MaxInt64/time.Millisecond)*time.Millisecond {
		t.Fatalf("timeout = %v", l.Timeout)
	}
	if !slices.Contains(clamped, "timeout_ms") {
		t.Fatalf("clamped = %v", clamped)
	}
	l, clamped = clampLimits(RunLimits{TimeoutMS: 1500}, airlock.Limits{}, airlock.Limits{})
	if l.Timeout != 1500*time.Millisecond || len(clamped) != 0 {
		t.Fatalf("ordinary timeout changed: %v %v", l.Timeout, clamped)
	}
}

// A limit the client leaves out takes the Sandbox's default, and the
// server's maximum holds for it too: a server that allows 5 s must not run
// a request without limits for the default 10 s. A fuel of 0 is no cap.
func TestClampOmittedLimitsTakeTheMaxima(t *testing.T) {
	maxima := airlock.Limits{Timeout: 5 * time.Second, Memory: 64 << 20, Output: 1 << 20, FSFiles: 100, Fuel: 1e9}
	l, clamped := clampLimits(RunLimits{}, airlock.DefaultLimits(), maxima)
	want := airlock.Limits{Timeout: 5 * time.Second, Memory: 64 << 20, Output: 1 << 20, FSBytes: airlock.DefaultLimits().FSBytes,
		FSFiles: 100, HostCalls: airlock.DefaultLimits().HostCalls, HostPayload: airlock.DefaultLimits().HostPayload, Fuel: 1e9, Threads: airlock.DefaultLimits().Threads}
	if l != want {
		t.Fatalf("limits %+v, want %+v", l, want)
	}
	if len(clamped) != 0 {
		t.Fatalf("clamped %v: the header names only what the client sent", clamped)
	}
	// What the client sends below the maxima is kept.
	if l, clamped := clampLimits((RunLimits{TimeoutMS: 200, Memory: 32 << 20}), airlock.DefaultLimits(), maxima); l.Timeout != 200*time.Millisecond || l.Memory != 32<<20 || slices.Contains(clamped, "memory") {
		t.Fatalf("limits %+v clamped %v", l, clamped)
	}
}
