package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

func TestRunDemoTools(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want int
		out  string
	}{
		{"calls", []string{"run", "--tools", "demo", "-c", `
import airlock
t = airlock.tools
t.kv_set("k", {"n": [1, 2]})
print(t.add(2, 3), t.echo("é"), t.kv_get("k"), t.kv_keys(), t.now()[:2])
try:
    t.kv_get("missing")
except airlock.HostError as e:
    print("error:", e)
print(sorted(n for n in dir(t) if not n.startswith("_")))`}, 0,
			"5 é {'n': [1, 2]} ['k'] 20\nerror: kv_get: no key \"missing\"\n['add', 'echo', 'kv_get', 'kv_keys', 'kv_set', 'now']\n"},
		{"without the flag", []string{"run", "-c", "import airlock\nairlock.tools.add(1, 2)"}, 1, ""},
		{"unknown set", []string{"run", "--tools", "prod", "-c", "pass"}, exitUsage, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cli(t, "", tc.args...)
			if code != tc.want || (tc.out != "" && stdout != tc.out) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tc.want, stdout, stderr)
			}
			if tc.want == 1 && !strings.Contains(stderr, "UnknownToolError: no host tools are available in this run") {
				t.Fatalf("stderr:\n%s", stderr)
			}
		})
	}
}

// The demo store is per run: what one client's run stores, another's cannot
// read, and the store goes when its run ends. It is bounded in keys and
// bytes, whatever the guest sends. (Before: one map for the process, shared
// by every run and client, without a bound.)
func TestDemoStoreIsPerRunAndBounded(t *testing.T) {
	ctx := context.Background()
	tools, stores := demoToolsWithStores()
	sb, err := airlock.New(ctx, airlock.WithHostFuncs(tools...))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	run := func(code string) string {
		t.Helper()
		res, err := sb.Run(ctx, airlock.Request{Code: "import airlock\nt = airlock.tools\n" + code})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v, exit %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
		}
		return string(res.Stdout)
	}
	if got := run("t.kv_set('secret', 's3cret')\nprint(t.kv_get(key='secret'), t.kv_keys())"); got != "s3cret ['secret']\n" {
		t.Fatalf("within a run: %q", got)
	}
	if got := run("print(t.kv_keys())\ntry:\n    t.kv_get('secret')\nexcept airlock.HostError as e:\n    print(e)"); got != "[]\nkv_get: no key \"secret\"\n" {
		t.Fatalf("a later run sees %q", got)
	}
	// Two runs at once, each with its own.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			out := run(fmt.Sprintf("import time\nt.kv_set('me', %d)\ntime.sleep(0.2)\nprint(t.kv_get('me'), t.kv_keys())", i))
			if want := fmt.Sprintf("%d ['me']\n", i); out != want {
				t.Errorf("concurrent run %d: %q, want %q", i, out, want)
			}
		})
	}
	wg.Wait()
	// Dropped by context.AfterFunc, on a goroutine of its own, just after.
	for deadline := time.Now().Add(2 * time.Second); stores.live() != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := stores.live(); n != 0 {
		t.Fatalf("%d stores held after their runs ended", n)
	}
	got := run(`
for i in range(300):
    try:
        t.kv_set(str(i), i)
    except airlock.HostError as e:
        print(i, e)
        break
print(len(t.kv_keys()))
t.kv_set("0", "replacing a key is no new key")
print(t.kv_get("0"))`)
	want := fmt.Sprintf("%d kv_set: the store holds its maximum of %d keys\n%d\nreplacing a key is no new key\n", kvMaxKeys, kvMaxKeys, kvMaxKeys)
	if got != want {
		t.Fatalf("key bound: %q, want %q", got, want)
	}
	got = run(`
for i in range(3):
    try:
        t.kv_set(str(i), "x" * 400000)
    except airlock.HostError as e:
        print(i, str(e)[:40])
print(t.kv_keys())`)
	if got != "2 kv_set: the store would hold 1200009 byt\n['0', '1']\n" {
		t.Fatalf("byte bound: %q", got)
	}
}

// In airlock repl the demo store lasts the session: a value set by one
// input is there for the next.
func TestReplDemoStoreLastsTheSession(t *testing.T) {
	code, out, stderr := cli(t, "import airlock\nairlock.tools.kv_set('k', [1, 2])\nairlock.tools.kv_get('k')\n", "repl", "--tools", "demo")
	if code != 0 || !strings.Contains(out, "[1, 2]") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}
