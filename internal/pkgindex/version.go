package pkgindex

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is a PEP 440 version, parsed. Only what resolving needs is
// kept: comparison follows PEP 440 (epoch, release with trailing zeros
// ignored, pre, post, dev; a local label orders after its public version).
type Version struct {
	Epoch   int
	Release []int
	// Pre is the phase ("a", "b", "rc") and number; "" for none.
	PrePhase string
	Pre      int
	Post     int // -1 for none
	Dev      int // -1 for none
	Local    string
	raw      string
}

// The canonical PEP 440 pattern (its appendix), case-insensitive.
var versionRE = regexp.MustCompile(`(?i)^\s*v?(?:(\d+)!)?(\d+(?:\.\d+)*)` +
	`(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d+)?)?` +
	`(?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d+)?)?` +
	`(?:[-_.]?(dev)[-_.]?(\d+)?)?` +
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$`)

// ParseVersion reads a PEP 440 version.
func ParseVersion(s string) (Version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil || len(s) > 128 {
		return Version{}, fmt.Errorf("%w: %q is not a PEP 440 version", ErrBadVersion, clip(s))
	}
	v := Version{Post: -1, Dev: -1, raw: strings.TrimSpace(s)}
	num := func(t string) int {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return 1 << 30 // out of int range: ordered last, never equal to a sane version
		}
		return n
	}
	if m[1] != "" {
		v.Epoch = num(m[1])
	}
	for _, p := range strings.Split(m[2], ".") {
		v.Release = append(v.Release, num(p))
	}
	if m[3] != "" {
		switch strings.ToLower(m[3]) {
		case "a", "alpha":
			v.PrePhase = "a"
		case "b", "beta":
			v.PrePhase = "b"
		default:
			v.PrePhase = "rc"
		}
		if m[4] != "" {
			v.Pre = num(m[4])
		}
	}
	switch {
	case m[5] != "":
		v.Post = num(m[5])
	case m[6] != "":
		v.Post = 0
		if m[7] != "" {
			v.Post = num(m[7])
		}
	}
	if m[8] != "" {
		v.Dev = 0
		if m[9] != "" {
			v.Dev = num(m[9])
		}
	}
	v.Local = strings.ToLower(m[10])
	return v, nil
}

// String is the version as written.
func (v Version) String() string { return v.raw }

// IsPre tells a pre-release or development release.
func (v Version) IsPre() bool { return v.PrePhase != "" || v.Dev >= 0 }

// Public is v without its local label.
func (v Version) Public() Version { v.Local = ""; return v }

func phaseRank(p string) int {
	switch p {
	case "a":
		return 1
	case "b":
		return 2
	case "rc":
		return 3
	}
	return 4
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpRelease(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmpInt(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// Compare orders versions as PEP 440 does: -1, 0 or 1.
func (v Version) Compare(w Version) int {
	if c := cmpInt(v.Epoch, w.Epoch); c != 0 {
		return c
	}
	if c := cmpRelease(v.Release, w.Release); c != 0 {
		return c
	}
	// 1.0.dev1 < 1.0a1 < 1.0 < 1.0.post1: a bare dev release sorts
	// before any pre-release of its release.
	preKey := func(x Version) (int, int) {
		switch {
		case x.PrePhase != "":
			return phaseRank(x.PrePhase), x.Pre
		case x.Dev >= 0 && x.Post < 0:
			return 0, 0
		}
		return 4, 0
	}
	ap, an := preKey(v)
	bp, bn := preKey(w)
	if c := cmpInt(ap, bp); c != 0 {
		return c
	}
	if c := cmpInt(an, bn); c != 0 {
		return c
	}
	if c := cmpInt(v.Post, w.Post); c != 0 {
		return c
	}
	devKey := func(x Version) int {
		if x.Dev < 0 {
			return 1 << 31
		}
		return x.Dev
	}
	if c := cmpInt(devKey(v), devKey(w)); c != 0 {
		return c
	}
	// A local label sorts after the public version; labels compare
	// segment by segment, numbers above strings.
	switch {
	case v.Local == w.Local:
		return 0
	case v.Local == "":
		return -1
	case w.Local == "":
		return 1
	}
	return strings.Compare(v.Local, w.Local)
}

// Specifier is one clause of a version specifier: ">=1.2", "==1.*".
type Specifier struct {
	Op       string
	Version  Version
	Wildcard bool // "==1.2.*" or "!=1.2.*"
	text     string
}

// Specifiers are clauses that must all hold; none allows any version.
type Specifiers []Specifier

func (s Specifiers) String() string {
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = c.text
	}
	return strings.Join(parts, ",")
}

var specRE = regexp.MustCompile(`^\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s,;]+)\s*$`)

// ParseSpecifiers reads "", ">=1.2,<2", "==1.4.*", "~=2.2".
func ParseSpecifiers(s string) (Specifiers, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out Specifiers
	for _, part := range strings.Split(s, ",") {
		m := specRE.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("%w: %q is not a version specifier", ErrBadRequirement, clip(strings.TrimSpace(part)))
		}
		c := Specifier{Op: m[1], text: m[1] + m[2]}
		text := m[2]
		if c.Op == "===" {
			c.Version = Version{raw: text}
			out = append(out, c)
			continue
		}
		if strings.HasSuffix(text, ".*") {
			if c.Op != "==" && c.Op != "!=" {
				return nil, fmt.Errorf("%w: %q: a .* wildcard goes only with == and !=", ErrBadRequirement, c.text)
			}
			c.Wildcard = true
			text = strings.TrimSuffix(text, ".*")
		}
		v, err := ParseVersion(text)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrBadRequirement, c.text, err)
		}
		if c.Op == "~=" && len(v.Release) < 2 {
			return nil, fmt.Errorf("%w: %q: ~= needs at least two release numbers", ErrBadRequirement, c.text)
		}
		c.Version = v
		out = append(out, c)
	}
	return out, nil
}

// NamesPre tells whether a clause names a pre-release, which lets
// pre-releases match (PEP 440).
func (s Specifiers) NamesPre() bool {
	for _, c := range s {
		if c.Version.IsPre() {
			return true
		}
	}
	return false
}

// Allows tells whether v satisfies every clause. Pre-releases match only
// when pre is set (or a clause names one).
func (s Specifiers) Allows(v Version, pre bool) bool {
	if v.IsPre() && !pre && !s.NamesPre() {
		return false
	}
	for _, c := range s {
		if !c.allows(v) {
			return false
		}
	}
	return true
}

// prefixMatch tells whether v's release starts with want's (padded with
// zeros, as 1.0.* matches 1), and v is a final release or pre-release of
// it; for "==1.0.*" PEP 440 matches 1.0, 1.0.1, 1.0a1 and 1.0.post1.
func prefixMatch(v, want Version) bool {
	if v.Epoch != want.Epoch {
		return false
	}
	for i, n := range want.Release {
		x := 0
		if i < len(v.Release) {
			x = v.Release[i]
		}
		if x != n {
			return false
		}
	}
	return true
}

func (c Specifier) allows(v Version) bool {
	pub := v.Public()
	switch c.Op {
	case "===":
		return strings.EqualFold(v.raw, c.Version.raw)
	case "==":
		if c.Wildcard {
			return prefixMatch(v, c.Version)
		}
		if c.Version.Local == "" {
			return pub.Compare(c.Version) == 0
		}
		return v.Compare(c.Version) == 0
	case "!=":
		if c.Wildcard {
			return !prefixMatch(v, c.Version)
		}
		if c.Version.Local == "" {
			return pub.Compare(c.Version) != 0
		}
		return v.Compare(c.Version) != 0
	case "<=":
		return pub.Compare(c.Version) <= 0
	case ">=":
		return pub.Compare(c.Version) >= 0
	case "<":
		// <1.0 does not take 1.0's own pre-releases (PEP 440) unless it
		// names a pre-release itself.
		if pub.Compare(c.Version) >= 0 {
			return false
		}
		if !c.Version.IsPre() && v.IsPre() && cmpRelease(v.Release, c.Version.Release) == 0 && v.Epoch == c.Version.Epoch {
			return false
		}
		return true
	case ">":
		if pub.Compare(c.Version) <= 0 {
			return false
		}
		// >1.0 does not take 1.0's post-releases unless it names one.
		if c.Version.Post < 0 && v.Post >= 0 && cmpRelease(v.Release, c.Version.Release) == 0 && v.Epoch == c.Version.Epoch && v.PrePhase == "" {
			return false
		}
		return true
	case "~=":
		prefix := c.Version
		prefix.Release = c.Version.Release[:len(c.Version.Release)-1]
		return pub.Compare(c.Version) >= 0 && prefixMatch(v, prefix)
	}
	return false
}

func clip(s string) string {
	if len(s) > 100 {
		return strings.ToValidUTF8(s[:100], "") + "..."
	}
	return s
}
