package airlock_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock"
)

// airpkg is a small pure-Python package: a submodule, a relative import
// and package data read through importlib.resources.
var airpkg = map[string]string{
	"airpkg/__init__.py":            "from .core import greet\n__version__ = '1.0'\n",
	"airpkg/core.py":                "def greet(name):\n    return f'hello {name}'\n",
	"airpkg/res.py":                 "from importlib.resources import files\n\ndef words():\n    return files('airpkg').joinpath('data/words.txt').read_text().split()\n",
	"airpkg/data/words.txt":         "alpha\nbeta\n",
	"airpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: airpkg\nVersion: 1.0\n",
	"airpkg-1.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	"airpkg-1.0.dist-info/RECORD":   "",
}

const airpkgWheel = "airpkg-1.0-py3-none-any.whl"

// useAirpkg imports every part of airpkg and says where it came from;
// useAirpkgCore leaves out the package data, as importlib.resources
// costs ~0.3 s to import on the -O0 build.
const (
	useAirpkg = `
import airpkg, airpkg.res
print(airpkg.greet("wheel"), airpkg.__version__, airpkg.res.words())
print(airpkg.__file__)
`
	useAirpkgCore = `
import airpkg
print(airpkg.greet("wheel"), airpkg.__version__)
print(airpkg.__file__)
`
)

