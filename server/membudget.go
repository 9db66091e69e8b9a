package server

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MemoryBudgetShare is the share of the process's memory limit that the
// default Config.MemoryBudget gives to sessions held between calls; the
// rest is for runs in flight (each up to its memory limit), images,
// pooled regions and the Go heap.
const MemoryBudgetShare = 0.6

// fallbackMemory is assumed when no limit can be read at all.
const fallbackMemory = 4 << 30

// DefaultMemoryBudget is the budget a zero Config.MemoryBudget takes:
// MemoryBudgetShare of the first limit found among the container's
// (cgroup v2 memory.max, or v1 memory.limit_in_bytes), GOMEMLIMIT, and
// physical memory. from names which, for the serve log.
func DefaultMemoryBudget() (budget int64, from string) {
	limit, from := memoryLimit("/sys/fs/cgroup")
	return int64(float64(limit) * MemoryBudgetShare), from
}

// noLimit is above any real limit: cgroup v1 writes "no limit" as the
// largest page-aligned int64.
const noLimit = 1 << 62

func memoryLimit(cgroupRoot string) (int64, string) {
	for _, f := range []struct{ path, name string }{
		{"memory.max", "cgroup memory.max"},
		{"memory/memory.limit_in_bytes", "cgroup memory.limit_in_bytes"},
	} {
		// "max" (v2's no limit) does not parse, and is passed over.
		if b, err := os.ReadFile(filepath.Join(cgroupRoot, f.path)); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < noLimit {
				return n, f.name
			}
		}
	}
	if n := debug.SetMemoryLimit(-1); n > 0 && n != math.MaxInt64 {
		return n, "GOMEMLIMIT"
	}
	if n, err := physicalMemory(); err == nil {
		return n, "physical memory"
	}
	return fallbackMemory, "assumed 4 GiB (no limit readable)"
}

// physicalMemory reads MemTotal from /proc/meminfo.
func physicalMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("meminfo: no MemTotal")
}

// ErrMemoryBudget is what the errors of a session or a run that cannot
// be placed within Config.MemoryBudget are (errors.Is). HTTP answers 507
// memory_budget when it could never fit, 429 memory_budget with
// Retry-After when runs and calls in flight hold the room (they give it
// back, or make their sessions movable, as they end).
var ErrMemoryBudget = errors.New("server memory budget exceeded")

// budgetError is a session or a run that cannot be placed now: never
// (over, 507) or not until runs and calls in flight end (429).
type budgetError struct {
	need, budget int64
	never        bool
	// what needs the room: "the session" unless set (a run's cap).
	what string
	// queueFull: the run was refused without waiting, as the most runs
	// the queue holds already waited for memory.
	queueFull bool
}

func (e *budgetError) Error() string {
	what := e.what
	if what == "" {
		what = "the session"
	}
	switch {
	case e.never && e.what != "":
		return fmt.Sprintf("%v: %s is %s, more than the whole budget of %s; ask for a lower memory limit (limits.memory)",
			ErrMemoryBudget, what, mib(e.need), mib(e.budget))
	case e.never:
		return fmt.Sprintf("%v: %s needs %s, more than the whole budget of %s; delete it (DELETE /v1/sessions/{id}) or hold less in it",
			ErrMemoryBudget, what, mib(e.need), mib(e.budget))
	case e.queueFull:
		return fmt.Sprintf("%v: %s (%s) does not fit beside the runs and calls in flight of the %s budget, and the queue of runs waiting for memory is full; retry later",
			ErrMemoryBudget, what, mib(e.need), mib(e.budget))
	}
	return fmt.Sprintf("%v: %s (%s) does not fit beside the runs and calls in flight of the %s budget; retry when they end",
		ErrMemoryBudget, what, mib(e.need), mib(e.budget))
}

func (e *budgetError) Is(target error) bool { return target == ErrMemoryBudget }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// countProcessMemory counts the process's resident memory now (the
// program, images, compiled code), room for the heap's own work and, from
// now on, the engine's idle regions within the budget: what the sessions
// and runs may take is what is left. Without the first two a server at
// its budget sat ~200 MiB above it (compiled code 129 MiB, images and
// idle regions the rest), without the room up to ~100 MiB more (results,
// a session's old state beside its new one).
func (s *Server) countProcessMemory(reg *prometheus.Registry) {
	t := &s.sessions
	if rss, err := residentBytes(); err == nil {
		t.fixed.Store(rss)
		t.goFixed.Store(min(goMemory(), rss))
	}
	t.heapRoom = max(minHeapRoom, s.cfg.MemoryBudget/8)
	var sampling sync.Mutex // the ticker's and dropIdle's: ended is taken once
	sample := func() {
		sampling.Lock()
		defer sampling.Unlock()
		// Runs ending from here on are counted twice until the next
		// sample, never missed: their regions may not be measured.
		ended := t.idleEnded.Load()
		var idle int64
		for _, p := range s.cfg.Sandbox.IdleMemory().Private {
			idle += p
		}
		t.idleRegions.Store(idle)
		t.idleEnded.Add(-ended)
	}
	sample()
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "airlock_idle_regions_dropped_total", Help: "Idle memory regions the engine kept for the next runs, dropped to keep within the memory budget.",
	})
	t.dropIdle = func() {
		dropped.Add(float64(s.cfg.Sandbox.DropIdleMemory()))
		sample()
	}
	s.stopSampling = make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				sample()
			case <-s.stopSampling:
				return
			}
		}
	}()
	reg.MustRegister(dropped, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_process_memory_counted_bytes", Help: "Memory counted within the budget besides sessions and runs: the process's resident memory at start, the engine's idle regions and the heap's room.",
	}, func() float64 { return float64(t.fixed.Load() + t.idleLoad() + t.heapRoom) }))
}

// goMemory is what the Go runtime holds of the process's memory: what its
// soft limit counts.
func goMemory() int64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64() - m[1].Value.Uint64())
}

// residentBytes is this process's resident memory (VmRSS).
func residentBytes() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/self/status")
}

// heapRun lowers the Go runtime's soft memory limit by a run's memory
// limit (need) while it runs, when the table manages it, and returns
// done extended to give it back.
func (t *sessions) heapRun(need int64, done func()) func() {
	if !t.manageHeap {
		return done
	}
	t.heapLimit(need)
	return func() { done(); t.heapLimit(-need) }
}

// heapLimit sets the Go runtime's soft memory limit to the budget less
// what is counted outside the heap: the memory limits of the runs in
// flight (delta: a run's starting or ending), whose memory is mapped
// outside it, and the process's memory besides the Go runtime's own
// (CountProcessMemory: the rest of fixed and the idle regions). It is
// never under the heap's start, what sessions hold and minHeapRoom: a
// limit below the live heap makes the collector run without end.
func (t *sessions) heapLimit(delta int64) {
	t.limitMu.Lock()
	defer t.limitMu.Unlock()
	budget := t.spill.budget
	runs := t.runsReserved.Add(delta)
	outside := runs + t.fixed.Load() - t.goFixed.Load() + t.idleLoad()
	// What sessions hold in the heap, and sessions on their way in.
	sessions := t.held() - outside - t.goFixed.Load() - t.heapRoom
	limit := max(budget-outside, t.goFixed.Load()+sessions+max(minHeapRoom, budget/8))
	debug.SetMemoryLimit(limit)
}

// minHeapRoom is the least room for the heap's own work (results, request
// bodies, a session being loaded, the collector's slack) the soft limit
// leaves beside the sessions: an eighth of the budget, at least this.
const minHeapRoom = 64 << 20
