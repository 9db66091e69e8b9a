// Package pkglist is the one list of the packages Airlock's build
// carries and mounts (packages.txt): what scripts/fetch-wheels.sh fetches,
// what `airlock version --packages` prints, docs/packages.md's table and
// the guest's note on a ModuleNotFoundError all come from it.
package pkglist

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

//go:embed packages.txt
var listText string

// Kinds and sources of a package (packages.txt's kind and from columns).
const (
	KindCompiled = "compiled"
	KindPure     = "pure"

	FromBuild   = "build"   // in python.wasm's build
	FromWheel   = "wheel"   // a py3-none-any wheel
	FromSdist   = "sdist"   // pure-Python files repacked from the sdist
	FromPlanned = "planned" // not built yet
)

// Sets a fetched package belongs to.
const (
	SetDefault = "default" // mounted in every run
	SetNet     = "net"     // mounted for network runs
	SetTest    = "test"    // airlock test's runner
)

// Package is one line of the list.
type Package struct {
	Name    string   // the distribution's name
	Version string   // "" for a planned one
	Kind    string   // KindCompiled or KindPure
	From    string   // FromBuild, FromWheel, FromSdist or FromPlanned
	Sets    []string // SetDefault, SetNet, SetTest (none for the build's)
	Needs   []string // compiled packages it imports
	Imports []string // its top-level module names
	SHA256  string   // of the file fetched or built from; "" for none
}

// In tells whether p belongs to set.
func (p Package) In(set string) bool { return slices.Contains(p.Sets, set) }

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	moduleRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	sha256RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	versionRE = regexp.MustCompile(`^[0-9][A-Za-z0-9.+!-]*$`)
)

// Parse reads the list's text: one package a line, eight columns,
// "-" for none; # starts a comment line.
func Parse(text string) ([]Package, error) {
	var out []Package
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 8 {
			return nil, fmt.Errorf("pkglist: line %d: %d columns, want 8 (name version kind from sets needs import sha256)", i+1, len(f))
		}
		none := func(s string) string {
			if s == "-" {
				return ""
			}
			return s
		}
		list := func(s string) []string {
			if s == "-" {
				return nil
			}
			return strings.Split(s, ",")
		}
		p := Package{Name: f[0], Version: none(f[1]), Kind: f[2], From: f[3], Sets: list(f[4]),
			Needs: list(f[5]), Imports: list(f[6]), SHA256: none(f[7])}
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("pkglist: line %d: %s: %w", i+1, p.Name, err)
		}
		key := normalize(p.Name)
		if seen[key] {
			return nil, fmt.Errorf("pkglist: line %d: %s is listed twice", i+1, p.Name)
		}
		seen[key] = true
		out = append(out, p)
	}
	// Needs name compiled packages of the list.
	for _, p := range out {
		for _, n := range p.Needs {
			i := slices.IndexFunc(out, func(q Package) bool { return normalize(q.Name) == normalize(n) })
			if i < 0 || out[i].Kind != KindCompiled {
				return nil, fmt.Errorf("pkglist: %s needs %s, which is not a compiled package of the list", p.Name, n)
			}
		}
	}
	return out, nil
}

func (p Package) check() error {
	if !nameRE.MatchString(p.Name) {
		return fmt.Errorf("not a distribution name")
	}
	if p.Kind != KindCompiled && p.Kind != KindPure {
		return fmt.Errorf("kind %q: compiled or pure", p.Kind)
	}
	switch p.From {
	case FromPlanned:
		if p.Version != "" || p.SHA256 != "" || len(p.Sets) > 0 {
			return fmt.Errorf("a planned package has no version, sha256 or set")
		}
	case FromBuild, FromWheel, FromSdist:
		if !versionRE.MatchString(p.Version) || !sha256RE.MatchString(p.SHA256) {
			return fmt.Errorf("needs a version and a sha256")
		}
		// A build's package in the default set has a pure fallback: its
		// sdist's Python files, mounted where the build lacks it.
		if p.From == FromBuild && len(p.Sets) > 0 && !slices.Equal(p.Sets, []string{SetDefault}) {
			return fmt.Errorf("a build's package is in no set, or in the default set alone (its pure fallback)")
		}
		if p.From != FromBuild && len(p.Sets) == 0 {
			return fmt.Errorf("a fetched package is in at least one set")
		}
		if p.From != FromBuild && p.Kind != KindPure {
			return fmt.Errorf("only pure packages are fetched")
		}
	default:
		return fmt.Errorf("from %q: build, wheel, sdist or planned", p.From)
	}
	for _, s := range p.Sets {
		if s != SetDefault && s != SetNet && s != SetTest {
			return fmt.Errorf("set %q: default, net or test", s)
		}
	}
	if len(p.Imports) == 0 {
		return fmt.Errorf("no import name")
	}
	for _, m := range p.Imports {
		if !moduleRE.MatchString(m) {
			return fmt.Errorf("import %q: not a module name", m)
		}
	}
	return nil
}

