package pkgindex_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/internal/pkgindex"
	"github.com/airlock-sandbox/airlock/internal/pkgindex/indextest"
)

func TestVersionOrder(t *testing.T) {
	order := []string{"0.9", "1.0.dev1", "1.0a1", "1.0a2.dev1", "1.0b1", "1.0rc1", "1.0", "1.0+local", "1.0.post1.dev1", "1.0.post1", "1.0.1", "1.1", "2!0.1"}
	for i := 1; i < len(order); i++ {
		a, err := pkgindex.ParseVersion(order[i-1])
		if err != nil {
			t.Fatal(err)
		}
		b, err := pkgindex.ParseVersion(order[i])
		if err != nil {
			t.Fatal(err)
		}
		if a.Compare(b) >= 0 || b.Compare(a) <= 0 {
			t.Errorf("%s should sort before %s", a, b)
		}
	}
	for _, eq := range [][2]string{{"1.0", "1.0.0"}, {"1.0alpha1", "1.0a1"}, {"v1.0", "1.0"}, {"1.0-1", "1.0.post1"}, {"1.0c1", "1.0rc1"}} {
		a, _ := pkgindex.ParseVersion(eq[0])
		b, _ := pkgindex.ParseVersion(eq[1])
		if a.Compare(b) != 0 {
			t.Errorf("%s should equal %s", eq[0], eq[1])
		}
	}
	for _, bad := range []string{"", "one", "1.0.", "1..0", "1.0-beta-x"} {
		if _, err := pkgindex.ParseVersion(bad); !errors.Is(err, pkgindex.ErrBadVersion) {
			t.Errorf("ParseVersion(%q) = %v, want ErrBadVersion", bad, err)
		}
	}
}

func TestSpecifiers(t *testing.T) {
	cases := []struct {
		spec string
		yes  []string
		no   []string
	}{
		{">=1.2,<2", []string{"1.2", "1.9.9", "1.2.post1"}, []string{"1.1", "2.0", "2.0a1", "1.5rc1"}},
		{"==1.4.*", []string{"1.4", "1.4.7", "1.4.0.post2"}, []string{"1.5", "1.40"}},
		{"!=1.4.*", []string{"1.5", "1.3"}, []string{"1.4.2"}},
		{"~=2.2", []string{"2.2", "2.9"}, []string{"3.0", "2.1"}},
		{"~=1.4.5", []string{"1.4.5", "1.4.9"}, []string{"1.5.0", "1.4.4"}},
		{"==1.0", []string{"1.0", "1.0.0", "1.0+abc"}, []string{"1.0.1"}},
		{"<2.0", []string{"1.9"}, []string{"2.0.dev1", "2.0a1"}},
		{">1.0", []string{"1.1"}, []string{"1.0", "1.0.post1"}},
		{">=1.0a1", []string{"1.0a2", "1.0"}, []string{"0.9"}},
		{"", []string{"0.1", "100"}, []string{"1.0rc1"}},
		{"===1.0", []string{"1.0"}, []string{"1.0.0"}},
	}
	for _, c := range cases {
		s, err := pkgindex.ParseSpecifiers(c.spec)
		if err != nil {
			t.Fatalf("%q: %v", c.spec, err)
		}
		for _, v := range c.yes {
			pv, _ := pkgindex.ParseVersion(v)
			if !s.Allows(pv, false) {
				t.Errorf("%q should allow %s", c.spec, v)
			}
		}
		for _, v := range c.no {
			pv, _ := pkgindex.ParseVersion(v)
			if s.Allows(pv, false) {
				t.Errorf("%q should not allow %s", c.spec, v)
			}
		}
	}
	for _, bad := range []string{">=", "=>1", ">=1.*", "~=1", "==one"} {
		if _, err := pkgindex.ParseSpecifiers(bad); !errors.Is(err, pkgindex.ErrBadRequirement) {
			t.Errorf("ParseSpecifiers(%q) = %v, want ErrBadRequirement", bad, err)
		}
	}
}

