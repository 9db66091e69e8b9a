// Package egress is a run's network, made by the host: a per-run
// allow-list of HTTP(S) endpoints (Policy), a checked transport that
// resolves names on the host and refuses internal addresses unless a rule
// names one literally (Gate), and the device through which the guest's
// HTTP client libraries send requests without ever holding a socket
// (Device). Every decision is recorded (Decision).
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidRule reports a rule that cannot be parsed or used.
var ErrInvalidRule = errors.New("egress: invalid rule")

// ErrWiderRule reports a client's rule that no operator rule contains.
var ErrWiderRule = errors.New("egress: rule is not within the allowed rules")

// Rule allows requests to one endpoint. Nothing is allowed unless a rule
// says so.
type Rule struct {
	// Scheme is "https" or "http".
	Scheme string
	// Host is a lower-case name matched exactly, "*.suffix" (any name
	// under suffix, not suffix itself), or a literal IP address: only a
	// literal address lets a run reach a loopback, private, link-local or
	// metadata address.
	Host string
	// Port is the port; 0 is the scheme's default.
	Port int
	// Methods are the allowed methods, upper-case; none allows any.
	Methods []string
	// PathPrefix, if set, is a prefix the request's path must have.
	PathPrefix string
	// Headers are added by the host to each request the rule allows
	// (replacing the guest's of the same name): credentials the guest
	// never sees. They are left out of String and of records.
	Headers map[string]string
}

// Defaults for Policy fields left at zero.
const (
	DefaultMaxRequests      = 100
	DefaultMaxRequestBytes  = 10 << 20
	DefaultMaxResponseBytes = 64 << 20
	DefaultTimeout          = 30 * time.Second
	// MaxRules bounds a policy, so a request cannot make matching costly.
	MaxRules = 256
)

// Policy is a run's network: its rules and caps. The zero Policy allows
// nothing.
type Policy struct {
	Rules []Rule
	// MaxRequests caps the run's HTTP requests, refused ones included.
	MaxRequests int
	// MaxRequestBytes caps one request's bytes as the guest sends them
	// (head and body).
	MaxRequestBytes int64
	// MaxResponseBytes caps the response bytes of the whole run.
	MaxResponseBytes int64
	// Timeout caps one request, from its head to its body's end; the run's
	// deadline ends it sooner.
	Timeout time.Duration
}