// normalize is a distribution name as PEP 503 compares them.
func normalize(name string) string {
	return strings.NewReplacer("_", "-", ".", "-").Replace(strings.ToLower(name))
}

var all = sync.OnceValue(func() []Package {
	pkgs, err := Parse(listText)
	if err != nil {
		panic(err) // the embedded list; its tests parse it
	}
	return pkgs
})

// All is the list, in its order.
func All() []Package { return slices.Clone(all()) }

// Lookup finds a package by distribution name (compared as PEP 503 does).
func Lookup(name string) (Package, bool) {
	for _, p := range all() {
		if normalize(p.Name) == normalize(name) {
			return p, true
		}
	}
	return Package{}, false
}

// Usable tells whether p can be imported on a build that has the
// compiled packages has reports: the build's own when has says so or it
// has a pure fallback, a fetched one when all it needs is usable, a
// planned one never.
func (p Package) Usable(has func(name string) bool) bool {
	switch p.From {
	case FromPlanned:
		return false
	case FromBuild:
		return has(p.Name) || p.HasFallback()
	}
	return len(p.Missing(has)) == 0
}

// HasFallback tells whether p, a build's package, has a pure fallback:
// its sdist's Python files (its compiled part is only a speedup),
// mounted in the default set where the build lacks it.
func (p Package) HasFallback() bool { return p.From == FromBuild && p.In(SetDefault) }

// Mounted tells whether p's fetched files are mounted in a default run on
// a build that has what has reports: a default package that is usable
// there, and a build's package's fallback only where the build lacks it.
func (p Package) Mounted(has func(name string) bool) bool {
	if !p.In(SetDefault) || !p.Usable(has) {
		return false
	}
	return p.From != FromBuild || !has(p.Name)
}

// Missing is what of p's needs a build that has what has reports lacks,
// with no fallback mounted in its place.
func (p Package) Missing(has func(name string) bool) []string {
	var out []string
	for _, n := range p.Needs {
		if q, ok := Lookup(n); !has(n) && !(ok && q.HasFallback()) {
			out = append(out, n)
		}
	}
	return out
}

// Markdown is the list as docs/packages.md's table: every package with
// its version, kind and what Airlock does with it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| Package | Version | Kind | In a default run | Import as |\n|---|---|---|---|---|\n")
	for _, p := range all() {
		version := p.Version
		if version == "" {
			version = "–"
		}
		var status string
		switch {
		case p.From == FromPlanned:
			status = "not yet: compiled, not built for WebAssembly"
		case p.HasFallback():
			status = "built into python.wasm (elsewhere its pure-Python fallback is mounted)"
		case p.From == FromBuild:
			status = "built into python.wasm"
		case p.In(SetDefault) && slices.ContainsFunc(p.Needs, func(n string) bool { return !buildHas(n) }):
			status = "pending: needs " + strings.Join(p.Needs, ", ")
		case p.In(SetDefault):
			status = "mounted"
		case p.In(SetNet):
			status = "network runs only"
		default:
			status = "`airlock test` only"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | `%s` |\n", p.Name, version, p.Kind, status, strings.Join(p.Imports, "`, `"))
	}
	return b.String()
}

// buildHas tells whether the list says the build carries a compiled
// package.
func buildHas(name string) bool {
	p, ok := Lookup(name)
	return ok && p.From == FromBuild
}
