package pkglist

import (
	"strings"
	"testing"
)

func TestListParses(t *testing.T) {
	pkgs, err := Parse(listText)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pkgs {
		names[p.Name] = true
	}
	for _, want := range []string{"numpy", "pandas", "sympy", "networkx", "openpyxl", "jinja2", "requests", "pytest", "seaborn", "scipy"} {
		if !names[want] {
			t.Errorf("%s is not listed", want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, line := range []string{
		"x 1.0 pure wheel default - x",                                  // 7 columns
		"x 1.0 pure wheel nowhere - x " + strings.Repeat("a", 64),       // a set that is not one
		"x 1.0 compiled wheel default - x " + strings.Repeat("a", 64),   // a fetched compiled one
		"x 1.0 pure build net - x " + strings.Repeat("a", 64),           // the build's in a set but default
		"x 1.0 pure wheel - - x " + strings.Repeat("a", 64),             // a fetched one in no set
		"x 1.0 pure wheel default - x abc",                              // no sha256
		"x 1.0 pure wheel default nothere x " + strings.Repeat("a", 64), // needs what is not listed
		"x - compiled planned - - x-y -",                                // not a module name
	} {
		if _, err := Parse(line); err == nil {
			t.Errorf("%q parsed", line)
		}
	}
	two := "x 1.0 pure wheel default - x " + strings.Repeat("a", 64)
	if _, err := Parse(two + "\n" + strings.Replace(two, "x ", "X ", 1)); err == nil {
		t.Error("a name listed twice parsed")
	}
}

func TestUsable(t *testing.T) {
	p, _ := Lookup("seaborn")
	none := func(string) bool { return false }
	all := func(string) bool { return true }
	if p.Usable(none) || !p.Usable(all) {
		t.Error("seaborn's need of matplotlib is not what decides")
	}
	if got := p.Missing(none); len(got) != 1 || got[0] != "matplotlib" {
		t.Errorf("Missing = %v", got)
	}
	// markupsafe is built in, or its pure fallback mounted: jinja2, which
	// needs it, is usable either way, and only the fallback is mounted.
	ms, _ := Lookup("markupsafe")
	if !ms.HasFallback() || !ms.Usable(none) || !ms.Mounted(none) || ms.Mounted(all) {
		t.Error("markupsafe's fallback is not mounted exactly where the build lacks it")
	}
	if j, _ := Lookup("jinja2"); !j.Usable(none) || !j.Mounted(none) || len(j.Missing(none)) != 0 {
		t.Error("jinja2 is not usable on a build without compiled markupsafe")
	}
	if s, _ := Lookup("scipy"); s.Usable(all) {
		t.Error("a planned package is usable")
	}
	if s, ok := Lookup("Charset-Normalizer"); !ok || s.Name != "charset_normalizer" {
		t.Error("Lookup does not compare names as PEP 503 does")
	}
}