// WithDefaults fills zero caps with the defaults.
func (p Policy) WithDefaults() Policy {
	if p.MaxRequests == 0 {
		p.MaxRequests = DefaultMaxRequests
	}
	if p.MaxRequestBytes == 0 {
		p.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if p.MaxResponseBytes == 0 {
		p.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	return p
}

// Validate checks the rules and caps and returns the policy with each
// rule in canonical form (lower-case host, explicit port, upper-case
// methods).
func (p Policy) Validate() (Policy, error) {
	if p.MaxRequests < 0 || p.MaxRequestBytes < 0 || p.MaxResponseBytes < 0 || p.Timeout < 0 {
		return p, fmt.Errorf("%w: network caps must not be negative", ErrInvalidRule)
	}
	if len(p.Rules) > MaxRules {
		return p, fmt.Errorf("%w: %d rules; at most %d", ErrInvalidRule, len(p.Rules), MaxRules)
	}
	rules := make([]Rule, len(p.Rules))
	for i, r := range p.Rules {
		c, err := r.canonical()
		if err != nil {
			return p, err
		}
		rules[i] = c
	}
	p.Rules = rules
	return p, nil
}

func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}

func (r Rule) canonical() (Rule, error) {
	r.Scheme = strings.ToLower(r.Scheme)
	if r.Scheme != "https" && r.Scheme != "http" {
		return r, fmt.Errorf("%w: scheme %q: only http and https", ErrInvalidRule, r.Scheme)
	}
	h, err := canonicalHost(r.Host, true)
	if err != nil {
		return r, err
	}
	r.Host = h
	if r.Port == 0 {
		r.Port = defaultPort(r.Scheme)
	}
	if r.Port < 1 || r.Port > 65535 {
		return r, fmt.Errorf("%w: port %d", ErrInvalidRule, r.Port)
	}
	ms := make([]string, 0, len(r.Methods))
	for _, m := range r.Methods {
		m = strings.ToUpper(m)
		if !validToken(m) {
			return r, fmt.Errorf("%w: method %q", ErrInvalidRule, m)
		}
		if !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	slices.Sort(ms)
	if len(ms) == 0 {
		ms = nil
	}
	r.Methods = ms
	if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
		return r, fmt.Errorf("%w: path prefix %q must start with /", ErrInvalidRule, r.PathPrefix)
	}
	if r.PathPrefix == "/" {
		r.PathPrefix = ""
	}
	if r.PathPrefix != "" {
		// A prefix is matched segment by segment (rawPathUnder): one with
		// dot or empty segments, or a backslash, would match nothing, or
		// not what it says.
		body := strings.TrimSuffix(r.PathPrefix[1:], "/")
		for _, seg := range strings.Split(body, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsRune(seg, '\\') {
				return r, fmt.Errorf("%w: path prefix %q: no empty, \".\" or \"..\" segments, no backslashes", ErrInvalidRule, r.PathPrefix)
			}
		}
	}
	hs := make(map[string]string, len(r.Headers))
	for k, v := range r.Headers {
		if !validToken(k) || strings.ContainsAny(v, "\r\n\x00") {
			return r, fmt.Errorf("%w: header %q", ErrInvalidRule, k)
		}
		hs[canonicalHeader(k)] = v
	}
	if len(hs) == 0 {
		hs = nil
	}
	r.Headers = hs
	return r, nil
}

// canonicalHost lower-cases a host, drops a trailing dot and brackets,
// and checks it is a name (a wildcard if wild), or an IP address.
func canonicalHost(h string, wild bool) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("%w: host %q: no zones", ErrInvalidRule, h)
		}
		return a.Unmap().String(), nil
	}
	name := h
	if wild && strings.HasPrefix(h, "*.") {
		name = h[2:]
	}
	if name == "" || len(name) > 253 {
		return "", fmt.Errorf("%w: host %q", ErrInvalidRule, h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%w: host %q", ErrInvalidRule, h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%w: host %q (a name, *.suffix or an IP address)", ErrInvalidRule, h)
			}
		}
	}
	return h, nil
}

func validToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

func canonicalHeader(k string) string { return textproto.CanonicalMIMEHeaderKey(k) }

// ParseRule parses a rule as the CLI takes it:
//
//	[METHOD[,METHOD...] ]TARGET[ header:NAME=VALUE...]
//
// TARGET is host, host:port or scheme://host[:port][/path-prefix]; a
// target without a scheme is https. getenv, if not nil, expands a VALUE
// of the form $VAR (so a credential need not be on a command line); a
// $VAR it does not know is an error.
func ParseRule(s string, getenv func(string) (string, bool)) (Rule, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Rule{}, fmt.Errorf("%w: empty rule", ErrInvalidRule)
	}
	var r Rule
	if len(fields) > 1 && !strings.ContainsAny(fields[0], "./:[") && strings.ToUpper(fields[0]) == fields[0] {
		r.Methods = strings.Split(fields[0], ",")
		fields = fields[1:]
	}
	target := fields[0]
	for _, f := range fields[1:] {
		kv, ok := strings.CutPrefix(f, "header:")
		name, value, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || name == "" {
			return r, fmt.Errorf("%w: %q: after the target only header:NAME=VALUE", ErrInvalidRule, f)
		}
		if v, ok := strings.CutPrefix(value, "$"); ok && getenv != nil {
			got, ok := getenv(v)
			if !ok {
				return r, fmt.Errorf("%w: header %s: environment variable %s is not set", ErrInvalidRule, name, v)
			}
			value = got
		}
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers[name] = value
	}
	if !strings.Contains(target, "://") {
		target = "https://" + target
	}
	u, err := url.Parse(target)
	if err != nil {
		return r, fmt.Errorf("%w: %q: %w", ErrInvalidRule, s, err)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return r, fmt.Errorf("%w: %q: no user, query or fragment", ErrInvalidRule, target)
	}
	r.Scheme = u.Scheme
	r.Host = u.Hostname()
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n == 0 {
			return r, fmt.Errorf("%w: port %q", ErrInvalidRule, p)
		}
		r.Port = n
	}
	r.PathPrefix = u.Path
	return r.canonical()
}

