package bench

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock"
)

// BenchmarkPackageImport times a run that imports a pure-Python package
// (benchpkg: 10 modules, 38 KB of source, from a wheel), side by side:
// named by the request (read once, then cached by the Sandbox), given to
// the Sandbox (WithPackages), and pre-imported into its snapshot
// (WithPreimport); "none" is the same run without the import, and
// "request-unused" names the package without importing it (the host's
// cost of a request's package: a stat, a cache hit and a mount).
//
//	go test -run '^$' -bench PackageImport -count 6 ./bench/ | tee pkg.txt; benchstat pkg.txt
func BenchmarkPackageImport(b *testing.B) {
	ctx := context.Background()
	whl := benchWheel(b, b.TempDir())
	const use = "import benchpkg\nprint(benchpkg.total())"
	withPkgs, err := airlock.New(ctx, airlock.WithPackages(whl))
	if err != nil {
		b.Fatal(err)
	}
	defer withPkgs.Close(ctx)
	preimported, err := airlock.New(ctx, airlock.WithPackages(whl), airlock.WithPreimport("benchpkg"))
	if err != nil {
		b.Fatal(err)
	}
	defer preimported.Close(ctx)
	fresh, err := airlock.New(ctx, airlock.WithSnapshots(false), airlock.WithPackages(whl))
	if err != nil {
		b.Fatal(err)
	}
	defer fresh.Close(ctx)
	if !sb.Snapshots() || !preimported.Snapshots() {
		b.Fatal("snapshots unavailable: scripts/setup.sh prepares them")
	}
	cases := []struct {
		name string
		sb   *airlock.Sandbox
		req  airlock.Request
	}{
		{"none", sb, airlock.Request{Code: "print(0)"}},
		{"request-unused", sb, airlock.Request{Code: "print(0)", Packages: []string{whl}}},
		{"request", sb, airlock.Request{Code: use, Packages: []string{whl}}},
		{"sandbox", withPkgs, airlock.Request{Code: use}},
		{"preimport", preimported, airlock.Request{Code: use}},
		{"sandbox-fresh", fresh, airlock.Request{Code: use}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.sb.Run(ctx, c.req)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("err=%v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
				}
			}
		})
	}
}

// benchWheel writes benchpkg's wheel into dir: modules of plain
// functions and classes, imported by the package's __init__.
func benchWheel(b *testing.B, dir string) string {
	const modules = 10
	p := filepath.Join(dir, "benchpkg-1.0-py3-none-any.whl")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw := zip.NewWriter(f)
	add := func(name, src string) {
		w, err := zw.Create(name)
		if err == nil {
			_, err = w.Write([]byte(src))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	var init strings.Builder
	for m := range modules {
		var src strings.Builder
		fmt.Fprintf(&src, "\"\"\"Module %d of benchpkg.\"\"\"\nimport math\n\nTABLE = {%s}\n\n", m, table(m))
		for fn := range 10 {
			fmt.Fprintf(&src, "def f%d(x, y=1, *args, scale=%d.0, **kw):\n    \"\"\"Function %d.\"\"\"\n"+
				"    total = 0\n    for i in range(x):\n        if i %% 3 == 0:\n            total += i * y\n"+
				"        elif i %% 3 == 1:\n            total -= math.floor(i / scale)\n        else:\n"+
				"            total ^= i\n    return [total, *args, sorted(kw.items())]\n\n", fn, fn+1, fn)
		}
		fmt.Fprintf(&src, "class Thing%d:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n\n"+
			"    def __repr__(self):\n        return f'Thing%d({self.a!r}, {self.b!r})'\n\n"+
			"    @property\n    def size(self):\n        return len(TABLE) + self.a\n\n"+
			"    def combine(self, other):\n        return Thing%d(self.a + other.a, self.b or other.b)\n\n"+
			"def value():\n    return len(TABLE)\n", m, m, m)
		add(fmt.Sprintf("benchpkg/mod%02d.py", m), src.String())
		fmt.Fprintf(&init, "from . import mod%02d\n", m)
	}
	fmt.Fprintf(&init, "\ndef total():\n    return sum(m.value() for m in (%s))\n", mods(modules))
	add("benchpkg/__init__.py", init.String())
	add("benchpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: benchpkg\nVersion: 1.0\n")
	add("benchpkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
	add("benchpkg-1.0.dist-info/RECORD", "")
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p
}

func table(m int) string {
	var s strings.Builder
	for i := range 20 {
		fmt.Fprintf(&s, "'k%d_%d': (%d, %q), ", m, i, i*m, fmt.Sprint(i))
	}
	return s.String()
}

func mods(n int) string {
	var s []string
	for m := range n {
		s = append(s, fmt.Sprintf("mod%02d", m))
	}
	return strings.Join(s, ", ")
}