func TestMarkersForWASI(t *testing.T) {
	env := pkgindex.WASIEnv("3.13.5")
	cases := map[string]bool{
		`sys_platform == "wasi"`:  true,
		`sys_platform == "win32"`: false,
		`sys_platform != "emscripten" and platform_machine == "wasm32"`: true,
		`python_version >= "3.8"`:         true,
		`python_version < "3.10"`:         false,
		`python_full_version >= '3.13.1'`: true,
		`os_name == "nt" or (implementation_name == "cpython" and python_version > "3.12")`: true,
		`"wasi" in sys_platform`:                   true,
		`platform_machine not in "x86_64 aarch64"`: true,
		`extra == "socks"`:                         false,
		`platform_python_implementation == 'PyPy'`: false,
	}
	for src, want := range cases {
		m, err := pkgindex.ParseMarker(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := m.Eval(env, nil); got != want {
			t.Errorf("%s = %v, want %v", src, got, want)
		}
	}
	m, _ := pkgindex.ParseMarker(`extra == "Socks"`)
	if !m.Eval(env, []string{"socks"}) {
		t.Error("extra == 'Socks' should hold with extra socks")
	}
	for _, bad := range []string{`sys_platform ==`, `nonsense == "x"`, `(sys_platform == "wasi"`, `sys_platform = "x"`, `"a"`, strings.Repeat("(", 40) + `os_name == "posix"` + strings.Repeat(")", 40)} {
		if _, err := pkgindex.ParseMarker(bad); err == nil {
			t.Errorf("ParseMarker(%q) succeeded", bad)
		}
	}
}

func TestRequirements(t *testing.T) {
	r, err := pkgindex.ParseRequirement(`Foo.Bar[Socks, extra2] (>=1.2,<2) ; python_version >= "3"`)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "foo-bar" || len(r.Extras) != 2 || r.Spec.String() != ">=1.2,<2" || r.Marker == nil {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []string{"", "-x", "foo @ https://example.invalid/x.whl", "foo[", "foo >= ", "foo; bad marker"} {
		if _, err := pkgindex.ParseRequirement(bad); !errors.Is(err, pkgindex.ErrBadRequirement) {
			t.Errorf("ParseRequirement(%q) = %v, want ErrBadRequirement", bad, err)
		}
	}
}

// testIndex is the index most tests use: a package with two
// dependencies, one excluded on WASI by its marker; a bad sha256; a
// compiled wheel; a yanked newer version; sdists.
func testIndex(t *testing.T) *indextest.Index {
	return indextest.NewIndex(t,
		indextest.Wheel{Name: "app-kit", Version: "1.0", Requires: []string{
			"helper>=2", `winonly; sys_platform == "win32"`, `extra-dep; extra == "more"`}},
		indextest.Wheel{Name: "app-kit", Version: "1.1", Yanked: true},
		indextest.Wheel{Name: "app-kit", Version: "2.0a1"},
		indextest.Wheel{Name: "helper", Version: "1.5"},
		indextest.Wheel{Name: "helper", Version: "2.3"},
		indextest.Wheel{Name: "helper", Version: "3.0", RequiresPython: ">=3.14"},
		indextest.Wheel{Name: "winonly", Version: "1.0"},
		indextest.Wheel{Name: "extra-dep", Version: "0.1"},
		indextest.Wheel{Name: "tampered", Version: "1.0", BadHash: true},
		indextest.Wheel{Name: "fastmath", Version: "1.0", Tag: "cp313-cp313-manylinux_2_17_x86_64"},
		indextest.Wheel{Name: "sneaky", Version: "1.0", Files: map[string]string{"sneaky/_speedups.cpython-313-wasm32-wasi.so": "\x00asm"}},
		indextest.Wheel{Name: "needs-old-numpy", Version: "1.0", Requires: []string{"numpy<2"}},
		indextest.Wheel{Name: "conflict", Version: "1.0", Requires: []string{"helper<2"}},
		indextest.Wheel{Name: "uses-numpy", Version: "1.0", Requires: []string{"numpy>=2"}},
		indextest.Wheel{Name: "early", Version: "0.1b2"},
	)
}

func config(ix *indextest.Index, cache string) pkgindex.Config {
	return pkgindex.Config{URL: ix.URL(), CacheDir: cache, Env: pkgindex.WASIEnv("3.13.5")}
}

func TestInstallResolvesWithWASIMarkers(t *testing.T) {
	ix := testIndex(t)
	for _, mode := range []string{"json", "html"} {
		t.Run(mode, func(t *testing.T) {
			ix.Mode.Store(mode)
			cache := t.TempDir()
			res, err := pkgindex.Install(context.Background(), config(ix, cache), []string{"App_Kit"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range res.Wheels {
				got = append(got, w.Name+"=="+w.Version)
				if _, err := os.Stat(w.Path); err != nil || filepath.Base(filepath.Dir(w.Path)) != w.SHA256 {
					t.Errorf("%s not cached by sha256 at %s: %v", w.Filename, w.Path, err)
				}
			}
			// 1.1 is yanked, 2.0a1 a pre-release; helper 3.0 needs Python
			// 3.14; winonly is for win32 only; extra-dep only with [more].
			if strings.Join(got, " ") != "app-kit==1.0 helper==2.3" {
				t.Fatalf("installed %v", got)
			}
		})
	}
	ix.Mode.Store("json")
	res, err := pkgindex.Install(context.Background(), config(ix, t.TempDir()), []string{"app-kit[more]", "helper"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Wheels) != 3 || res.Wheels[2].Name != "extra-dep" {
		t.Fatalf("with [more]: %+v", res.Wheels)
	}
	res, err = pkgindex.Install(context.Background(), config(ix, t.TempDir()), []string{"app-kit>=2.0a1"}, nil)
	if err != nil || res.Wheels[0].Version != "2.0a1" {
		t.Fatalf("a specifier naming a pre-release takes it: %+v, %v", res, err)
	}
}

func TestInstallCachesBySHA256(t *testing.T) {
	ix := testIndex(t)
	cache := t.TempDir()
	cfg := config(ix, cache)
	if _, err := pkgindex.Install(context.Background(), cfg, []string{"helper==2.3"}, nil); err != nil {
		t.Fatal(err)
	}
	before := ix.Downloads.Load()
	res, err := pkgindex.Install(context.Background(), cfg, []string{"helper==2.3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Downloads.Load() != before || !res.Wheels[0].Cached {
		t.Fatalf("second install downloaded again (%d -> %d) or was not from the cache", before, ix.Downloads.Load())
	}
	// A damaged cache entry is not trusted: it is fetched again.
	if err := os.WriteFile(res.Wheels[0].Path, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pkgindex.Cached(cache, res.Wheels[0].SHA256, res.Wheels[0].Filename); !errors.Is(err, pkgindex.ErrNotCached) {
		t.Fatalf("Cached on a damaged file: %v", err)
	}
	res, err = pkgindex.Install(context.Background(), cfg, []string{"helper==2.3"}, nil)
	if err != nil || res.Wheels[0].Cached || ix.Downloads.Load() != before+1 {
		t.Fatalf("damaged cache: %+v %v", res, err)
	}
	if p, err := pkgindex.Cached(cache, res.Wheels[0].SHA256, res.Wheels[0].Filename); err != nil || p != res.Wheels[0].Path {
		t.Fatalf("Cached after a fresh fetch: %q %v", p, err)
	}
	if _, err := pkgindex.Cached(cache, res.Wheels[0].SHA256, "../../etc/passwd.whl"); !errors.Is(err, pkgindex.ErrNotCached) {
		t.Fatalf("Cached with a path: %v", err)
	}
}

func TestInstallRefusals(t *testing.T) {
	ix := testIndex(t)
	cases := []struct {
		reqs []string
		have map[string]pkgindex.Have
		cfg  func(*pkgindex.Config)
		want error
		text string
	}{
		{reqs: []string{"tampered"}, want: pkgindex.ErrHashMismatch, text: "tampered-1.0-py3-none-any.whl: the index says abab"},
		{reqs: []string{"fastmath"}, want: pkgindex.ErrNoCompatible, text: "only wheels with compiled code for other platforms (fastmath-1.0-cp313-cp313-manylinux_2_17_x86_64.whl); python.wasm loads pure-Python wheels (py3-none-any) only"},
		{reqs: []string{"sneaky"}, want: pkgindex.ErrNativeCode, text: "sneaky/_speedups.cpython-313-wasm32-wasi.so"},
		{reqs: []string{"no-such-thing"}, want: pkgindex.ErrNotFound, text: "no-such-thing"},
		{reqs: []string{"helper>=9"}, want: pkgindex.ErrNoCompatible, text: "pure wheels of versions outside >=9 (1.5, 2.3)"},
		{reqs: []string{"app-kit"}, cfg: func(c *pkgindex.Config) { c.Allow = []string{"App-Kit"} }, want: pkgindex.ErrNotAllowed, text: "helper (allowed: app-kit) (app-kit requires helper>=2)"},
		{reqs: []string{"helper"}, cfg: func(c *pkgindex.Config) { c.Allow = []string{"app-kit"} }, want: pkgindex.ErrNotAllowed, text: "not in the package allow-list: helper"},
		{reqs: []string{"needs-old-numpy"}, have: map[string]pkgindex.Have{"numpy": {"2.5.5", "python.wasm"}}, want: pkgindex.ErrConflict, text: "needs-old-numpy requires numpy<2, but python.wasm has numpy 2.5.5"},
		{reqs: []string{"app-kit", "conflict"}, want: pkgindex.ErrConflict, text: "conflict requires helper<2, but helper 2.3 was chosen first (for app-kit)"},
		{reqs: []string{"app-kit"}, cfg: func(c *pkgindex.Config) { c.MaxFiles = 1 }, want: pkgindex.ErrTooLarge, text: "more than 1 wheels"},
		{reqs: []string{"helper"}, cfg: func(c *pkgindex.Config) { c.MaxBytes = 100 }, want: pkgindex.ErrTooLarge},
		{reqs: []string{"helper @ http://127.0.0.1/x.whl"}, want: pkgindex.ErrBadRequirement, text: "direct references"},
		{reqs: []string{"early"}, want: pkgindex.ErrNoCompatible, text: "only pre-releases that fit (0.1b2), taken when a specifier names one (name>=0.1b2) or with pip install --pre"},
		{reqs: nil, want: pkgindex.ErrBadRequirement},
	}
	for _, c := range cases {
		cache := t.TempDir()
		cfg := config(ix, cache)
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		_, err := pkgindex.Install(context.Background(), cfg, c.reqs, c.have)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%v: %v, want %v containing %q", c.reqs, err, c.want, c.text)
		}
		if left, _ := os.ReadDir(cache); len(left) != 0 {
			t.Errorf("%v: the refused install left %d entries in the cache", c.reqs, len(left))
		}
	}
	// What the build has meets a dependency outside the allow-list.
	cfg := config(ix, t.TempDir())
	cfg.Allow = []string{"uses-numpy"}
	res, err := pkgindex.Install(context.Background(), cfg, []string{"uses-numpy"}, map[string]pkgindex.Have{"numpy": {"2.5.5", "python.wasm"}})
	if err != nil || len(res.Wheels) != 1 || len(res.Satisfied) != 1 || res.Satisfied[0].Name != "numpy" {
		t.Fatalf("numpy from the build: %+v %v", res, err)
	}
	// What the guest has already satisfies a requirement without a fetch.
	before := ix.Downloads.Load()
	res, err = pkgindex.Install(context.Background(), config(ix, t.TempDir()), []string{"helper>=2"}, map[string]pkgindex.Have{"helper": {"2.0", "installed"}})
	if err != nil || len(res.Wheels) != 0 || len(res.Satisfied) != 1 || ix.Downloads.Load() != before {
		t.Fatalf("satisfied: %+v %v", res, err)
	}
}

func TestInstallBadIndexesAreBounded(t *testing.T) {
	ix := testIndex(t)
	for _, c := range []struct {
		mode string
		want error
		text string
	}{
		{"garbage", pkgindex.ErrBadIndex, "not PEP 691 JSON"},
		{"huge", pkgindex.ErrBadIndex, "larger than 1048576 bytes"},
		{"slow", pkgindex.ErrTimeout, "install's time ran out"},
	} {
		ix.Mode.Store(c.mode)
		cfg := config(ix, t.TempDir())
		cfg.MaxPageBytes = 1 << 20
		cfg.Timeout = 300 * time.Millisecond
		start := time.Now()
		_, err := pkgindex.Install(context.Background(), cfg, []string{"helper"}, nil)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want %v containing %q", c.mode, err, c.want, c.text)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %s", c.mode, d)
		}
	}
	// An index that is down.
	cfg := config(ix, t.TempDir())
	cfg.URL = "http://127.0.0.1:1/simple/"
	if _, err := pkgindex.Install(context.Background(), cfg, []string{"helper"}, nil); !errors.Is(err, pkgindex.ErrIndexUnavailable) {
		t.Errorf("down: %v", err)
	}
}

func TestWheelTagsFollowTheInterpreter(t *testing.T) {
	ix := indextest.NewIndex(t,
		indextest.Wheel{Name: "tagged", Version: "1.0", Tag: "py2.py3-none-any"},
		indextest.Wheel{Name: "tagged", Version: "2.0", Tag: "py313-none-any"},
		indextest.Wheel{Name: "tagged", Version: "3.0", Tag: "cp314-none-any"},
		indextest.Wheel{Name: "tagged", Version: "4.0", Tag: "py3-none-wasi_0_0_0_wasm32"})
	for full, want := range map[string]string{"3.13.5": "2.0", "3.12.0": "1.0"} {
		cfg := config(ix, t.TempDir())
		cfg.Env = pkgindex.WASIEnv(full)
		res, err := pkgindex.Install(context.Background(), cfg, []string{"tagged"}, nil)
		if err != nil || res.Wheels[0].Version != want {
			t.Errorf("Python %s: %+v %v, want tagged %s", full, res, err, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []pkgindex.Config{
		{URL: "ftp://x/simple", CacheDir: "/tmp"},
		{URL: "not a url", CacheDir: "/tmp"},
		{URL: "http://x/simple/"},
		{URL: "http://x/simple/", CacheDir: "/tmp", Allow: []string{"bad name!"}},
		{URL: "http://x/simple/", CacheDir: "/tmp", MaxBytes: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
}

// An index page cannot steer the host to another origin: a file linked
// on another server (another port on loopback), or a redirect there, is
// not fetched at all, and the refusal names the origin; an origin the
// operator names (FileOrigins) is fetched from, checked as ever.
func TestFilesOnlyFromTheIndexAndNamedOrigins(t *testing.T) {
	w := indextest.Wheel{Name: "helper", Version: "2.3"}
	ix := indextest.NewIndex(t, w)
	elsewhere := indextest.NewIndex(t, w) // the same file, on another port
	for _, mode := range []string{"json", "html"} {
		ix.Mode.Store(mode)
		ix.FilesAt.Store(elsewhere.Server.URL)
		_, err := pkgindex.Install(context.Background(), config(ix, t.TempDir()), []string{"helper"}, nil)
		if !errors.Is(err, pkgindex.ErrBadIndex) || !strings.Contains(err.Error(), elsewhere.Server.URL) {
			t.Fatalf("%s: a file linked on another origin: %v", mode, err)
		}
		if n := elsewhere.Downloads.Load(); n != 0 {
			t.Fatalf("%s: the other origin was asked %d times", mode, n)
		}
		ix.FilesAt.Store("")
		ix.RedirectFilesTo.Store(elsewhere.Server.URL)
		_, err = pkgindex.Install(context.Background(), config(ix, t.TempDir()), []string{"helper"}, nil)
		if !errors.Is(err, pkgindex.ErrBadIndex) || !strings.Contains(err.Error(), elsewhere.Server.URL) {
			t.Fatalf("%s: a redirect to another origin: %v", mode, err)
		}
		if n := elsewhere.Downloads.Load(); n != 0 {
			t.Fatalf("%s: the other origin was asked %d times after a redirect", mode, n)
		}
		ix.RedirectFilesTo.Store("")
	}
	// Named by the operator: fetched, and a redirect there followed.
	cfg := config(ix, t.TempDir())
	cfg.FileOrigins = []string{elsewhere.Server.URL}
	ix.FilesAt.Store(elsewhere.Server.URL)
	if res, err := pkgindex.Install(context.Background(), cfg, []string{"helper"}, nil); err != nil || len(res.Wheels) != 1 || elsewhere.Downloads.Load() != 1 {
		t.Fatalf("from a named origin: %+v %v (%d fetches there)", res, err, elsewhere.Downloads.Load())
	}
	ix.FilesAt.Store("")
	ix.RedirectFilesTo.Store(elsewhere.Server.URL)
	cfg.CacheDir = t.TempDir()
	if _, err := pkgindex.Install(context.Background(), cfg, []string{"helper"}, nil); err != nil || elsewhere.Downloads.Load() != 2 {
		t.Fatalf("redirected to a named origin: %v (%d fetches there)", err, elsewhere.Downloads.Load())
	}
	for _, bad := range []string{"ftp://x", "https://", "https://x/path", "https://u@x", "x"} {
		cfg.FileOrigins = []string{bad}
		if err := cfg.Validate(); err == nil {
			t.Errorf("file origin %q accepted", bad)
		}
	}
}
