package pkgindex

import (
	"fmt"
	"regexp"
	"strings"
)

// Env is what PEP 508 markers are evaluated against: the guest's
// interpreter, not the host's.
type Env map[string]string

// WASIEnv is python.wasm's marker environment (what packaging.markers
// reports inside it) for CPython fullVersion ("3.13.5").
func WASIEnv(fullVersion string) Env {
	if fullVersion == "" {
		fullVersion = "3.13.0"
	}
	short := fullVersion
	if parts := strings.SplitN(fullVersion, ".", 3); len(parts) >= 2 {
		short = parts[0] + "." + parts[1]
	}
	return Env{
		"python_version":                 short,
		"python_full_version":            fullVersion,
		"os_name":                        "posix",
		"sys_platform":                   "wasi",
		"platform_machine":               "wasm32",
		"platform_system":                "WASI",
		"platform_release":               "",
		"platform_version":               "",
		"platform_python_implementation": "CPython",
		"implementation_name":            "cpython",
		"implementation_version":         fullVersion,
	}
}

// versionVars are the marker variables compared as versions when both
// sides parse as one.
var versionVars = map[string]bool{"python_version": true, "python_full_version": true, "implementation_version": true, "platform_release": true}

// Requirement is a PEP 508 requirement: name, extras, specifiers, marker.
type Requirement struct {
	Name   string // normalized (PEP 503)
	Extras []string
	Spec   Specifiers
	Marker *Marker // nil: always
	Text   string  // as written
}