// String is the rule as ParseRule reads it, without its headers.
func (r Rule) String() string {
	var b strings.Builder
	if len(r.Methods) > 0 {
		b.WriteString(strings.Join(r.Methods, ",") + " ")
	}
	host := r.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	b.WriteString(r.Scheme + "://" + host)
	if r.Port != 0 && r.Port != defaultPort(r.Scheme) {
		b.WriteString(":" + strconv.Itoa(r.Port))
	}
	b.WriteString(r.PathPrefix)
	if len(r.Headers) > 0 {
		b.WriteString(" (+host headers)")
	}
	return b.String()
}

// literal tells whether the rule's host is an IP address.
func (r Rule) literal() (netip.Addr, bool) {
	a, err := netip.ParseAddr(r.Host)
	return a, err == nil
}

// matchHost tells whether host (canonical) is the rule's host or under
// its wildcard.
func matchHost(pattern, host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return pattern == host // a wildcard never matches an address
	}
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return pattern == host
}

func (r Rule) matchEndpoint(scheme, host string, port int) bool {
	return r.Scheme == scheme && r.Port == port && matchHost(r.Host, host)
}

// matchRequest tells whether the rule takes method on rawPath, the path
// as it is sent upstream (escaped); see rawPathUnder.
func (r Rule) matchRequest(method, rawPath string) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return false
	}
	return r.PathPrefix == "" || rawPathUnder(rawPath, r.PathPrefix)
}

// rawPathUnder tells whether rawPath, as sent upstream, lies under
// prefix (a clean path: no dot or empty segments) however the upstream
// reads it. Servers differ in what they decode before routing: %2F and
// %5C as separators or not, %2E%2E as a dot segment, a backslash as a
// separator, "..;" as "..", twice-encoded escapes decoded twice. So the
// prefix's segments must each be one segment of rawPath, equal after
// decoding once (an encoded "/" in them cannot equal), and no segment
// may read as a dot segment or hold a backslash in any of those
// readings (ambiguousSegment). Encoded separators after the prefix stay
// allowed: read either way they stay below it.
func rawPathUnder(rawPath, prefix string) bool {
	rest, ok := strings.CutPrefix(rawPath, "/")
	if !ok {
		return false
	}
	segs := strings.Split(rest, "/")
	for _, s := range segs {
		if ambiguousSegment(s) {
			return false
		}
	}
	ps := strings.Split(strings.TrimPrefix(prefix, "/"), "/")
	if ps[len(ps)-1] == "" { // "/v1/" takes what is below /v1, not /v1
		ps = ps[:len(ps)-1]
		if len(segs) <= len(ps) {
			return false
		}
	}
	if len(segs) < len(ps) {
		return false
	}
	for i, p := range ps {
		d, err := url.PathUnescape(segs[i])
		if err != nil || d != p {
			return false
		}
	}
	return true
}

// ambiguousSegment tells whether a raw path segment could read as "." or
// "..", or hold a separator other than "/", in some server's reading:
// decoded up to as often as it decodes, its ";parameters" dropped.
func ambiguousSegment(s string) bool {
	for range 4 {
		name, _, _ := strings.Cut(s, ";")
		if name == "." || name == ".." || strings.ContainsRune(s, '\\') {
			return true
		}
		d, err := url.PathUnescape(s)
		if err != nil || d == s {
			return false
		}
		// Decoding made a "/": each part is a segment to some server.
		for _, part := range strings.Split(d, "/") {
			if name, _, _ := strings.Cut(part, ";"); name == "." || name == ".." {
				return true
			}
		}
		s = d
	}
	return true // escapes nested deeper than any server decodes: refused, not guessed
}

