package airlock_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/internal/pkgindex/indextest"
)

// The package index the install tests use, built by the test: a package
// with a dependency and a win32-only one its marker excludes on WASI, a
// wheel whose sha256 the index gets wrong, a compiled wheel, a pure-tagged
// wheel that holds a .so, and one that needs an older numpy than the
// build's.
func installIndex(t *testing.T) *indextest.Index {
	return indextest.NewIndex(t,
		indextest.Wheel{Name: "greet-kit", Version: "1.0", Requires: []string{"wordlist>=2", `winonly; sys_platform == "win32"`},
			Module: "from wordlist import WORDS\ndef greet(n):\n    return WORDS[0] + ' ' + n\n"},
		indextest.Wheel{Name: "wordlist", Version: "2.1", Module: "WORDS = ['hello', 'there']\n"},
		indextest.Wheel{Name: "winonly", Version: "1.0"},
		indextest.Wheel{Name: "tampered", Version: "1.0", BadHash: true},
		indextest.Wheel{Name: "fastmath", Version: "1.0", Tag: "cp313-cp313-manylinux_2_17_x86_64"},
		indextest.Wheel{Name: "sneaky", Version: "1.0", Files: map[string]string{"sneaky/_speedups.so": "\x7fELF"}},
	)
}

func indexSandbox(t *testing.T, ix *indextest.Index, cache string, opts ...airlock.Option) *airlock.Sandbox {
	t.Helper()
	return newSandbox(t, append([]airlock.Option{airlock.WithPackageIndex(airlock.PackageIndex{URL: ix.URL(), CacheDir: cache})}, opts...)...)
}

func auditOf(res *airlock.Result, kind string) string {
	var b strings.Builder
	for _, e := range res.Audit {
		if e.Kind == kind {
			b.WriteString(e.Detail + "\n")
		}
	}
	return b.String()
}

