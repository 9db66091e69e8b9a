package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// EnvReportPeak makes the airlock command write its own peak RSS to stderr
// as it exits, as hwmMark and the KiB (bench --cli reads it: a child
// started from Go cannot tell its peak by its rusage, see hwmMark).
const EnvReportPeak = "AIRLOCK_BENCH_REPORT_PEAK"

// WritePeak writes this process's peak RSS (VmHWM) to w as ProcessPeak
// reads it; nothing where /proc is missing.
func WritePeak(w io.Writer) {
	if v, ok := ProcStatus("self", "VmHWM"); ok {
		fmt.Fprintf(w, "%s%s\n", hwmMark, strings.TrimSuffix(v, " kB"))
	}
}

// ProcStatus is field's value ("12345 kB") in /proc/PID/status, for pid
// a number or "self"; false where there is none.
func ProcStatus(pid, field string) (string, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// PythonPeakPrefix, put before a `python -c` program, makes the
// interpreter report its peak RSS the same way as it exits.
var PythonPeakPrefix = hwmPrefix

// ProcessPeak is the peak RSS a finished child reported in its stderr,
// else what its rusage says (which counts this process's peak in).
func ProcessPeak(stderr []byte, ps *os.ProcessState) int64 {
	if _, hwm, ok := bytes.Cut(stderr, []byte(hwmMark)); ok {
		var kib int64
		if _, err := fmt.Sscan(string(hwm), &kib); err == nil {
			return kib << 10
		}
	}
	return maxRSS(ps)
}
