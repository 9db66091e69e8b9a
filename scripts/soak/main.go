// Command soak drives `airlock serve` with a mixed load for a fixed time
// and samples the server: the long soak of SECURITY.md ("How it is
// tested"), reproducible with one command:
//
//	go run ./scripts/soak -duration 1h -out /tmp/soak
//
// It builds the airlock command (or takes -airlock), starts `airlock serve`
// on loopback with a memory budget, and runs -clients loops, each picking
// at random: plain runs, json+re runs, pandas runs, runs that hit each
// limit (timeout, memory, output), session lifecycles (create, call, fork,
// call the fork, delete both), memory-heavy sessions kept across calls
// (80 MiB each, past the budget together, so they spill and come back),
// and streaming runs whose client disconnects mid-stream. Every
// -interval it samples the server's resident memory, open descriptors,
// goroutines, live and spilled sessions, the cache directory's size and
// the interval's p50/p99 latency of plain runs, to soak.csv; at the end
// it draws soak.png. Answers the load asks for (limit errors, 429/507
// from the budget or the queue) are counted as such; anything else is an
// unexpected error, counted and logged, and makes the exit status 1.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	duration := flag.Duration("duration", time.Hour, "how long to drive the load")
	interval := flag.Duration("interval", time.Minute, "how often to sample the server")
	clients := flag.Int("clients", 4, "client loops at once")
	budget := flag.String("memory-budget", "1GiB", "the server's --memory-budget")
	mcpBudget := flag.String("mcp-memory-budget", "512MiB", "airlock mcp's --memory-budget")
	out := flag.String("out", "soak-out", "directory for soak.csv, soak.png and serve.log")
	bin := flag.String("airlock", "", "the airlock command to run (default: built from ./cmd/airlock)")
	cacheDir := flag.String("cache-dir", "", "the cache directory whose size is sampled (default: $AIRLOCK_CACHE_DIR or the user cache dir's airlock)")
	replot := flag.String("replot", "", "only draw `CSV` (a soak.csv) as soak.png in -out, and write its table (to -doc)")
	doc := flag.String("doc", "", "write the samples' table into `FILE` (between its soak-table markers), e.g. docs/soak.md")
	flag.Parse()
	if *replot != "" {
		samples, err := readSamples(*replot)
		if err == nil {
			err = plotSamples(samples, filepath.Join(*out, "soak.png"))
		}
		if err == nil {
			meta, _ := os.ReadFile(strings.TrimSuffix(*replot, ".csv") + ".meta")
			err = writeTable(samples, string(meta), *out, *doc)
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	if *bin == "" {
		*bin = filepath.Join(*out, "airlock")
		if b, err := exec.Command("go", "build", "-o", *bin, "./cmd/airlock").CombinedOutput(); err != nil {
			log.Fatalf("build: %v\n%s", err, b)
		}
	}
	if *cacheDir == "" {
		*cacheDir = os.Getenv("AIRLOCK_CACHE_DIR")
		if *cacheDir == "" {
			d, err := os.UserCacheDir()
			if err != nil {
				log.Fatal(err)
			}
			*cacheDir = filepath.Join(d, "airlock")
		}
	}
	logFile, err := os.Create(filepath.Join(*out, "serve.log"))
	if err != nil {
		log.Fatal(err)
	}
	defer logFile.Close()
	srv := exec.Command(*bin, "serve", "--addr", "127.0.0.1:0", "--memory-budget", *budget)
	srv.Env = append(os.Environ(), "AIRLOCK_TOKEN=")
	pr, pw := io.Pipe()
	srv.Stdout, srv.Stderr = logFile, io.MultiWriter(logFile, pw)
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	url := waitFor(pr, addrRE)
	go io.Copy(io.Discard, pr)
	log.Printf("serve pid %d at %s, budget %s; %d clients for %s, sampling every %s", srv.Process.Pid, url, *budget, *clients, *duration, *interval)

	// MCP over HTTP, its own process with its own budget.
	mcpLog, err := os.Create(filepath.Join(*out, "mcp.log"))
	if err != nil {
		log.Fatal(err)
	}
	defer mcpLog.Close()
	mcpSrv := exec.Command(*bin, "mcp", "--http", "127.0.0.1:0", "--memory-budget", *mcpBudget)
	mcpSrv.Env = append(os.Environ(), "AIRLOCK_TOKEN=")
	mr, mw := io.Pipe()
	mcpSrv.Stdout, mcpSrv.Stderr = mcpLog, io.MultiWriter(mcpLog, mw)
	if err := mcpSrv.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { mcpSrv.Process.Kill(); mcpSrv.Wait() }()
	mcpURL := waitFor(mr, mcpURLRE)
	go io.Copy(io.Discard, mr)
	log.Printf("mcp pid %d at %s, budget %s", mcpSrv.Process.Pid, mcpURL, *mcpBudget)

	l := &load{url: url, hc: &http.Client{Timeout: 2 * time.Minute}, mcpPID: mcpSrv.Process.Pid}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range *clients {
		wg.Add(1)
		go func() { defer wg.Done(); l.client(ctx, i) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); l.mcpClient(ctx, mcpURL) }()
	csvFile, err := os.Create(filepath.Join(*out, "soak.csv"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(csvFile, "minute,rss_mib,fds,goroutines,sessions_live,sessions_spilled_total,cache_mib,ops,p50_ms,p99_ms,expected_errors,unexpected_errors,load1,mcp_rss_mib,mcp_ops")
	var samples []sample
	start := time.Now()
	meta := fmt.Sprintf("%s UTC, %s; %d clients for %s, `airlock serve --memory-budget %s` and `airlock mcp --http --memory-budget %s`, %s",
		start.UTC().Format("2006-01-02 15:04"), machine(), *clients, *duration, *budget, *mcpBudget, runtime.Version())
	if err := os.WriteFile(filepath.Join(*out, "soak.meta"), []byte(meta+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	tick := time.NewTicker(*interval)
	last := start
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		if done && time.Since(last) < *interval/2 {
			break // the clients are stopping: a sample now shows no load
		}
		last = time.Now()
		s := l.sample(srv.Process.Pid, *cacheDir, time.Since(start))
		samples = append(samples, s)
		fmt.Fprintf(csvFile, "%.2f,%.1f,%d,%d,%d,%d,%.1f,%d,%.1f,%.1f,%d,%d,%.2f,%.1f,%d\n", s.minute, s.rssMiB, s.fds, s.goroutines, s.live, s.spilled, s.cacheMiB, s.ops, s.p50, s.p99, s.expected, s.unexpected, s.load1, s.mcpRSSMiB, s.mcpOps)
		csvFile.Sync()
		log.Printf("%5.1f min: rss %.0f MiB, fds %d, goroutines %d, sessions %d (spilled %d), cache %.0f MiB, %d ops, p50 %.1f ms, p99 %.1f ms, expected errors %d, unexpected %d; load %.1f; mcp rss %.0f MiB, %d ops",
			s.minute, s.rssMiB, s.fds, s.goroutines, s.live, s.spilled, s.cacheMiB, s.ops, s.p50, s.p99, s.expected, s.unexpected, s.load1, s.mcpRSSMiB, s.mcpOps)
	}
	tick.Stop()
	wg.Wait()
	csvFile.Close()
	if err := plotSamples(samples, filepath.Join(*out, "soak.png")); err != nil {
		log.Printf("plot: %v", err)
	}
	if err := writeTable(samples, meta, *out, *doc); err != nil {
		log.Printf("table: %v", err)
	}
	l.mu.Lock()
	kinds := l.kinds
	l.mu.Unlock()
	log.Printf("answers by kind: %v", kinds)
	if n := l.unexpected.Load(); n > 0 {
		log.Printf("%d unexpected errors (serve.log and the lines above say which)", n)
		os.Exit(1)
	}
}

// writeTable writes the samples' table to soak.md in out, and into doc
// if named.
func writeTable(samples []sample, meta, out, doc string) error {
	tbl := table(samples, meta)
	if err := os.WriteFile(filepath.Join(out, "soak.md"), []byte(tbl), 0o644); err != nil {
		return err
	}
	if doc == "" {
		return nil
	}
	return writeDoc(doc, tbl)
}

var (
	addrRE   = regexp.MustCompile(`addr=(http://\S+)`)
	mcpURLRE = regexp.MustCompile(`url=(http://\S+)`)
)

func waitFor(r io.Reader, re *regexp.Regexp) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			return m[1]
		}
	}
	log.Fatal("a server ended before saying where it listens (see serve.log and mcp.log)")
	return ""
}

// load is the clients' shared state: latencies and counts since the
// last sample.
type load struct {
	url string
	hc  *http.Client

	mu        sync.Mutex
	latencies []float64 // plain runs' ms since the last sample
	kinds     map[string]int

	ops, expected, unexpected atomic.Int64

	mcpPID int // the airlock mcp --http process
	mcpOps atomic.Int64
}

// answer is the part of a run's or a session call's JSON the load reads.
type answer struct {
	ID       string `json:"id"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Error    *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

func (l *load) post(ctx context.Context, path string, body any) (int, answer, error) {
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url+path, &buf)
	if err != nil {
		return 0, answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &a); err != nil && resp.StatusCode < 300 {
		return resp.StatusCode, a, fmt.Errorf("%s: %d %q", path, resp.StatusCode, data)
	}
	return resp.StatusCode, a, nil
}

func (l *load) delete(ctx context.Context, id string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, l.url+"/v1/sessions/"+id, nil)
	if resp, err := l.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// note counts one answer: want names the error kinds (or "exit") the
// operation asked for; a 429 or 507 is the server's bound, asked for by
// the load's pressure.
func (l *load) note(op string, status int, a answer, err error, want ...string) {
	l.ops.Add(1)
	kind := "ok"
	switch {
	case err != nil:
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return // the soak ending
		}
		kind = "transport"
	case status == 429 || status == 507 || status == 503:
		kind = fmt.Sprintf("%d", status)
	case a.Error != nil:
		kind = a.Error.Kind
	case a.ExitCode != 0:
		kind = "exit"
	case status >= 300:
		kind = fmt.Sprintf("http_%d", status)
	}
	l.mu.Lock()
	if l.kinds == nil {
		l.kinds = map[string]int{}
	}
	l.kinds[op+":"+kind]++
	l.mu.Unlock()
	switch {
	case kind == "ok" || kind == "429" || kind == "507" || kind == "503":
		if kind != "ok" {
			l.expected.Add(1)
		}
	case slices.Contains(want, kind):
		l.expected.Add(1)
	default:
		l.unexpected.Add(1)
		msg := fmt.Sprint(err)
		if a.Error != nil {
			msg = a.Error.Message
		}
		log.Printf("unexpected: %s: status %d, kind %s: %.300s", op, status, kind, msg)
	}
}

const (
	heavyCode = "x = bytearray(80 << 20)\nx[::4096] = b'\\x01' * len(range(0, len(x), 4096))\n"
	jsonCode  = "import json, re\nd = {'k%d' % i: [i] * 10 for i in range(2000)}\ns = json.dumps(d)\nprint(len(re.findall(r'k\\d+', s)))"
)

// client is one loop of mixed operations until ctx ends.
func (l *load) client(ctx context.Context, n int) {
	rng := rand.New(rand.NewPCG(uint64(n), 44))
	var heavy []string // this client's memory-heavy sessions
	defer func() {
		for _, id := range heavy {
			l.delete(context.Background(), id)
		}
	}()
	for ctx.Err() == nil {
		switch p := rng.IntN(100); {
		case p < 35:
			start := time.Now()
			st, a, err := l.post(ctx, "/v1/run", map[string]any{"code": "print('hi')"})
			if err == nil && st == 200 {
				l.mu.Lock()
				l.latencies = append(l.latencies, float64(time.Since(start).Microseconds())/1000)
				l.mu.Unlock()
			}
			l.note("plain", st, a, err)
		case p < 50:
			st, a, err := l.post(ctx, "/v1/run", map[string]any{"code": jsonCode})
			l.note("json", st, a, err)
		case p < 55:
			st, a, err := l.post(ctx, "/v1/run", map[string]any{"code": "import pandas as pd\nprint(pd.DataFrame({'a': range(100)}).a.sum())"})
			l.note("pandas", st, a, err)
		case p < 59:
			st, a, err := l.post(ctx, "/v1/run", map[string]any{"code": "while True: pass", "limits": map[string]any{"timeout_ms": 100}})
			l.note("timeout", st, a, err, "timeout")
		case p < 63:
			st, a, err := l.post(ctx, "/v1/run", map[string]any{"code": "x = bytearray(1 << 30)", "limits": map[string]any{"memory": 64 << 20}})
			l.note("memory", st, a, err, "memory_limit", "exit")
		case p < 67:
			st, a, err := l.post(ctx, "/v1/run", map[string]any{"code": "print('x' * 100000)", "limits": map[string]any{"output": 1000}})
			l.note("output", st, a, err, "output_limit")
		case p < 82:
			l.sessionLifecycle(ctx)
		case p < 92:
			heavy = l.heavySession(ctx, rng, heavy)
		default:
			l.streamDisconnect(ctx)
		}
	}
}

func (l *load) sessionLifecycle(ctx context.Context) {
	st, a, err := l.post(ctx, "/v1/sessions", map[string]any{})
	l.note("session_new", st, a, err)
	if err != nil || st != 201 {
		return
	}
	id := a.ID
	defer l.delete(context.Background(), id)
	st, a, err = l.post(ctx, "/v1/sessions/"+id+"/run", map[string]any{"code": "n = 41\nopen('f.txt', 'w').write('x')"})
	l.note("session_run", st, a, err)
	st, a, err = l.post(ctx, "/v1/sessions/"+id+"/fork", nil)
	l.note("session_fork", st, a, err)
	if err == nil && st == 201 {
		fork := a.ID
		defer l.delete(context.Background(), fork)
		st, a, err = l.post(ctx, "/v1/sessions/"+fork+"/run", map[string]any{"code": "print(n + 1, open('f.txt').read())"})
		if err == nil && st == 200 && a.Error == nil && a.Stdout != "42 x\n" {
			l.unexpected.Add(1)
			log.Printf("unexpected: a fork printed %q, want %q", a.Stdout, "42 x\n")
		}
		l.note("session_fork_run", st, a, err)
	}
}

// heavySession makes a session holding 80 MiB (at most 3 a client), or
// calls one (which may bring it back from disk) and checks its state, or
// deletes the oldest.
func (l *load) heavySession(ctx context.Context, rng *rand.Rand, heavy []string) []string {
	switch {
	case len(heavy) < 3 && rng.IntN(2) == 0:
		st, a, err := l.post(ctx, "/v1/sessions", map[string]any{})
		l.note("heavy_new", st, a, err)
		if err != nil || st != 201 {
			return heavy
		}
		st, b, err := l.post(ctx, "/v1/sessions/"+a.ID+"/run", map[string]any{"code": heavyCode})
		l.note("heavy_fill", st, b, err)
		if err != nil || st != 200 || b.Error != nil {
			l.delete(context.Background(), a.ID)
			return heavy
		}
		return append(heavy, a.ID)
	case len(heavy) > 0 && rng.IntN(4) == 0:
		l.delete(ctx, heavy[0])
		return heavy[1:]
	case len(heavy) > 0:
		id := heavy[rng.IntN(len(heavy))]
		st, a, err := l.post(ctx, "/v1/sessions/"+id+"/run", map[string]any{"code": "print(len(x), x[4096])"})
		if err == nil && st == 200 && a.Error == nil && a.Stdout != fmt.Sprintf("%d 1\n", 80<<20) {
			l.unexpected.Add(1)
			log.Printf("unexpected: a heavy session printed %q", a.Stdout)
		}
		l.note("heavy_call", st, a, err)
	}
	return heavy
}

// streamDisconnect starts a streaming run that prints slowly and leaves
// after its first event.
func (l *load) streamDisconnect(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"code": "import time\nfor i in range(50):\n    print(i, flush=True)\n    time.sleep(0.1)"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.url+"/v1/run?stream=1", bytes.NewReader(body))
	resp, err := l.hc.Do(req)
	if err != nil {
		l.note("stream", 0, answer{}, err)
		return
	}
	defer resp.Body.Close()
	buf := make([]byte, 256)
	_, err = resp.Body.Read(buf)
	l.note("stream", resp.StatusCode, answer{}, err)
	cancel() // the client leaves mid-run
}

type sample struct {
	minute, rssMiB, cacheMiB, p50, p99 float64
	fds, goroutines, live, spilled     int
	ops, expected, unexpected          int64
	// load1 is the machine's 1-minute load average; mcpRSSMiB the MCP
	// server's resident memory, mcpOps its operations in the interval.
	load1, mcpRSSMiB float64
	mcpOps           int64
}

func (l *load) sample(pid int, cacheDir string, since time.Duration) sample {
	s := sample{minute: since.Minutes(), rssMiB: float64(statusKB(pid, "VmRSS")) / 1024}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.fds = len(fds)
	}
	m := l.metrics()
	s.goroutines, s.live, s.spilled = int(m["go_goroutines"]), int(m["airlock_sessions_live"]), int(m["airlock_sessions_spilled_total"])
	var size int64
	filepath.WalkDir(cacheDir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	s.cacheMiB = float64(size) / (1 << 20)
	l.mu.Lock()
	lat := l.latencies
	l.latencies = nil
	l.mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		s.p50, s.p99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	s.ops, s.expected, s.unexpected = l.ops.Swap(0), l.expected.Swap(0), l.unexpected.Load()
	s.load1 = loadAverage()
	if l.mcpPID > 0 {
		s.mcpRSSMiB = float64(statusKB(l.mcpPID, "VmRSS")) / 1024
	}
	s.mcpOps = l.mcpOps.Swap(0)
	return s
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() float64 {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func statusKB(pid int, field string) int64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// metrics reads the server's gauges and counters without labels.
func (l *load) metrics() map[string]float64 {
	out := map[string]float64{}
	resp, err := l.hc.Get(l.url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// readSamples reads a soak.csv back, for -replot.
func readSamples(file string) ([]sample, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []sample
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i == 0 {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 12 && len(f) != 15 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 15 (or 12, before MCP and the load average)", file, i+1, len(f))
		}
		num := func(j int) float64 {
			if j >= len(f) {
				return 0
			}
			v, _ := strconv.ParseFloat(f[j], 64)
			return v
		}
		out = append(out, sample{minute: num(0), rssMiB: num(1), fds: int(num(2)), goroutines: int(num(3)), live: int(num(4)), spilled: int(num(5)),
			cacheMiB: num(6), ops: int64(num(7)), p50: num(8), p99: num(9), expected: int64(num(10)), unexpected: int64(num(11)),
			load1: num(12), mcpRSSMiB: num(13), mcpOps: int64(num(14))})
	}
	return out, nil
}
