package airlock_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// BenchmarkNetwork compares requests through the sandbox with Go's own
// client calling the same loopback server: "go" is the baseline, the
// others one run doing b.N requests, timed inside the guest so that the
// run's start is left out. Metrics: req/s and µs/req; the difference of
// µs/req is the latency the sandbox adds.
//
//	go test -run '^$' -bench BenchmarkNetwork -benchtime 500x .
func BenchmarkNetwork(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer ts.Close()
	report := func(b *testing.B, elapsed time.Duration, n int) {
		b.ReportMetric(float64(n)/elapsed.Seconds(), "req/s")
		b.ReportMetric(float64(elapsed.Microseconds())/float64(n), "µs/req")
	}
	b.Run("go", func(b *testing.B) {
		c := &http.Client{}
		start := time.Now()
		for range b.N {
			resp, err := c.Get(ts.URL + "/")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		report(b, time.Since(start), b.N)
	})
	s, err := airlock.New(context.Background(), append(suiteOptions(), airlock.WithNetworkEnv(airlock.NetworkEnv{Resolver: fakeResolver{}}))...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	r, err := airlock.ParseNetworkRule(ts.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	pol := &airlock.NetworkPolicy{Rules: []airlock.NetworkRule{r}, MaxRequests: 1 << 30}
	for _, c := range []struct{ name, setup, call string }{
		{"http.client", "import http.client\nhost, port = URL[7:].split(':')", "c = http.client.HTTPConnection(host, int(port)); c.request('GET', '/'); c.getresponse().read(); c.close()"},
		{"urllib", "import urllib.request", "urllib.request.urlopen(URL + '/').read()"},
	} {
		b.Run(c.name, func(b *testing.B) {
			code := fmt.Sprintf("URL = %q\n%s\nimport time\nt = time.perf_counter()\nfor _ in range(%d):\n    %s\nprint(time.perf_counter() - t)\n", ts.URL, c.setup, b.N, c.call)
			res, err := s.Run(context.Background(), airlock.Request{Code: code, Network: pol, Limits: airlock.Limits{Timeout: 10 * time.Minute}})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%v\n%s", err, res.Stderr)
			}
			secs, err := strconv.ParseFloat(strings.TrimSpace(string(res.Stdout)), 64)
			if err != nil {
				b.Fatal(err)
			}
			report(b, time.Duration(secs*float64(time.Second)), b.N)
		})
	}
}
