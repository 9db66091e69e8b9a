package main

import (
	"os"
	"strconv"
	"strings"
)

// cpuTicks are the machine's CPU times, summed over its CPUs, from the
// first line of /proc/stat: all of them, and those the hypervisor gave
// to another guest while this one had work ("steal").
type cpuTicks struct{ total, steal uint64 }

// readCPUTicks reads them; false where there is no /proc/stat.
func readCPUTicks() (cpuTicks, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is counted in user already.
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}, false
	}
	var t cpuTicks
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTicks{}, false
		}
		t.total += n
		if i == 7 {
			t.steal = n
		}
	}
	return t, true
}

// stealSince is the share of the machine's CPU time stolen since start, in
// percent, nil where it cannot be known. On a shared VM a run's tail waits
// on it: a p99 is only comparable with the steal it was measured under.
func stealSince(start cpuTicks, ok bool) *float64 {
	end, endOK := readCPUTicks()
	if !ok || !endOK || end.total <= start.total {
		return nil
	}
	pct := 100 * float64(end.steal-start.steal) / float64(end.total-start.total)
	return &pct
}
