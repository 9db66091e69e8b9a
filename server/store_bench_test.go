package server

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchServer serves the keyed Sandbox with store (nil: in-process).
func benchServer(b *testing.B, store SessionStore) string {
	b.Helper()
	cfg := Config{Sandbox: keyedSandbox(b)}
	if store != nil {
		cfg.SessionStore = store
	}
	url, _ := serve(b, cfg)
	return url
}

func benchPost(b *testing.B, url, body string) response {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, data}
}

// BenchmarkSessionCall is one session call over HTTP (x += 1, so the state
// advances and is stored each time), with p50 and p99:
//   - local: the in-process store (the default);
//   - redis: a Redis store, the session called on the replica that made
//     the last call (its cached live session is current: lock, version
//     check, run, save, write);
//   - redis-3-replicas: calls go round three replicas, so each call loads
//     the state the previous replica wrote.
//
// A stored call also saves the session (Session.Save: diffing its memory
// against the Sandbox's image and signing it, ~4 MB for a small session)
// and sends that to Redis: the cost of any replica continuing it.
func BenchmarkSessionCall(b *testing.B) {
	var rs *redisServer
	redisStore := func() SessionStore {
		if rs == nil {
			// Redis' own default for its append-only file, not the
			// tests' fsync on every write.
			rs = startRedisFsync(b, "everysec")
		}
		s := newRedisStore(b, rs, RedisOptions{})
		return s
	}
	cases := []struct {
		name     string
		replicas func() []string
	}{
		{"local", func() []string { return []string{benchServer(b, nil)} }},
		{"redis", func() []string { return []string{benchServer(b, redisStore())} }},
		{"redis-3-replicas", func() []string {
			return []string{benchServer(b, redisStore()), benchServer(b, redisStore()), benchServer(b, redisStore())}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			urls := c.replicas()
			r := benchPost(b, urls[0]+"/v1/sessions", "")
			var info SessionInfo
			if r.status != 201 || json.Unmarshal(r.body, &info) != nil {
				b.Fatalf("new session: %d %s", r.status, r.body)
			}
			body := `{"code": "x = globals().get('x', 0) + 1"}`
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r := benchPost(b, urls[i%len(urls)]+"/v1/sessions/"+info.ID+"/run", body)
				times = append(times, time.Since(start))
				if r.status != 200 {
					b.Fatalf("call %d: %d %s", i, r.status, r.body)
				}
			}
			b.StopTimer()
			slices.Sort(times)
			q := func(p float64) float64 { return float64(times[int(p*float64(len(times)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.50), "p50_ms")
			b.ReportMetric(q(0.99), "p99_ms")
		})
	}
}

// BenchmarkReplicasThroughput is session calls per second from 6 clients,
// each on its own session, against one replica and against three, all on
// one Redis: each client's calls to one replica (sticky: its cached copy
// is current) or round all three (rotating: each call loads the state). The replicas share
// this process and its cores, so three cannot be faster here than the
// machine is; what it shows is that nothing serialises across replicas.
func BenchmarkReplicasThroughput(b *testing.B) {
	rs := startRedisFsync(b, "everysec")
	cases := []struct {
		name   string
		n      int
		rotate bool // each call to the next replica (a load each), or each client to one
	}{{"replicas=1", 1, false}, {"replicas=3/sticky", 3, false}, {"replicas=3/rotating", 3, true}}
	for _, tc := range cases {
		n := tc.n
		b.Run(tc.name, func(b *testing.B) {
			urls := make([]string, n)
			for i := range urls {
				urls[i] = benchServer(b, newRedisStore(b, rs, RedisOptions{}))
			}
			const clients = 6
			ids := make([]string, clients)
			for i := range ids {
				r := benchPost(b, urls[i%n]+"/v1/sessions", "")
				var info SessionInfo
				if r.status != 201 || json.Unmarshal(r.body, &info) != nil {
					b.Fatalf("new session: %d %s", r.status, r.body)
				}
				ids[i] = info.ID
			}
			body := `{"code": "x = globals().get('x', 0) + 1"}`
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			var failed atomic.Value
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := c; i < b.N; i += clients {
						url := urls[c%n]
						if tc.rotate {
							url = urls[(i/clients)%n]
						}
						resp, err := http.Post(url+"/v1/sessions/"+ids[c]+"/run", "application/json", strings.NewReader(body))
						if err != nil {
							failed.Store(err.Error())
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							failed.Store(resp.Status)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if f := failed.Load(); f != nil {
				b.Fatalf("a call failed: %v", f)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
