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
	l, clamped := RunLimits{TimeoutMS: math.MaxInt64}.clamp(airlock.Limits{Memory: 64 << 20})
	if l.Timeout <= 0 || l.Timeout != time.Duration(math.MaxInt64/time.Millisecond)*time.Millisecond {
		t.Fatalf("timeout = %v", l.Timeout)
	}
	if !slices.Contains(clamped, "timeout_ms") {
		t.Fatalf("clamped = %v", clamped)
	}
	l, clamped = RunLimits{TimeoutMS: 1500}.clamp(airlock.Limits{})
	if l.Timeout != 1500*time.Millisecond || len(clamped) != 0 {
		t.Fatalf("ordinary timeout changed: %v %v", l.Timeout, clamped)
	}
}
