package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The load tests serve the API on loopback and drive it from a second
// process (this test binary again, as loadClient), so the client's own
// memory and goroutines are not counted in the server's. Each runs a few
// seconds by default; $AIRLOCK_LOAD=SECONDS runs each that long:
//
//	AIRLOCK_LOAD=60 go test -run '^TestLoad' -v ./server
//
// Every request is bounded in time (the client's timeout) and every loop
// by the deadline; traffic goes to 127.0.0.0/8 only.
const (
	envLoad       = "AIRLOCK_LOAD"
	envLoadURL    = "AIRLOCK_LOAD_URL"
	envLoadSpec   = "AIRLOCK_LOAD_SPEC"
	loadDefault   = 3 // seconds
	loadCodeHello = `print("hi")`
	loadCodeJSON  = "import json\nprint(len(json.dumps([{'i': i} for i in range(200)])))"
)

// loadSpec is what the client process does, for how long.
type loadSpec struct {
	Seconds float64 `json:"seconds"`
	Conns   int     `json:"conns"`   // connections posting runs in a loop
	Mix     string  `json:"mix"`     // "light", "sleep" (each run sleeps 20 ms), "soak" (soakRequests)
	Trickle int     `json:"trickle"` // connections trickling bodies, from 127.0.0.2 and .3
	Stalled int     `json:"stalled"` // connections that send runs with large output and never read, from 127.0.0.4
}

type loadReport struct {
	Requests     int            `json:"requests"`
	Status       map[string]int `json:"status"`
	Lost         int            `json:"lost"` // transport errors and unreadable answers
	LostErr      string         `json:"lost_err,omitempty"`
	NoRetryAfter int            `json:"no_retry_after"` // 429s without Retry-After
	Wrong        int            `json:"wrong"`          // 200s whose result is not the workload's
	WrongOut     string         `json:"wrong_out,omitempty"`
	P50MS        float64        `json:"p50_ms"`
	P99MS        float64        `json:"p99_ms"`
	MaxMS        float64        `json:"max_ms"`
	Trickles     map[string]int `json:"trickles"`       // status answered to trickled bodies
	TrickleMaxMS float64        `json:"trickle_max_ms"` // longest a trickle held its connection
	Stalled      int            `json:"stalled"`        // stalled connections made
}

func loadSeconds(def float64) float64 {
	if secs, err := strconv.ParseFloat(os.Getenv(envLoad), 64); err == nil && secs > 0 {
		return secs
	}
	return def
}

// runLoad starts the client process on url with spec and returns its report.
func runLoad(t *testing.T, url string, spec loadSpec) loadReport {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoad$", "-test.v")
	cmd.Env = append(os.Environ(), envLoadURL+"="+url, envLoadSpec+"="+string(b))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("load client: %v\n%s", err, out.String())
	}
	var rep loadReport
	_, after, _ := bytes.Cut(out.Bytes(), []byte("LOAD "))
	line, _, _ := bytes.Cut(after, []byte("\n"))
	if err := json.Unmarshal(line, &rep); err != nil {
		t.Fatalf("load client's report: %v\n%s", err, out.String())
	}
	return rep
}

// checkAnswered fails the test unless every request was answered 200 or
// 429 (with Retry-After), with the right output, and none lost.
func checkAnswered(t *testing.T, rep loadReport) {
	t.Helper()
	if rep.Lost > 0 {
		t.Errorf("%d requests lost: %s", rep.Lost, rep.LostErr)
	}
	if rep.Wrong > 0 {
		t.Errorf("%d runs answered 200 with the wrong output, e.g. %s", rep.Wrong, rep.WrongOut)
	}
	if rep.NoRetryAfter > 0 {
		t.Errorf("%d 429s without Retry-After", rep.NoRetryAfter)
	}
	for st := range rep.Status {
		if st != "200" && st != "429" {
			t.Errorf("status %s answered", st)
		}
	}
	if rep.Status["200"] == 0 {
		t.Errorf("no run accepted")
	}
}

