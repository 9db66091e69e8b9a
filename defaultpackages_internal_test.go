package airlock

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-sandbox/airlock/internal/pkglist"
)

func TestFetchedFile(t *testing.T) {
	sums := map[string]string{
		"charset_normalizer-3.5.3-py3-none-any.whl": "a",
		"tornado-6.6.1-sdist.zip":                   "b",
		"sympy-1.13.0-py3-none-any.whl":             "c", // another version
	}
	for name, want := range map[string]string{"charset_normalizer": "charset_normalizer-3.5.3-py3-none-any.whl",
		"tornado": "tornado-6.6.1-sdist.zip", "sympy": ""} {
		p, ok := pkglist.Lookup(name)
		if !ok {
			t.Fatalf("%s is not listed", name)
		}
		if got := fetchedFile(sums, p); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// The fetched network and test wheels the default zip holds are left
// out; the caller's own packages of the same names stay.
func TestDropDefaultDuplicates(t *testing.T) {
	cache := "/cache"
	d := &defaultPackages{sysPath: "/opt/airlock/default/x.zip", versions: map[string]string{"requests": "2.34.2", "pytest": "9.2.0"}}
	in := []string{
		filepath.Join(NetworkWheelsDir(cache), "requests-2.34.2-py3-none-any.whl"),
		filepath.Join(NetworkWheelsDir(cache), "httpx-0.28.1-py3-none-any.whl"),
		filepath.Join(cache, "testwheels", "pytest-9.2.0-py3-none-any.whl"),
		"/mine/requests-1.0-py3-none-any.whl",
	}
	got := dropDefaultDuplicates(in, d, cache)
	want := []string{in[1], in[3]}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := dropDefaultDuplicates(in, &defaultPackages{}, cache); !slices.Equal(got, in) {
		t.Fatalf("off: got %v", got)
	}
	if got := dropDefaultDuplicates(in, nil, cache); !slices.Equal(got, in) {
		t.Fatalf("nil: got %v", got)
	}
}

// The source fixes are valid JSON for the guest, and each names a
// default package's file.
func TestSourceFixesNameDefaultPackages(t *testing.T) {
	for file := range sourceFixes {
		top, _, _ := strings.Cut(file, "/")
		found := false
		for _, p := range pkglist.All() {
			if p.In(pkglist.SetDefault) && slices.Contains(p.Imports, top) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no default package imports as %s", file, top)
		}
	}
}
