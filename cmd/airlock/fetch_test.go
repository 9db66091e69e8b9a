package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// setup --fetch URL downloads a bundle from a server (here one on
// loopback, as a release's mirror would serve it), checks it against the
// manifest sha256 it is told (or the one this version pins), installs it
// into an empty cache with no wasm-opt and prepares it; the Go API's
// FetchBuild does the same for a program that embeds the library. A
// bundle that is not the pinned one, a URL that does not serve one, and
// no sum at all change nothing.
func TestSetupFetch(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "airlock-bundle.tar.gz")
	code, stdout, stderr := cli(t, "", "setup", "--export", bundle)
	m := regexp.MustCompile(`manifest sha256 ([0-9a-f]{64})`).FindStringSubmatch(stdout)
	if code != 0 || m == nil {
		t.Fatalf("setup --export: exit %d, no manifest sha256\n%s\n%s", code, stdout, stderr)
	}
	sum := m[1]
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v0.1.0/airlock-bundle.tar.gz" {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	defer srv.Close()
	url := srv.URL + "/v0.1.0/airlock-bundle.tar.gz"

	withoutWasmOpt(t)
	mustBeEmpty := func(dir, what string) {
		t.Helper()
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("%s left %v in the cache", what, left)
		}
	}

	// Refused, changing nothing: another bundle's sum, a URL with nothing
	// there, no sum to check against (this version pins none), a sum that
	// is not one.
	other := strings.Repeat("ab", 32)
	dir := t.TempDir()
	code, _, stderr = cli(t, "", "setup", "--fetch", url, "--bundle-sha256", other, "--cache-dir", dir)
	if code != exitAirlock || !strings.Contains(stderr, "not the pinned bundle") {
		t.Fatalf("a bundle that is not the pinned one: exit %d\n%s", code, stderr)
	}
	mustBeEmpty(dir, "a refused fetch")
	code, _, stderr = cli(t, "", "setup", "--fetch", srv.URL+"/v9/none.tar.gz", "--bundle-sha256", sum, "--cache-dir", dir)
	if code != exitAirlock || !strings.Contains(stderr, "404") {
		t.Fatalf("a URL with no bundle: exit %d\n%s", code, stderr)
	}
	mustBeEmpty(dir, "a fetch of nothing")
	if airlock.ReleaseBundleSHA256 == "" {
		code, _, stderr = cli(t, "", "setup", "--fetch", url, "--cache-dir", dir)
		if code != exitUsage || !strings.Contains(stderr, "pins no release bundle") {
			t.Fatalf("no sum to check against: exit %d\n%s", code, stderr)
		}
	}
	for _, args := range [][]string{
		{"--fetch", url, "--bundle-sha256", "not-a-sum"},
		{"--fetch", url, "--import", bundle},
		{"--bundle-sha256", sum},
		{"--fetch", url, "--python", "npm"},
	} {
		if code, _, stderr := cli(t, "", append(append([]string{"setup"}, args...), "--cache-dir", dir)...); code != exitUsage {
			t.Errorf("setup %q: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}
	mustBeEmpty(dir, "a usage error")

	// The pinned bundle: installed and prepared without wasm-opt; a run
	// there resumes from a snapshot and has numpy.
	code, stdout, stderr = cli(t, "", "setup", "--fetch", url, "--bundle-sha256", sum, "--cache-dir", dir)
	if code != 0 || !strings.Contains(stdout, "fetched "+url) || !strings.Contains(stdout, "(snapshots: true)") {
		t.Fatalf("setup --fetch: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = cli(t, "", "run", "--cache-dir", dir, "-c", "import numpy; print(numpy.arange(4).sum())")
	if code != 0 || stdout != "6\n" {
		t.Fatalf("run after fetch: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// The Go API, into another empty cache.
	ctx := context.Background()
	goDir := t.TempDir()
	if err := airlock.FetchBuild(ctx, airlock.BuildSource{URL: url, SHA256: other, CacheDir: goDir}); !errors.Is(err, airlock.ErrChecksum) {
		t.Fatalf("FetchBuild of another bundle: %v, want ErrChecksum", err)
	}
	mustBeEmpty(goDir, "a refused FetchBuild")

	// A program of its own module, which requires this one (a replace
	// stands in for the version a user would go get), fetches the build
	// with FetchBuild and runs code with New: no clone, no set-up script.
	out, err := runSeparateModule(t, url, sum, goDir)
	if err != nil || out != "(3, 13) 42\n" {
		t.Fatalf("the separate module: %v\n%s", err, out)
	}
}

// runSeparateModule builds and runs, with the go command, a main package
// in a module of its own that uses this one, and returns its output.
func runSeparateModule(t *testing.T, url, sum, cacheDir string) (string, error) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/uses-airlock\n\ngo 1.26.0\n\nrequire github.com/airlock-sandbox/airlock v0.1.0\n\nreplace github.com/airlock-sandbox/airlock => " + root + "\n",
		"go.sum": string(sums),
		"main.go": `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/airlock-sandbox/airlock"
)

func main() {
	ctx := context.Background()
	src := airlock.BuildSource{URL: os.Args[1], SHA256: os.Args[2], CacheDir: os.Args[3]}
	if err := airlock.FetchBuild(ctx, src); err != nil {
		fmt.Println("FetchBuild:", err)
		os.Exit(1)
	}
	sb, err := airlock.New(ctx, airlock.WithCacheDir(src.CacheDir))
	if err != nil {
		fmt.Println("New:", err)
		os.Exit(1)
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, airlock.Request{Code: "import sys; print(tuple(sys.version_info[:2]), 6 * 7)"})
	if err != nil || !sb.Snapshots() {
		fmt.Println("Run:", err, "snapshots:", sb.Snapshots())
		os.Exit(1)
	}
	fmt.Print(string(res.Stdout))
}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Offline: every module it needs is this one's, already in the module
	// cache; -mod=mod lets go complete the new go.mod from them.
	cmd := exec.Command(goBin, "run", ".", url, sum, cacheDir)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
