package pkglist

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// buildTools are what build.json pins that python.wasm does not carry as
// a Python package: build tools, and cmeel-openblas, whose sdist is only
// the vehicle of OpenBLAS' C sources (scripts/build-openblas.sh).
var buildTools = map[string]bool{"cython": true, "pybind11": true, "cppy": true, "cmeel-openblas": true}

// The list's build entries are the build's: each version and sha256 as
// build.json (scripts/build-python.sh) records them, and every Python
// package the build pins is listed.
func TestListMatchesBuild(t *testing.T) {
	cache := os.Getenv("AIRLOCK_CACHE_DIR")
	if cache == "" {
		home, err := os.UserCacheDir()
		if err != nil {
			t.Skip(err)
		}
		cache = filepath.Join(home, "airlock")
	}
	data, err := os.ReadFile(filepath.Join(cache, "python313", "build.json"))
	if os.IsNotExist(err) {
		t.Skip("no own build in the cache (scripts/setup.sh makes it)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Packages map[string]string `json:"packages"`
		Sources  map[string]string `json:"sources_sha256"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	// A Python package's source: its sdist, or its wheel.
	source := regexp.MustCompile(`^([A-Za-z0-9_.]+?)-([0-9][^-]*?)(\.tar\.gz|-py[^-]*-none-any\.whl|-cp.*\.whl)$`)
	for file, sum := range rec.Sources {
		m := source.FindStringSubmatch(file)
		if m == nil || buildTools[normalize(m[1])] {
			continue
		}
		p, ok := Lookup(m[1])
		switch {
		case !ok:
			t.Errorf("the build has %s %s, which packages.txt does not list", m[1], m[2])
		case p.From == FromWheel && p.Version == m[2] && p.SHA256 == sum:
			// A default-layer wheel the build packs as well, the same
			// file (packaging: matplotlib imports it).
		case p.From != FromBuild:
			t.Errorf("%s: the build has it, packages.txt says from %s", p.Name, p.From)
		case p.Version != m[2] || p.SHA256 != sum:
			t.Errorf("%s: packages.txt has %s %s, the build %s %s", p.Name, p.Version, p.SHA256, m[2], sum)
		}
	}
	for _, p := range all() {
		if p.From == FromBuild && rec.Packages[p.Name] != p.Version {
			t.Errorf("%s %s: build.json's packages have %q", p.Name, p.Version, rec.Packages[p.Name])
		}
	}
}
