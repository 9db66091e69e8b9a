//go:build unix

package bench

import (
	"syscall"
	"testing"
	"time"
)

// reportRusage adds the process's page faults and user and system CPU
// time per operation, measured around f: where a run's time goes besides
// the wall clock (copy-on-write faults show up as faults and system time).
func reportRusage(b *testing.B, f func()) {
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	f()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	n := float64(b.N)
	b.ReportMetric(float64(after.Minflt-before.Minflt)/n, "faults/op")
	b.ReportMetric(float64(time.Duration(after.Utime.Nano()-before.Utime.Nano()).Microseconds())/n, "user-µs/op")
	b.ReportMetric(float64(time.Duration(after.Stime.Nano()-before.Stime.Nano()).Microseconds())/n, "sys-µs/op")
}