// metricValue reads one sample from /metrics.
func metricValue(t *testing.T, url, sample string) float64 {
	t.Helper()
	body := tryGet(url + "/metrics").body
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestLoad: the API with its defaults (concurrency = CPUs, queue 4 x that)
// under four times its concurrency in connections: every request is
// answered 200 or 429 and none is lost.
func TestLoad(t *testing.T) {
	if os.Getenv(envLoadURL) != "" {
		loadClient(t)
		return
	}
	url, s, _ := start(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	spec := loadSpec{Seconds: loadSeconds(loadDefault), Conns: 4 * s.cfg.Concurrency, Mix: "light"}
	rep := runLoad(t, url, spec)
	t.Logf("%.0f s, %d connections against concurrency %d and queue %d (%d CPUs): %d requests, status %v, lost %d; accepted runs p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		spec.Seconds, spec.Conns, s.cfg.Concurrency, s.cfg.Queue, runtime.NumCPU(), rep.Requests, rep.Status, rep.Lost, rep.P50MS, rep.P99MS, rep.MaxMS)
	checkAnswered(t, rep)
}

// TestLoadQueueOverflow fills the run slots and the queue (concurrency 1,
// queue 2, 16 connections, each run 20 ms): the overflow is answered 429
// with Retry-After at once, every admitted run is answered with its
// result, and the server ran exactly the runs it answered 200.
func TestLoadQueueOverflow(t *testing.T) {
	url, _, _ := start(t, Config{Concurrency: 1, Queue: 2})
	spec := loadSpec{Seconds: loadSeconds(loadDefault), Conns: 16, Mix: "sleep"}
	rep := runLoad(t, url, spec)
	t.Logf("%.0f s, %d connections against concurrency 1 and queue 2: %d requests, status %v, lost %d; accepted runs p50 %.1f ms, p99 %.1f ms",
		spec.Seconds, spec.Conns, rep.Requests, rep.Status, rep.Lost, rep.P50MS, rep.P99MS)
	checkAnswered(t, rep)
	if rep.Status["429"] == 0 {
		t.Error("the queue never overflowed")
	}
	if ran := metricValue(t, url, `airlock_runs_total{outcome="ok"}`); int(ran) != rep.Status["200"] {
		t.Errorf("the server ran %v runs and answered %d with 200", ran, rep.Status["200"])
	}
	if refused := metricValue(t, url, `airlock_rejected_requests_total{reason="overloaded"}`); int(refused) != rep.Status["429"] {
		t.Errorf("the server counts %v refused and answered %d with 429", refused, rep.Status["429"])
	}
}

// TestLoadSlowClients: runs from two connections (the concurrency, so no
// run need wait) are all answered 200 while ten connections trickle
// bodies (reconnecting when dropped) and ten post runs with 256 KiB of
// output and never read the answer. Trickles are answered 408 (or 429
// past their address's share) within BodyTimeout; stalled readers give
// back their slots when their runs end.
func TestLoadSlowClients(t *testing.T) {
	// Queue 16: the stalled readers' ten runs and the two connections'
	// fit in the slots and the queue, so no run need be refused.
	url, s, _ := start(t, Config{Concurrency: 2, Queue: 16, BodyTimeout: time.Second})
	spec := loadSpec{Seconds: loadSeconds(loadDefault), Conns: 2, Mix: "light", Trickle: 10, Stalled: 10}
	rep := runLoad(t, url, spec)
	t.Logf("%.0f s: %d runs from 2 connections, status %v, p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d stalled readers; trickles answered %v, held at most %.0f ms",
		spec.Seconds, rep.Requests, rep.Status, rep.P50MS, rep.P99MS, rep.MaxMS, rep.Stalled, rep.Trickles, rep.TrickleMaxMS)
	checkAnswered(t, rep)
	if rep.Status["429"] > 0 {
		t.Errorf("%d runs refused while only slow clients competed", rep.Status["429"])
	}
	if rep.Trickles["408"] == 0 {
		t.Error("no trickle answered 408")
	}
	for st := range rep.Trickles {
		if st != "408" && st != "429" {
			t.Errorf("a trickle answered %s", st)
		}
	}
	if rep.TrickleMaxMS > 5000 {
		t.Errorf("a trickle held its body %.0f ms (BodyTimeout 1 s)", rep.TrickleMaxMS)
	}
	for deadline := time.Now().Add(10 * time.Second); (len(s.slots) != 0 || s.bodies.count() != 0) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if len(s.slots) != 0 || s.bodies.count() != 0 {
		t.Errorf("after the load: %d slots, %d bodies held", len(s.slots), s.bodies.count())
	}
}

// soakMeasure is the server process's state: its goroutines, open
// descriptors and resident memory.
type soakMeasure struct {
	goroutines, fds int
	rss             int64
}

func measureProcess(t *testing.T) soakMeasure {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("no /proc/self/fd: %v", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("no /proc/self/status: %v", err)
	}
	var rss int64
	for line := range bytes.Lines(status) {
		if f := strings.Fields(string(line)); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return soakMeasure{goroutines: runtime.NumGoroutine(), fds: len(fds), rss: rss}
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// TestLoadSoak drives a mixed workload (hello, json, files, exceptions,
// timeouts, memory and output limits) from eight connections, then lets
// the server sit idle past ReleaseIdle, and compares its goroutines,
// descriptors and resident memory with those after a warm-up: the
// goroutines and descriptors must come back, and resident memory to
// within 32 MiB of the baseline. (Without ReleaseIdle, the Go heap keeps
// what the load freed: the RSS stays where the load left it.)
func TestLoadSoak(t *testing.T) {
	const idle = time.Second
	url, _, _ := start(t, Config{ReleaseIdle: idle, Concurrency: 2, Queue: 8})
	warm := runLoad(t, url, loadSpec{Seconds: 1, Conns: 2, Mix: "soak"})
	checkAnswered(t, warm)
	time.Sleep(idle + time.Second)
	before := measureProcess(t)
	loadBefore := loadAvg()
	spec := loadSpec{Seconds: loadSeconds(5), Conns: 8, Mix: "soak"}
	rep := runLoad(t, url, spec)
	checkAnswered(t, rep)
	during := measureProcess(t)
	var after soakMeasure
	for deadline := time.Now().Add(idle + 10*time.Second); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		after = measureProcess(t)
		if after.goroutines <= before.goroutines && after.rss <= before.rss+16<<20 {
			break
		}
	}
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	t.Logf("soak %.0f s, %d connections: %d requests, status %v, p50 %.1f ms, p99 %.1f ms; machine load %s before, %s after (%d CPUs)",
		spec.Seconds, spec.Conns, rep.Requests, rep.Status, rep.P50MS, rep.P99MS, loadBefore, loadAvg(), runtime.NumCPU())
	t.Logf("goroutines %d -> %d -> %d, descriptors %d -> %d -> %d, RSS %.1f MiB -> %.1f MiB at the end of the load -> %.1f MiB idle (%d releases)",
		before.goroutines, during.goroutines, after.goroutines, before.fds, during.fds, after.fds,
		mib(before.rss), mib(during.rss), mib(after.rss), int(metricValue(t, url, "airlock_memory_releases_total")))
	if after.goroutines > before.goroutines+2 {
		t.Errorf("goroutines grew from %d to %d", before.goroutines, after.goroutines)
	}
	if after.fds > before.fds+2 {
		t.Errorf("descriptors grew from %d to %d", before.fds, after.fds)
	}
	if after.rss > before.rss+32<<20 {
		t.Errorf("resident memory %.1f MiB after the load, %.1f MiB before", mib(after.rss), mib(before.rss))
	}
}

// soakRequests is TestLoadSoak's mix, each with the stdout or error kind
// a 200 must carry.
var soakRequests = []struct {
	body, stdout, kind string
}{
	{`{"code": "print('hi')"}`, "hi\n", ""},
	{`{"code": "import json, re\nd = [{'id': i} for i in range(200)]\nprint(len(json.loads(json.dumps(d))))"}`, "200\n", ""},
	{`{"code": "import os\nfor i in range(5): open(f'f{i}', 'w').write(str(i) * 100)\nprint(len(os.listdir('.')))", "files": {"in.txt": "aW4="}}`, "6\n", ""},
	{`{"code": "raise ValueError('soak')"}`, "", ""},
	{`{"code": "while True: pass", "limits": {"timeout_ms": 50}}`, "", "timeout"},
	{`{"code": "x = bytearray(64 << 20)", "limits": {"memory": 33554432}}`, "", "memory_limit"},
	{`{"code": "while True: print('x' * 100)", "limits": {"output": 8192}}`, "", "output_limit"},
}

// loadClient is the second process: it does what its spec says until the
// time is up and prints its report.
func loadClient(t *testing.T) {
	url := os.Getenv(envLoadURL)
	var spec loadSpec
	if err := json.Unmarshal([]byte(os.Getenv(envLoadSpec)), &spec); err != nil {
		t.Fatalf("spec: %v", err)
	}
	host := strings.TrimPrefix(url, "http://")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: spec.Conns}, Timeout: time.Minute}
	deadline := time.Now().Add(time.Duration(spec.Seconds * float64(time.Second)))
	var mu sync.Mutex
	rep := loadReport{Status: map[string]int{}, Trickles: map[string]int{}}
	var lat []float64
	var wg sync.WaitGroup
	for c := range spec.Conns {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				body, stdout, kind := "", "", ""
				switch spec.Mix {
				case "soak":
					r := soakRequests[(c+i)%len(soakRequests)]
					body, stdout, kind = r.body, r.stdout, r.kind
				case "sleep":
					body, stdout = `{"code": "import time\ntime.sleep(0.02)\nprint('hi')"}`, "hi\n"
				default:
					code, want := loadCodeHello, "hi\n"
					if (c+i)%3 == 0 {
						code, want = loadCodeJSON, "2290\n"
					}
					b, _ := json.Marshal(RunRequest{Code: code})
					body, stdout = string(b), want
				}
				start := time.Now()
				resp, err := client.Post(url+"/v1/run", "application/json", strings.NewReader(body))
				var res Result
				if err == nil {
					if resp.StatusCode == http.StatusOK {
						err = json.NewDecoder(resp.Body).Decode(&res)
					} else {
						_, err = io.Copy(io.Discard, resp.Body)
					}
					resp.Body.Close()
				}
				d := float64(time.Since(start).Microseconds()) / 1000
				if err == nil && resp.StatusCode == http.StatusTooManyRequests {
					// Not the Retry-After a client should honour (the test
					// is to overflow the queue), but not a busy loop either.
					time.Sleep(20 * time.Millisecond)
				}
				mu.Lock()
				rep.Requests++
				switch {
				case err != nil:
					rep.Lost++
					rep.LostErr = err.Error()
				default:
					rep.Status[strconv.Itoa(resp.StatusCode)]++
					if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
						rep.NoRetryAfter++
					}
					if resp.StatusCode == http.StatusOK {
						lat = append(lat, d)
						gotKind := ""
						if res.Error != nil {
							gotKind = res.Error.Kind
						}
						if res.Stdout != stdout && kind == "" || gotKind != kind {
							rep.Wrong++
							rep.WrongOut = fmt.Sprintf("%s -> %q %v", body, res.Stdout, res.Error)
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range spec.Trickle {
		local := fmt.Sprintf("127.0.0.%d", 2+i%2)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				status, took := clientTrickle(host, local, deadline)
				mu.Lock()
				rep.Trickles[strconv.Itoa(status)]++
				rep.TrickleMaxMS = max(rep.TrickleMaxMS, float64(took.Milliseconds()))
				mu.Unlock()
			}
		})
	}
	for range spec.Stalled {
		wg.Go(func() {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.4")}, Timeout: 10 * time.Second}
			c, err := d.Dial("tcp", host)
			if err != nil {
				return
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4096)
			body := `{"code": "import sys\nsys.stdout.write('x' * (256 << 10))"}`
			fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			mu.Lock()
			rep.Stalled++
			mu.Unlock()
			time.Sleep(time.Until(deadline)) // never read
		})
	}
	wg.Wait()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		rep.P50MS, rep.P99MS, rep.MaxMS = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("LOAD %s\n", b)
}

// clientTrickle announces a 100 000-byte body from local and sends a byte
// each 100 ms until the server answers (0: the connection ended first;
// -1: it could not connect).
func clientTrickle(host, local string, deadline time.Time) (int, time.Duration) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", host)
	if err != nil {
		time.Sleep(50 * time.Millisecond)
		return -1, 0
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"code\": \"")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	c.SetReadDeadline(deadline.Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, time.Since(start)
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}