// writeZip builds a zip (a wheel, when named so) at dir/name from files.
func writeZip(t testing.TB, dir, name string, files map[string]string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for n, content := range files {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeTree writes files under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for n, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func with(files map[string]string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func newSandbox(t *testing.T, opts ...airlock.Option) *airlock.Sandbox {
	t.Helper()
	s, err := airlock.New(context.Background(), append(suiteOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestPackageWheelPerRequest(t *testing.T) {
	whl := writeZip(t, t.TempDir(), airpkgWheel, airpkg)
	out := mustRun(t, airlock.Request{Code: useAirpkg, Packages: []string{whl}})
	want := "hello wheel 1.0 ['alpha', 'beta']\n/opt/airlock/packages/" + airpkgWheel + "/airpkg/__init__.py\n"
	if out != want {
		t.Fatalf("stdout = %q, want %q", out, want)
	}
	// The second run is served from the cache.
	out = mustRun(t, airlock.Request{Code: useAirpkgCore, Packages: []string{whl}})
	if want := "hello wheel 1.0\n/opt/airlock/packages/" + airpkgWheel + "/airpkg/__init__.py\n"; out != want {
		t.Fatalf("second run: stdout = %q, want %q", out, want)
	}
	// Packages are per run: the next run without them cannot import it.
	res, err := run(t, airlock.Request{Code: "import airpkg"})
	if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "ModuleNotFoundError") {
		t.Fatalf("import without the package: err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
	}
}

func TestPackageWithPackages(t *testing.T) {
	whl := writeZip(t, t.TempDir(), airpkgWheel, airpkg)
	s := newSandbox(t, airlock.WithPackages(whl))
	for range 2 {
		res, err := s.Run(context.Background(), airlock.Request{Code: useAirpkgCore})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
		}
		if !strings.HasPrefix(string(res.Stdout), "hello wheel 1.0\n") {
			t.Fatalf("stdout = %q", res.Stdout)
		}
	}
	// The same path in a request is the Sandbox's package, not a clash.
	res, err := s.Run(context.Background(), airlock.Request{Code: useAirpkgCore, Packages: []string{whl}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the Sandbox's package named again: err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
	}
}

func TestPackageDirectory(t *testing.T) {
	// A directory holding __init__.py is the package itself.
	pkgDir := filepath.Join(t.TempDir(), "airpkg")
	files := map[string]string{}
	for n, c := range airpkg {
		if rest, ok := strings.CutPrefix(n, "airpkg/"); ok {
			files[rest] = c
		}
	}
	files["__pycache__/core.cpython-312.pyc"] = "not used"
	writeTree(t, pkgDir, files)
	out := mustRun(t, airlock.Request{Code: useAirpkg, Packages: []string{pkgDir}})
	if want := "hello wheel 1.0 ['alpha', 'beta']\n/opt/airlock/packages/airpkg/airpkg/__init__.py\n"; out != want {
		t.Fatalf("package directory: stdout = %q, want %q", out, want)
	}
	// Any other directory is a sys.path root, like site-packages.
	root := filepath.Join(t.TempDir(), "site")
	writeTree(t, root, with(airpkg, map[string]string{"solo.py": "X = 7\n"}))
	out = mustRun(t, airlock.Request{Code: useAirpkgCore + "import solo; print(solo.X)", Packages: []string{root}})
	if want := "hello wheel 1.0\n/opt/airlock/packages/site/airpkg/__init__.py\n7\n"; out != want {
		t.Fatalf("sys.path root: stdout = %q, want %q", out, want)
	}
}

func TestPackageReadOnly(t *testing.T) {
	whl := writeZip(t, t.TempDir(), airpkgWheel, airpkg)
	dir := filepath.Join(t.TempDir(), "site")
	writeTree(t, dir, airpkg)
	out := mustRun(t, airlock.Request{Packages: []string{whl, dir}, Code: `
import errno
for path, mode in [("/opt/airlock/packages/` + airpkgWheel + `", "r+b"),
                   ("/opt/airlock/packages/site/airpkg/core.py", "w"),
                   ("/opt/airlock/packages/site/new.py", "w"),
                   ("/opt/airlock/packages/new.whl", "wb")]:
    try:
        open(path, mode).write(b"x" if "b" in mode else "x")
        print("wrote", path)
    except OSError as e:
        print(errno.errorcode[e.errno])
import os
for op in (lambda: os.remove("/opt/airlock/packages/site/airpkg/core.py"),
           lambda: os.mkdir("/opt/airlock/packages/site/d")):
    try:
        op()
        print("changed")
    except OSError as e:
        print(errno.errorcode[e.errno])
import airpkg
print(airpkg.greet("still"))
`})
	if want := strings.Repeat("EROFS\n", 6) + "hello still\n"; out != want {
		t.Fatalf("stdout = %q, want %q", out, want)
	}
}

func TestPackageCompiledExtensionRefused(t *testing.T) {
	const so = "airpkg/_speedups.cpython-312-x86_64-linux-gnu.so"
	whl := writeZip(t, t.TempDir(), airpkgWheel, with(airpkg, map[string]string{so: "\x7fELF"}))
	dir := filepath.Join(t.TempDir(), "native")
	writeTree(t, dir, with(airpkg, map[string]string{"airpkg/libs/libfoo.so.1": "\x7fELF"}))
	for _, tc := range []struct{ path, names string }{{whl, so}, {dir, "airpkg/libs/libfoo.so.1"}} {
		res, err := run(t, airlock.Request{Code: "print('ran')", Packages: []string{tc.path}})
		var e *airlock.Error
		if !errors.As(err, &e) || e.Kind != airlock.KindInvalidRequest || !errors.Is(err, airlock.ErrCompiledExtension) {
			t.Fatalf("%s: err = %v, want invalid_request wrapping ErrCompiledExtension", tc.path, err)
		}
		if !strings.Contains(err.Error(), tc.names) || len(res.Stdout) != 0 {
			t.Fatalf("%s: the error must name %s and nothing must run: %v, stdout %q", tc.path, tc.names, err, res.Stdout)
		}
		if _, err := airlock.New(context.Background(), airlock.WithPackages(tc.path)); !errors.Is(err, airlock.ErrCompiledExtension) || !strings.Contains(err.Error(), tc.names) {
			t.Fatalf("WithPackages(%s): err = %v", tc.path, err)
		}
	}
}

func TestPackageInvalidRefused(t *testing.T) {
	dir := t.TempDir()
	good := writeZip(t, dir, airpkgWheel, airpkg)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A stored (uncompressed) entry whose bytes are changed fails its CRC.
	stored := filepath.Join(dir, "stored.zip")
	{
		f, _ := os.Create(stored)
		zw := zip.NewWriter(f)
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: "m.py", Method: zip.Store})
		w.Write([]byte("VALUE = 'original'\n"))
		zw.Close()
		f.Close()
	}
	b, _ := os.ReadFile(stored)
	i := strings.Index(string(b), "original")
	copy(b[i:], "tampered")
	// Sizes are checked before reading: sparse files cost nothing here.
	huge := filepath.Join(dir, "huge.whl")
	if err := os.WriteFile(huge, nil, 0o644); err != nil || os.Truncate(huge, airlock.MaxPackageBytes+1) != nil {
		t.Fatal("cannot make a sparse file")
	}
	hugeDir := filepath.Join(dir, "hugedir")
	writeTree(t, hugeDir, map[string]string{"a.py": "", "b.py": ""})
	if os.Truncate(filepath.Join(hugeDir, "a.py"), airlock.MaxPackageBytes/2) != nil || os.Truncate(filepath.Join(hugeDir, "b.py"), airlock.MaxPackageBytes/2+1) != nil {
		t.Fatal("cannot make sparse files")
	}
	emptyDir := filepath.Join(dir, "empty")
	os.Mkdir(emptyDir, 0o755)
	cases := []struct{ name, path, says string }{
		{"missing", filepath.Join(dir, "nope.whl"), "no such file"},
		{"not a zip", write("junk.whl", []byte("this is not a zip archive")), "not a readable zip"},
		{"truncated", write("cut.whl", data[:len(data)/2]), "not a readable zip"},
		{"bad crc", write("crc.zip", b), "m.py"},
		{"other type", write("pkg.tar.gz", []byte("x")), "not a wheel"},
		{"empty dir", emptyDir, "no files"},
		{"too large", huge, "larger than"},
		{"directory too large", hugeDir, "larger than"},
		{"colon", write("a:b.whl", data), "must not contain"},
	}
	if _, err := run(t, airlock.Request{Packages: []string{""}}); !errors.Is(err, airlock.ErrInvalidPackage) || !strings.Contains(err.Error(), "empty path") {
		t.Fatalf("an empty package path: err = %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(t, airlock.Request{Code: "print('ran')", Packages: []string{tc.path}})
			var e *airlock.Error
			if !errors.As(err, &e) || e.Kind != airlock.KindInvalidRequest || !errors.Is(err, airlock.ErrInvalidPackage) {
				t.Fatalf("err = %v, want invalid_request wrapping ErrInvalidPackage", err)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), tc.path) || len(res.Stdout) != 0 {
				t.Fatalf("err = %v: want it to name %s and say %q; stdout %q", err, tc.path, tc.says, res.Stdout)
			}
		})
	}
	// Two packages with the same name would take the same guest path.
	other := writeZip(t, t.TempDir(), airpkgWheel, airpkg)
	if _, err := run(t, airlock.Request{Packages: []string{good, other}}); !errors.Is(err, airlock.ErrInvalidPackage) || !strings.Contains(err.Error(), "name") {
		t.Fatalf("two packages named %s: err = %v", airpkgWheel, err)
	}
}

// A package cannot shadow the standard library: packages come after it on
// sys.path, as site-packages does. Either order would be consistent in
// one mode, but with snapshots json is imported before any run starts,
// so only "stdlib first" behaves the same in both.
func TestPackageDoesNotShadowStdlib(t *testing.T) {
	whl := writeZip(t, t.TempDir(), "shadow-1.0-py3-none-any.whl", map[string]string{
		"json/__init__.py":       "SHADOW = True\n",
		"textwrap.py":            "SHADOW = True\n",
		"shadowonly/__init__.py": "",
	})
	out := mustRun(t, airlock.Request{Packages: []string{whl}, Code: `
import json, textwrap, shadowonly, sys
print(hasattr(json, "SHADOW"), hasattr(textwrap, "SHADOW"), shadowonly.__file__)
# Last but for the default packages, which come after a caller's own.
print(all(p.startswith("/opt/airlock/default/") for p in sys.path[sys.path.index("/opt/airlock/packages/shadow-1.0-py3-none-any.whl") + 1:]))
`})
	if want := "False False /opt/airlock/packages/shadow-1.0-py3-none-any.whl/shadowonly/__init__.py\nTrue\n"; out != want {
		t.Fatalf("stdout = %q, want %q", out, want)
	}
}

func TestPackageCacheKeyedBySizeAndMtime(t *testing.T) {
	dir := t.TempDir()
	whl := writeZip(t, dir, "ver-1.0-py3-none-any.whl", map[string]string{"ver.py": "V = 'one'\n"})
	st, err := os.Stat(whl)
	if err != nil {
		t.Fatal(err)
	}
	req := airlock.Request{Code: "import ver; print(ver.V)", Packages: []string{whl}}
	if out := mustRun(t, req); out != "one\n" {
		t.Fatalf("stdout = %q", out)
	}
	// Same size, same mtime: the cached copy is used, the file not re-read.
	writeZip(t, dir, "ver-1.0-py3-none-any.whl", map[string]string{"ver.py": "V = 'two'\n"})
	if err := os.Chtimes(whl, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, req); out != "one\n" {
		t.Fatalf("an unchanged fingerprint re-read the package: stdout = %q", out)
	}
	// A new mtime reloads it.
	later := st.ModTime().Add(time.Second)
	if err := os.Chtimes(whl, later, later); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, req); out != "two\n" {
		t.Fatalf("a changed package was not reloaded: stdout = %q", out)
	}
}

func TestPackagePreimport(t *testing.T) {
	whl := writeZip(t, t.TempDir(), airpkgWheel, airpkg)
	s := newSandbox(t, airlock.WithPackages(whl), airlock.WithPreimport("airpkg", "airpkg.res"))
	res, err := s.Run(context.Background(), airlock.Request{Code: `
import sys
print("airpkg" in sys.modules, "airpkg.res" in sys.modules)
import airpkg.res
print(airpkg.greet("pre"), airpkg.res.words())
`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
	}
	if want := "True True\nhello pre ['alpha', 'beta']\n"; string(res.Stdout) != want {
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
	// A deterministic run starts a fresh interpreter even with snapshots:
	// the modules are imported before its code all the same.
	res, err = s.Run(context.Background(), airlock.Request{Deterministic: true,
		Code: "import sys; print('airpkg' in sys.modules, 'airpkg.res' in sys.modules)"})
	if err != nil || string(res.Stdout) != "True True\n" {
		t.Fatalf("deterministic run: err=%v stdout=%q stderr=%s", err, res.Stdout, res.Stderr)
	}
	// A run's changes to a pre-imported module do not reach the next run.
	for i, want := range []string{"hello a\n", "hello b\n"} {
		code := "import airpkg\nprint(airpkg.greet('" + string(rune('a'+i)) + "'))\nairpkg.greet = None\n"
		res, err := s.Run(context.Background(), airlock.Request{Code: code})
		if err != nil || string(res.Stdout) != want {
			t.Fatalf("run %d: err=%v stdout=%q stderr=%s", i, err, res.Stdout, res.Stderr)
		}
	}
}

func TestPackagePreimportFailure(t *testing.T) {
	whl := writeZip(t, t.TempDir(), airpkgWheel, with(airpkg, map[string]string{
		"broken/__init__.py": "raise RuntimeError('broken on import')\n",
	}))
	cases := []struct{ module, says string }{
		{"no_such_module_anywhere", "No module named 'no_such_module_anywhere'"},
		{"broken", "broken on import"},
	}
	for _, tc := range cases {
		_, err := airlock.New(context.Background(), append(suiteOptions(), airlock.WithPackages(whl), airlock.WithPreimport(tc.module))...)
		if !errors.Is(err, airlock.ErrPreimport) || !strings.Contains(err.Error(), tc.says) {
			t.Fatalf("WithPreimport(%q): err = %v, want ErrPreimport saying %q", tc.module, err, tc.says)
		}
	}
	if _, err := airlock.New(context.Background(), airlock.WithPreimport("os; print(1)")); err == nil || !strings.Contains(err.Error(), "not a module name") {
		t.Fatalf("a pre-import that is not a module name: err = %v", err)
	}
}

func TestSessionPackages(t *testing.T) {
	whl := writeZip(t, t.TempDir(), airpkgWheel, airpkg)
	s := newSandbox(t, airlock.WithPackages(whl))
	if !s.Snapshots() {
		t.Fatal("snapshots unavailable: scripts/setup.sh prepares them")
	}
	ctx := context.Background()
	sess, err := s.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	for _, step := range []struct{ code, want string }{
		{"import airpkg\ng = airpkg.greet('session')", ""},
		{"print(g, airpkg.__version__)", "hello session 1.0\n"},
	} {
		res, err := sess.Run(ctx, airlock.Request{Code: step.code})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != step.want {
			t.Fatalf("%q: err=%v exit=%d stdout=%q stderr=%s", step.code, err, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	// A saved session loads with the packages mounted again.
	var blob bytes.Buffer
	if err := sess.Save(&blob); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.LoadSession(ctx, &blob, airlock.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close(ctx)
	res, err := loaded.Run(ctx, airlock.Request{Code: "print(g, open('/opt/airlock/packages/" + airpkgWheel + "', 'rb').read(2))"})
	if err != nil || string(res.Stdout) != "hello session b'PK'\n" {
		t.Fatalf("loaded session: err=%v stdout=%q stderr=%s", err, res.Stdout, res.Stderr)
	}
	// A call cannot change the session's filesystem or sys.path this way.
	if _, err := sess.Run(ctx, airlock.Request{Code: "pass", Packages: []string{whl}}); !errors.Is(err, airlock.ErrInvalidRequest) {
		t.Fatalf("a session call with packages: err = %v", err)
	}
}
