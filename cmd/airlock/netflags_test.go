package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRunAllowNet(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s key=%s", r.URL.Path, r.Header.Get("X-Key"))
	}))
	defer api.Close()
	t.Setenv("AIRLOCK_TEST_NET_KEY", "k-123")
	code := fmt.Sprintf(`
import urllib.request, urllib.error
print(urllib.request.urlopen(%q).read().decode())
try:
    urllib.request.urlopen("http://api.evil.com/")
except urllib.error.URLError as e:
    print(e.reason)
`, api.URL+"/v1/x")
	st, out, errOut := cli(t, "", "run", "--json", "--allow-net", api.URL+"/v1/ header:X-Key=$AIRLOCK_TEST_NET_KEY", "-c", code)
	if st != 0 {
		t.Fatalf("status %d: %s %s", st, out, errOut)
	}
	var res struct {
		Stdout  string
		Network []struct {
			Allowed bool
			URL     string
			Status  int
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Stdout, "hello /v1/x key=k-123\nnetwork: api.evil.com is not in this run's allow-list") {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if len(res.Network) != 2 || !res.Network[0].Allowed || res.Network[0].Status != 200 || res.Network[1].Allowed {
		t.Fatalf("network: %+v", res.Network)
	}
	for _, bad := range [][]string{
		{"run", "--allow-net", "ftp://x", "-c", "pass"},
		{"run", "--allow-net", "x.com header:K=$AIRLOCK_TEST_UNSET_VAR", "-c", "pass"},
		{"run", "--server", "http://127.0.0.1:1", "--allow-net", "x.com header:K=v", "-c", "pass"},
		{"serve", "--allow-net", "ftp://x"},
		{"mcp", "--allow-net", "ftp://x"},
	} {
		if st, _, errOut := cli(t, "", bad...); st != exitUsage || !strings.Contains(errOut+"", "allow-net") {
			t.Errorf("%v: status %d (%s), want a usage error naming --allow-net", bad, st, errOut)
		}
	}
}
