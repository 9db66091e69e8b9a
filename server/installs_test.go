package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/pkgindex/indextest"
)

// A server installs from the operator's index only: runs get the wheels,
// the result and /metrics record each install, and a client cannot name
// an index of its own.
func TestServerInstallsFromTheOperatorsIndex(t *testing.T) {
	ix := indextest.NewIndex(t,
		indextest.Wheel{Name: "wordlist", Version: "2.1", Module: "WORDS = ['hello']\n"},
		indextest.Wheel{Name: "tampered", Version: "1.0", BadHash: true})
	isb, err := airlock.New(context.Background(), airlock.WithPackageIndex(airlock.PackageIndex{URL: ix.URL(), CacheDir: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	defer isb.Close(context.Background())
	url, _ := serve(t, Config{Sandbox: isb})

	body, _ := json.Marshal(map[string]any{"code": `
import airlock
airlock.install("wordlist", quiet=True)
import wordlist
print(wordlist.WORDS)
try:
    airlock.install("tampered")
except airlock.InstallError as e:
    print(e.kind)
`})
	r := post(t, url+"/v1/run", "", string(body))
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	res := decodeResult(t, r)
	if res.Stdout != "['hello']\nhash_mismatch\n" || len(res.Installs) != 2 || !res.Installs[0].Allowed || res.Installs[1].Allowed ||
		res.Installs[0].Packages[0].SHA256 == "" {
		t.Fatalf("result: %+v", res)
	}
	if r := post(t, url+"/v1/run", "", `{"code": "pass", "index_url": "http://elsewhere/simple/"}`); r.status != 400 || !strings.Contains(string(r.body), "index_url") {
		t.Fatalf("a client naming an index: %d %s", r.status, r.body)
	}
	if d := mcpDescription(MCPConfig{Sandbox: isb}); !strings.Contains(d, "pure-Python packages install from the host's package index: `import airlock; airlock.install(") {
		t.Errorf("the MCP description does not say how to install:\n%s", d)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`airlock_package_installs_total{outcome="allowed"} 1`, `airlock_package_installs_total{outcome="refused"} 1`, `airlock_package_wheels_mounted_total 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