// ambiguousPath tells whether any segment of rawPath is ambiguous, for
// the message that explains a refusal.
func ambiguousPath(rawPath string) bool {
	for _, s := range strings.Split(strings.TrimPrefix(rawPath, "/"), "/") {
		if ambiguousSegment(s) {
			return true
		}
	}
	return false
}

// pathUnder tells whether path is at or under prefix. A prefix ending in
// "/" takes anything after it; one that does not takes itself and what is
// below it ("/v1" takes "/v1" and "/v1/x", not "/v10").
func pathUnder(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	rest := path[len(prefix):]
	return strings.HasSuffix(prefix, "/") || rest == "" || rest[0] == '/' || rest[0] == '?'
}

// within tells whether every request r allows, c allows too.
func (r Rule) within(c Rule) bool {
	if r.Scheme != c.Scheme || r.Port != c.Port {
		return false
	}
	if !hostWithin(r.Host, c.Host) {
		return false
	}
	if len(c.Methods) > 0 {
		if len(r.Methods) == 0 {
			return false
		}
		for _, m := range r.Methods {
			if !slices.Contains(c.Methods, m) {
				return false
			}
		}
	}
	return c.PathPrefix == "" || r.PathPrefix != "" && pathUnder(r.PathPrefix, c.PathPrefix)
}

// hostWithin tells whether every host pattern r matches, c matches.
func hostWithin(r, c string) bool {
	if r == c {
		return true
	}
	suffix, ok := strings.CutPrefix(c, "*")
	if !ok {
		return false
	}
	if _, err := netip.ParseAddr(r); err == nil {
		return false
	}
	if rs, wild := strings.CutPrefix(r, "*"); wild {
		return strings.HasSuffix(rs, suffix)
	}
	return strings.HasSuffix(r, suffix) && len(r) > len(suffix)
}

// Narrow returns p limited by ceiling, as a server does with a client's
// rules: each of p's rules must lie within one of ceiling's, whose
// headers it takes (a client cannot set headers); caps take the smaller
// value. A p with no rules allows nothing.
//
// # Errors
// ErrWiderRule for a rule no ceiling rule contains; ErrInvalidRule for
// a bad rule or one with headers.
func (p Policy) Narrow(ceiling Policy) (Policy, error) {
	p, err := p.Validate()
	if err != nil {
		return p, err
	}
	ceiling, err = ceiling.Validate()
	if err != nil {
		return p, err
	}
	out := Policy{}
	for _, r := range p.Rules {
		if len(r.Headers) > 0 {
			return p, fmt.Errorf("%w: %s: a request cannot add headers; the operator's rules carry them", ErrInvalidRule, r)
		}
		found := false
		for _, c := range ceiling.Rules {
			if r.within(c) {
				r.Headers = c.Headers
				found = true
				break
			}
		}
		if !found {
			return p, fmt.Errorf("%w: %s is not within this server's --allow-net rules (%s)", ErrWiderRule, r, ceiling.describe())
		}
		out.Rules = append(out.Rules, r)
	}
	c := ceiling.WithDefaults()
	q := p.WithDefaults()
	out.MaxRequests = min(q.MaxRequests, c.MaxRequests)
	out.MaxRequestBytes = min(q.MaxRequestBytes, c.MaxRequestBytes)
	out.MaxResponseBytes = min(q.MaxResponseBytes, c.MaxResponseBytes)
	out.Timeout = min(q.Timeout, c.Timeout)
	return out, nil
}

// describe lists the rules for a message.
func (p Policy) describe() string {
	if len(p.Rules) == 0 {
		return "none"
	}
	s := make([]string, 0, len(p.Rules))
	for i, r := range p.Rules {
		if i == 8 {
			s = append(s, fmt.Sprintf("and %d more", len(p.Rules)-i))
			break
		}
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}

// hostPort renders host and port for messages and URLs.
func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
