package main

import (
	"regexp"
	"testing"
)

// version --packages prints the built-in list with what this host does
// with each package.
func TestVersionPackages(t *testing.T) {
	code, stdout, stderr := cli(t, "", "version", "--packages")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, re := range []string{
		`(?m)^NAME +VERSION +KIND +STATUS +SHA256$`,
		`(?m)^numpy +2\.5\.5 +compiled +built in +[0-9a-f]{64}$`,
		`(?m)^sympy +1\.14\.0 +pure +(mounted|off) +[0-9a-f]{64}$`,
		`(?m)^matplotlib +3\.10\.9 +compiled +built in +[0-9a-f]{64}$`,
		`(?m)^orjson +3\.11\.5 +compiled +built in +[0-9a-f]{64}$`,
		`(?m)^seaborn +0\.13\.2 +pure +(mounted|off) +[0-9a-f]{64}$`,
		`(?m)^scipy +- +compiled +planned +-$`,
		`(?m)^httpx +\S+ +pure +network runs +[0-9a-f]{64}$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("stdout lacks %s:\n%s", re, stdout)
		}
	}
}