func TestInstallFromIndexInARun(t *testing.T) {
	ix := installIndex(t)
	cache := t.TempDir()
	s := indexSandbox(t, ix, cache)
	res, err := s.Run(context.Background(), airlock.Request{Code: `
import airlock
print(airlock.install("greet-kit"))
import greet_kit, wordlist
print(greet_kit.greet("wasi"), wordlist.__file__)
try:
    import winonly
except ModuleNotFoundError as e:
    print("no winonly")
`, Limits: airlock.Limits{Timeout: 30 * time.Second}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	out := string(res.Stdout)
	for _, want := range []string{
		"Collecting greet-kit==1.0\n", "Collecting wordlist==2.1\n",
		"Successfully installed greet-kit-1.0 wordlist-2.1\n",
		"['greet-kit==1.0', 'wordlist==2.1']\n",
		"hello wasi /opt/airlock/packages/wordlist-2.1-py3-none-any.whl/wordlist/__init__.py\n",
		"no winonly\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if len(res.Installs) != 1 || !res.Installs[0].Allowed || len(res.Installs[0].Packages) != 2 {
		t.Fatalf("Installs = %+v", res.Installs)
	}
	for _, p := range res.Installs[0].Packages {
		if _, err := os.Stat(filepath.Join(cache, p.SHA256, p.Filename)); err != nil {
			t.Errorf("%s not in the cache by sha256: %v", p.Filename, err)
		}
	}
	if a := auditOf(res, airlock.AuditInstall); !strings.Contains(a, "greet-kit: allowed: greet-kit 1.0 (sha256 ") || !strings.Contains(a, "wordlist 2.1") {
		t.Errorf("audit: %q", a)
	}
	// The installed wheels are read-only, and the next run does not have
	// them: an install is for its run.
	res, err = s.Run(context.Background(), airlock.Request{Code: `
import airlock, errno
airlock.install("wordlist", quiet=True)
try:
    open("/opt/airlock/packages/wordlist-2.1-py3-none-any.whl", "ab")
except OSError as e:
    print("read-only:", e.errno == errno.EROFS)
`})
	if err != nil || string(res.Stdout) != "read-only: True\n" {
		t.Fatalf("write into an installed wheel: err=%v\n%s%s", err, res.Stdout, res.Stderr)
	}
	if !res.Installs[0].Packages[0].Cached {
		t.Errorf("the second install should come from the cache: %+v", res.Installs)
	}
	// What the build has natively is satisfied without the index.
	if strings.Contains(strings.Join(s.Info().Libraries, " "), "numpy") {
		pages := ix.Pages.Load()
		res, err = s.Run(context.Background(), airlock.Request{Code: "import airlock\nprint(airlock.install('numpy>=2'))"})
		if err != nil || !strings.HasPrefix(string(res.Stdout), "Requirement already satisfied: numpy in python.wasm (built in) (") || ix.Pages.Load() != pages {
			t.Fatalf("numpy: err=%v\n%s%s", err, res.Stdout, res.Stderr)
		}
	}
	res, _ = s.Run(context.Background(), airlock.Request{Code: "import greet_kit"})
	if res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "airlock.install('name')") {
		t.Fatalf("a later run without the install: exit=%d\n%s", res.ExitCode, res.Stderr)
	}
}

func TestInstallRefusalsInTheGuest(t *testing.T) {
	ix := installIndex(t)
	cache := t.TempDir()
	s := indexSandbox(t, ix, cache)
	cases := []struct{ req, kind, text string }{
		{"tampered", "hash_mismatch", "sha256 mismatch: tampered-1.0-py3-none-any.whl: the index says abab"},
		{"fastmath", "no_compatible_wheel", "only wheels with compiled code for other platforms (fastmath-1.0-cp313-cp313-manylinux_2_17_x86_64.whl); python.wasm loads pure-Python wheels (py3-none-any) only"},
		{"sneaky", "compiled_extension", "sneaky-1.0-py3-none-any.whl holds sneaky/_speedups.so; python.wasm loads pure-Python code only"},
		{"numpy<2", "conflict", "requested numpy<2, but python.wasm (built in) has numpy"},
		{"nothing-here", "not_found", "no such project on the index: nothing-here"},
		{"x @ http://127.0.0.1/x.whl", "invalid", "direct references"},
	}
	for _, c := range cases {
		if c.req == "numpy<2" && !strings.Contains(strings.Join(s.Info().Libraries, " "), "numpy") {
			continue // the npm fallback has no numpy built in
		}
		res, err := s.Run(context.Background(), airlock.Request{Code: `
import airlock, sys
try:
    airlock.install('` + c.req + `')
except airlock.InstallError as e:
    print(e.kind)
    print(e)
print(sorted(p for p in sys.path if "airlock/packages" in p))
`})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: err=%v\n%s%s", c.req, err, res.Stdout, res.Stderr)
		}
		out := string(res.Stdout)
		if !strings.HasPrefix(out, c.kind+"\nairlock: pip install "+c.req+": ") || !strings.Contains(out, c.text) || !strings.HasSuffix(out, "[]\n") {
			t.Errorf("%s: stdout\n%s\nwant kind %s and %q, nothing on sys.path", c.req, out, c.kind, c.text)
		}
		if len(res.Installs) != 1 || res.Installs[0].Allowed || !strings.Contains(auditOf(res, airlock.AuditInstall), "refused") {
			t.Errorf("%s: Installs %+v audit %q", c.req, res.Installs, auditOf(res, airlock.AuditInstall))
		}
	}
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("refused installs left %d entries in the cache", len(left))
	}

	// An allow-list: the dependency is outside it.
	allow := newSandbox(t, airlock.WithPackageIndex(airlock.PackageIndex{URL: ix.URL(), CacheDir: t.TempDir(), Allow: []string{"greet_kit"}}))
	res, err := allow.Run(context.Background(), airlock.Request{Code: `
import airlock
try:
    airlock.install("greet-kit")
except airlock.InstallError as e:
    print(e.kind, e)
`})
	if err != nil || !strings.Contains(string(res.Stdout), "not_allowed airlock: pip install greet-kit: not in the package allow-list: wordlist (allowed: greet-kit) (greet-kit requires wordlist>=2)") {
		t.Fatalf("allow-list: err=%v\n%s%s", err, res.Stdout, res.Stderr)
	}

	// No index configured: the refusal says how the operator enables one.
	res, err = run(t, airlock.Request{Code: `
import airlock
try:
    airlock.install("greet-kit")
except airlock.InstallError as e:
    print(e.kind, e)
`})
	if err != nil || !strings.Contains(string(res.Stdout), "no_index airlock: installing packages is not enabled in this sandbox: the host has no package index configured (its operator enables one with airlock.WithPackageIndex in Go or --index-url") {
		t.Fatalf("no index: err=%v\n%s%s", err, res.Stdout, res.Stderr)
	}
	if !strings.Contains(auditOf(res, airlock.AuditRefused), "install: install greet-kit (no package index)") {
		t.Errorf("no index: audit %+v", res.Audit)
	}
}

