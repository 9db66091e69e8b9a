package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The load test: $AIRLOCK_LOAD=SECONDS serves the API on loopback with
// its default concurrency and queue and drives it from a second process
// (this test binary again, as loadClient) at four times the concurrency.
// Every request must be answered 200 or 429 and none lost; it reports the
// p99 latency of accepted runs.
//
//	AIRLOCK_LOAD=60 go test -run '^TestLoad$' -v ./server
const (
	envLoad       = "AIRLOCK_LOAD"
	envLoadURL    = "AIRLOCK_LOAD_URL"
	envLoadConns  = "AIRLOCK_LOAD_CONNS"
	loadCodeHello = `print("hi")`
	loadCodeJSON  = "import json\nprint(len(json.dumps([{'i': i} for i in range(200)])))"
)

type loadReport struct {
	Requests int            `json:"requests"`
	Status   map[string]int `json:"status"`
	Lost     int            `json:"lost"` // transport errors and unreadable answers
	LostErr  string         `json:"lost_err,omitempty"`
	P50MS    float64        `json:"p50_ms"`
	P99MS    float64        `json:"p99_ms"`
	MaxMS    float64        `json:"max_ms"`
}

func TestLoad(t *testing.T) {
	if os.Getenv(envLoadURL) != "" {
		loadClient(t)
		return
	}
	secs, _ := strconv.Atoi(os.Getenv(envLoad))
	if secs <= 0 {
		t.Skipf("set $%s=SECONDS to run the load test", envLoad)
	}
	url, s, _ := start(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	conns := 4 * s.cfg.Concurrency
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoad$", "-test.v")
	cmd.Env = append(os.Environ(), envLoadURL+"="+url, envLoadConns+"="+strconv.Itoa(conns))
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
	t.Logf("%d s, %d connections against concurrency %d and queue %d (%d CPUs): %d requests, status %v, lost %d; accepted runs p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		secs, conns, s.cfg.Concurrency, s.cfg.Queue, runtime.NumCPU(), rep.Requests, rep.Status, rep.Lost, rep.P50MS, rep.P99MS, rep.MaxMS)
	if rep.Lost > 0 {
		t.Errorf("%d requests lost: %s", rep.Lost, rep.LostErr)
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

// loadClient is the second process: conns loops posting runs until the
// time is up.
func loadClient(t *testing.T) {
	url := os.Getenv(envLoadURL)
	conns, _ := strconv.Atoi(os.Getenv(envLoadConns))
	secs, _ := strconv.Atoi(os.Getenv(envLoad))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}, Timeout: 2 * time.Minute}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var mu sync.Mutex
	rep := loadReport{Status: map[string]int{}}
	var lat []float64
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				code := loadCodeHello
				if (c+i)%3 == 0 {
					code = loadCodeJSON
				}
				body, _ := json.Marshal(RunRequest{Code: code})
				start := time.Now()
				resp, err := client.Post(url+"/v1/run", "application/json", bytes.NewReader(body))
				var res Result
				if err == nil {
					err = json.NewDecoder(resp.Body).Decode(&res)
					resp.Body.Close()
				}
				d := float64(time.Since(start).Microseconds()) / 1000
				mu.Lock()
				rep.Requests++
				switch {
				case err != nil:
					rep.Lost++
					rep.LostErr = err.Error()
				default:
					rep.Status[strconv.Itoa(resp.StatusCode)]++
					if resp.StatusCode == http.StatusOK {
						lat = append(lat, d)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		rep.P50MS, rep.P99MS, rep.MaxMS = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("LOAD %s\n", b)
}
