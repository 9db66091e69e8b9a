package main

import (
	"strings"
	"testing"
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