var (
	nameRE  = regexp.MustCompile(`^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)`)
	normRE  = regexp.MustCompile(`[-_.]+`)
	extraRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`)
)

// Normalize is a project name as PEP 503 compares it.
func Normalize(name string) string { return normRE.ReplaceAllString(strings.ToLower(name), "-") }

// ParseRequirement reads "name", "name[extra]>=1.2", "name (>=1.2) ;
// python_version < '3.8'". Direct references (name @ url) are refused:
// only the index decides what is fetched.
func ParseRequirement(s string) (Requirement, error) {
	r := Requirement{Text: strings.TrimSpace(s)}
	if len(s) > 1000 {
		return r, fmt.Errorf("%w: longer than 1000 bytes", ErrBadRequirement)
	}
	rest := strings.TrimSpace(s)
	m := nameRE.FindString(rest)
	if m == "" {
		return r, fmt.Errorf("%w: %q does not start with a project name", ErrBadRequirement, clip(r.Text))
	}
	r.Name = Normalize(m)
	rest = strings.TrimSpace(rest[len(m):])
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return r, fmt.Errorf("%w: %q: unclosed [extras]", ErrBadRequirement, clip(r.Text))
		}
		for _, e := range strings.Split(rest[1:end], ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			if !extraRE.MatchString(e) {
				return r, fmt.Errorf("%w: %q: extra %q is not a name", ErrBadRequirement, clip(r.Text), clip(e))
			}
			r.Extras = append(r.Extras, Normalize(e))
		}
		rest = strings.TrimSpace(rest[end+1:])
	}
	spec, marker, hasMarker := strings.Cut(rest, ";")
	spec = strings.TrimSpace(spec)
	if strings.HasPrefix(spec, "@") {
		return r, fmt.Errorf("%w: %q: direct references (name @ URL) are not installed; name a project on the index", ErrBadRequirement, clip(r.Text))
	}
	if strings.HasPrefix(spec, "(") && strings.HasSuffix(spec, ")") {
		spec = spec[1 : len(spec)-1]
	}
	var err error
	if r.Spec, err = ParseSpecifiers(spec); err != nil {
		return r, err
	}
	if hasMarker {
		if r.Marker, err = ParseMarker(marker); err != nil {
			return r, fmt.Errorf("%w: %q: %w", ErrBadRequirement, clip(r.Text), err)
		}
	}
	return r, nil
}

// Marker is a parsed PEP 508 environment marker.
type Marker struct{ root node }

type node struct {
	op          string // "and", "or", or a comparison operator
	left, right *node
	lhs, rhs    operand // for comparisons
}

type operand struct {
	name  string // a variable; "" for a literal
	value string
}

// ParseMarker reads a marker expression.
func ParseMarker(s string) (*Marker, error) {
	toks, err := lexMarker(s)
	if err != nil {
		return nil, err
	}
	p := &markerParser{toks: toks}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i != len(p.toks) {
		return nil, fmt.Errorf("marker: unexpected %q", p.toks[p.i].text)
	}
	return &Marker{root: *n}, nil
}

type token struct {
	kind string // "str", "var", "op", "(", ")", "and", "or"
	text string
}

var markerVars = map[string]bool{
	"python_version": true, "python_full_version": true, "os_name": true, "sys_platform": true,
	"platform_release": true, "platform_system": true, "platform_version": true, "platform_machine": true,
	"platform_python_implementation": true, "implementation_name": true, "implementation_version": true,
	"extra": true, "os.name": true, "sys.platform": true, "platform.version": true, "platform.machine": true,
	"platform.python_implementation": true, "python_implementation": true,
}

func lexMarker(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(' || c == ')':
			toks = append(toks, token{kind: string(c), text: string(c)})
			i++
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("marker: unterminated string")
			}
			toks = append(toks, token{kind: "str", text: s[i+1 : i+1+end]})
			i += end + 2
		case strings.ContainsRune("<>=!~", rune(c)):
			j := i
			for j < len(s) && strings.ContainsRune("<>=!~", rune(s[j])) {
				j++
			}
			op := s[i:j]
			switch op {
			case "<", "<=", ">", ">=", "==", "!=", "~=", "===":
			default:
				return nil, fmt.Errorf("marker: unknown operator %q", op)
			}
			toks = append(toks, token{kind: "op", text: op})
			i = j
		default:
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '.' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("marker: unexpected %q", string(c))
			}
			w := s[i:j]
			switch {
			case w == "and" || w == "or":
				toks = append(toks, token{kind: w, text: w})
			case w == "in":
				toks = append(toks, token{kind: "op", text: "in"})
			case w == "not":
				toks = append(toks, token{kind: "op", text: "not in"})
				// "not" must be followed by "in"
				k := j
				for k < len(s) && s[k] == ' ' {
					k++
				}
				if !strings.HasPrefix(s[k:], "in") {
					return nil, fmt.Errorf("marker: 'not' without 'in'")
				}
				j = k + 2
			case markerVars[w]:
				toks = append(toks, token{kind: "var", text: w})
			default:
				return nil, fmt.Errorf("marker: unknown variable %q", clip(w))
			}
			i = j
		}
		if len(toks) > 1000 {
			return nil, fmt.Errorf("marker: too long")
		}
	}
	return toks, nil
}

type markerParser struct {
	toks  []token
	i     int
	depth int
}

func (p *markerParser) or() (*node, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.i < len(p.toks) && p.toks[p.i].kind == "or" {
		p.i++
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		left = &node{op: "or", left: left, right: right}
	}
	return left, nil
}

func (p *markerParser) and() (*node, error) {
	left, err := p.expr()
	if err != nil {
		return nil, err
	}
	for p.i < len(p.toks) && p.toks[p.i].kind == "and" {
		p.i++
		right, err := p.expr()
		if err != nil {
			return nil, err
		}
		left = &node{op: "and", left: left, right: right}
	}
	return left, nil
}

func (p *markerParser) expr() (*node, error) {
	if p.i >= len(p.toks) {
		return nil, fmt.Errorf("marker: incomplete")
	}
	if p.toks[p.i].kind == "(" {
		if p.depth++; p.depth > 32 {
			return nil, fmt.Errorf("marker: nested too deep")
		}
		p.i++
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.toks) || p.toks[p.i].kind != ")" {
			return nil, fmt.Errorf("marker: unclosed (")
		}
		p.i++
		p.depth--
		return n, nil
	}
	if p.i+3 > len(p.toks) {
		return nil, fmt.Errorf("marker: incomplete comparison")
	}
	l, o, r := p.toks[p.i], p.toks[p.i+1], p.toks[p.i+2]
	if o.kind != "op" || (l.kind != "var" && l.kind != "str") || (r.kind != "var" && r.kind != "str") {
		return nil, fmt.Errorf("marker: expected a comparison near %q", l.text)
	}
	p.i += 3
	side := func(t token) operand {
		if t.kind == "var" {
			return operand{name: t.text}
		}
		return operand{value: t.text}
	}
	return &node{op: o.text, lhs: side(l), rhs: side(r)}, nil
}

// legacy names PEP 508 still reads.
var legacyVars = map[string]string{
	"os.name": "os_name", "sys.platform": "sys_platform", "platform.version": "platform_version",
	"platform.machine": "platform_machine", "platform.python_implementation": "platform_python_implementation",
	"python_implementation": "platform_python_implementation",
}

// Eval tells whether the marker holds in env with the given extras
// requested ("extra == 'x'" holds when x is among them).
func (m *Marker) Eval(env Env, extras []string) bool {
	if m == nil {
		return true
	}
	return m.root.eval(env, extras)
}

func (n *node) eval(env Env, extras []string) bool {
	switch n.op {
	case "and":
		return n.left.eval(env, extras) && n.right.eval(env, extras)
	case "or":
		return n.left.eval(env, extras) || n.right.eval(env, extras)
	}
	if n.lhs.name == "extra" || n.rhs.name == "extra" {
		lit := n.rhs
		if n.rhs.name == "extra" {
			lit = n.lhs
		}
		if lit.name != "" {
			return false
		}
		want := Normalize(lit.value)
		has := false
		for _, e := range extras {
			if e == want {
				has = true
			}
		}
		switch n.op {
		case "==":
			return has
		case "!=":
			return !has
		}
		return false
	}
	val := func(o operand) (string, string) {
		if o.name == "" {
			return o.value, ""
		}
		name := o.name
		if l, ok := legacyVars[name]; ok {
			name = l
		}
		return env[name], name
	}
	lv, lname := val(n.lhs)
	rv, rname := val(n.rhs)
	switch n.op {
	case "in":
		return strings.Contains(rv, lv)
	case "not in":
		return !strings.Contains(rv, lv)
	}
	if versionVars[lname] || versionVars[rname] {
		if n.op == "===" {
			return lv == rv
		}
		if lver, err := ParseVersion(lv); err == nil {
			if spec, err := ParseSpecifiers(n.op + rv); err == nil {
				return spec.Allows(lver, true)
			}
		}
	}
	switch n.op {
	case "==", "===":
		return lv == rv
	case "!=":
		return lv != rv
	case "<":
		return lv < rv
	case "<=":
		return lv <= rv
	case ">":
		return lv > rv
	case ">=":
		return lv >= rv
	}
	return false
}