func TestInstallIndexBoundsAndBadAnswers(t *testing.T) {
	ix := installIndex(t)
	s := newSandbox(t, airlock.WithPackageIndex(airlock.PackageIndex{URL: ix.URL(), CacheDir: t.TempDir(), Timeout: 500 * time.Millisecond, MaxInstalls: 2}))
	for mode, want := range map[string]string{
		"garbage": "index_error airlock: pip install wordlist: malformed index answer: the page for wordlist: not PEP 691 JSON",
		"slow":    "timeout airlock: pip install wordlist: install timed out",
		"huge":    "index_error airlock: pip install wordlist: malformed index answer: the page for wordlist is larger than 8388608 bytes",
	} {
		ix.Mode.Store(mode)
		start := time.Now()
		res, err := s.Run(context.Background(), airlock.Request{Code: `
import airlock
try:
    airlock.install("wordlist")
except airlock.InstallError as e:
    print(e.kind, e)
`})
		if err != nil || !strings.Contains(string(res.Stdout), want) {
			t.Errorf("%s: err=%v\n%s%s", mode, err, res.Stdout, res.Stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %s", mode, d)
		}
	}
	ix.Mode.Store("json")
	res, err := s.Run(context.Background(), airlock.Request{Code: `
import airlock
for i in range(3):
    try:
        airlock.install("wordlist", quiet=True)
        print("ok")
    except airlock.InstallError as e:
        print(e.kind, e)
`})
	if err != nil || !strings.Contains(string(res.Stdout), "ok\nok\ntoo_many airlock: pip install wordlist: this run has made its 2 allowed install requests") {
		t.Fatalf("MaxInstalls: err=%v\n%s%s", err, res.Stdout, res.Stderr)
	}
	// Asking on in a loop is answered every time; the record stays bounded.
	res, err = s.Run(context.Background(), airlock.Request{Code: `
import airlock
n = 0
for i in range(500):
    try:
        airlock.install("wordlist", quiet=True)
    except airlock.InstallError as e:
        n += e.kind == "too_many"
print(n)
`})
	if err != nil || string(res.Stdout) != "498\n" || len(res.Installs) != 2+16 {
		t.Fatalf("a loop of installs: err=%v, %d records\n%s%s", err, len(res.Installs), res.Stdout, res.Stderr)
	}
	// A hostile guest writing garbage to the device gets an answer, and
	// the run goes on.
	res, err = s.Run(context.Background(), airlock.Request{Code: `
import os
for frame in (b"zzzzzzzz", b"00000004null", b"00000005[1,2]", b"0000000a{\"requirem", b"ffffffff" + b"x" * 100):
    fd = os.open("/dev/airlock-pip", os.O_RDWR)
    os.write(fd, frame)
    print(os.read(fd, 4096)[8:].decode()[:60])
    os.close(fd)
`})
	if err != nil || res.ExitCode != 0 || strings.Count(string(res.Stdout), `{"error":{"kind":"invalid"`) != 5 {
		t.Fatalf("garbage frames: err=%v\n%s%s", err, res.Stdout, res.Stderr)
	}
}

func TestInstallThroughPipCommandLines(t *testing.T) {
	ix := installIndex(t)
	s := indexSandbox(t, ix, t.TempDir())
	res, err := s.Run(context.Background(), airlock.Request{Code: `
import subprocess, sys, os
r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "wordlist"], capture_output=True, text=True)
print("quiet:", repr(r.stdout), repr(r.stderr))
r = subprocess.run([sys.executable, "-m", "pip", "install", "wordlist"], capture_output=True, text=True)
print("run:", r.returncode, repr(r.stdout.splitlines()[-1]))
import wordlist
print(wordlist.WORDS)
subprocess.check_call("pip install greet-kit", shell=True)
import greet_kit
print(greet_kit.greet("pip"))
r = subprocess.run(["pip3", "install", "tampered"], capture_output=True)
print("bad:", r.returncode, r.stderr.decode().strip()[:80])
try:
    subprocess.run(["pip", "install", "fastmath"], check=True, capture_output=True)
except subprocess.CalledProcessError as e:
    print("check:", e.returncode)
print("out:", subprocess.check_output(["python3", "-m", "pip", "install", "wordlist"]).decode().splitlines()[0])
print(subprocess.run(["pip", "install", "--index-url", "http://elsewhere/simple", "x"], capture_output=True, text=True).stderr.strip())
print(subprocess.run(["pip", "list"], capture_output=True, text=True).stderr.strip()[:90])
with os.popen("pip install wordlist") as f:
    print("popen:", f.read().splitlines()[0])
try:
    subprocess.run(["ls"])
except PermissionError as e:
    print("ls:", str(e)[:50])
`, Limits: airlock.Limits{Timeout: 30 * time.Second}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	want := `quiet: '' ''
run: 0 'Requirement already satisfied: wordlist in this run (installed earlier) (2.1)'
['hello', 'there']
Requirement already satisfied: wordlist in this run (installed earlier) (2.1)
Collecting greet-kit==1.0
  Downloading greet_kit-1.0-py3-none-any.whl (sha256 `
	out := string(res.Stdout)
	if !strings.HasPrefix(out, want) {
		t.Errorf("stdout starts\n%s\nwant\n%s", out, want)
	}
	for _, w := range []string{
		"hello pip\n",
		"bad: 1 ERROR: airlock: pip install tampered: sha256 mismatch: tampered",
		"check: 1\n",
		"out: Requirement already satisfied: wordlist",
		"ERROR: airlock: --index-url is not available in this sandbox: packages come only from the package index the host's operator configured",
		"ERROR: airlock: only 'pip install' works in this sandbox (not 'pip list')",
		"popen: Requirement already satisfied: wordlist",
		"ls: airlock: this sandbox cannot start processes",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	if !bytes.Contains(res.Stdout, []byte("Using cached")) && !bytes.Contains(res.Stdout, []byte("Downloading")) {
		t.Errorf("no pip-like lines:\n%s", out)
	}
}

// Sessions keep what a call installed: later calls, forks and a saved
// copy (which names the wheels by sha256 and mounts them again from the
// host's cache) import it; a rolled-back call's install is gone with it.
func TestSessionInstallFromIndex(t *testing.T) {
	ix := installIndex(t)
	cache := t.TempDir()
	s := indexSandbox(t, ix, cache)
	sess := newSession(t, s, airlock.SessionOptions{Limits: airlock.Limits{Timeout: 30 * time.Second}})
	call(t, sess, airlock.Request{Code: "import airlock\nairlock.install('greet-kit', quiet=True)"}, "", "")
	call(t, sess, airlock.Request{Code: "import greet_kit\nprint(greet_kit.greet('later'))"}, "hello later\n", "")
	// Installing again is satisfied by the session's own copy.
	res := call(t, sess, airlock.Request{Code: "import airlock\nprint(airlock.install('wordlist>=2', quiet=True))"}, "[]\n", "")
	if len(res.Installs) != 1 || !res.Installs[0].Allowed || len(res.Installs[0].Packages) != 0 {
		t.Fatalf("a second install: %+v", res.Installs)
	}
	fork, err := sess.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close(context.Background())
	call(t, fork, airlock.Request{Code: "import wordlist\nprint(wordlist.WORDS[1])"}, "there\n", "")

	// A call that installs and then leaves the interpreter is rolled
	// back: the session has neither the wheel nor its sys.path entry.
	res, _ = sess.Run(context.Background(), airlock.Request{Code: "import airlock, os\nairlock.install('winonly', quiet=True)\nos._exit(3)"})
	if !res.RolledBack {
		t.Fatalf("os._exit should roll back: %+v", res)
	}
	call(t, sess, airlock.Request{Code: "import os\nprint(os.path.exists('/opt/airlock/packages/winonly-1.0-py3-none-any.whl'))"}, "False\n", "")

	var saved bytes.Buffer
	if err := sess.Save(&saved); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.LoadSession(context.Background(), bytes.NewReader(saved.Bytes()), airlock.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close(context.Background())
	call(t, loaded, airlock.Request{Code: "import greet_kit\nprint(greet_kit.greet('loaded'))"}, "hello loaded\n", "")

	// Signed, the same (format version 5).
	key := []byte("a session key of 32 bytes, test!")
	signed := indexSandbox(t, ix, cache, airlock.WithSessionKey(key))
	ss := newSession(t, signed, airlock.SessionOptions{})
	call(t, ss, airlock.Request{Code: "import airlock\nairlock.install('wordlist', quiet=True)"}, "", "")
	var sb bytes.Buffer
	if err := ss.Save(&sb); err != nil {
		t.Fatal(err)
	}
	sl, err := signed.LoadSession(context.Background(), &sb, airlock.LoadOptions{})
	if err != nil {
		t.Fatalf("signed: %v", err)
	}
	defer sl.Close(context.Background())
	call(t, sl, airlock.Request{Code: "import wordlist\nprint(wordlist.WORDS[0])"}, "hello\n", "")

	// Without the wheels in the cache the saved session is refused,
	// naming what is missing, rather than loaded without them.
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadSession(context.Background(), bytes.NewReader(saved.Bytes()), airlock.LoadOptions{}); !errors.Is(err, airlock.ErrPackageNotCached) || !strings.Contains(err.Error(), "greet-kit 1.0") {
		t.Fatalf("load without the cache: %v", err)
	}
	// A session that installed nothing saves as before (no package list).
	plain := newSession(t, s, airlock.SessionOptions{})
	call(t, plain, airlock.Request{Code: "x = 1"}, "", "")
	var b2 bytes.Buffer
	if err := plain.Save(&b2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadSession(context.Background(), &b2, airlock.LoadOptions{}); err != nil {
		t.Fatalf("plain session: %v", err)
	}
}

// %pip install on a line of a session call (or a REPL input) is the
// host's install; code that compiles as it is never changes.
func TestSessionPipMagic(t *testing.T) {
	ix := installIndex(t)
	s := indexSandbox(t, ix, t.TempDir())
	sess := newSession(t, s, airlock.SessionOptions{Limits: airlock.Limits{Timeout: 30 * time.Second}})
	call(t, sess, airlock.Request{Code: "%pip install -q greet-kit\nimport greet_kit\nprint(greet_kit.greet('magic'))"}, "hello magic\n", "")
	call(t, sess, airlock.Request{Code: "print(greet_kit.greet('again'))"}, "hello again\n", "")
	res, _ := sess.Run(context.Background(), airlock.Request{Code: "!pip install tampered"})
	if !strings.Contains(string(res.Stderr), "airlock.InstallError: airlock: pip install tampered: sha256 mismatch") || !strings.Contains(string(res.Stderr), "!pip install tampered") {
		t.Fatalf("a refused %%pip: %s", res.Stderr)
	}
	call(t, sess, airlock.Request{Code: "%pip install wordlist", Interactive: true}, "Requirement already satisfied: wordlist in this session (installed earlier) (2.1)\n", "")
	// Valid code that happens to hold such a line in a string is left alone.
	call(t, sess, airlock.Request{Code: "s = '''\n%pip install nothing\n'''\nprint(len(s))"}, "22\n", "")
}
