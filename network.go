package airlock

import (
	"context"
	"crypto/x509"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/airlock-sandbox/airlock/internal/egress"
	"github.com/airlock-sandbox/airlock/wasi"
)

// Network access, per run and default-deny: a run reaches only what its
// NetworkPolicy's rules allow, through the host (package internal/egress),
// which makes every request with Go's net/http: names resolve on the host,
// loopback, private, link-local, CGNAT, multicast and metadata addresses
// are refused unless a rule names the address literally (checked on the
// address dialled), TLS is verified in Go, and each request is recorded
// in Result.Network. Python's urllib, http.client, requests and httpx work
// unchanged; raw sockets stay refused.
//
// The types are declared here, not aliased from internal/egress, so that
// their fields and JSON keys are the public contract in one place; the
// network code gets a copy (egressPolicy).
//
// NetworkPolicy is a run's allow-list and caps; the zero value allows
// nothing.
type NetworkPolicy struct {
	Rules []NetworkRule `json:"rules"`
	// MaxRequests caps the run's HTTP requests, refused ones included
	// (0: 100).
	MaxRequests int `json:"max_requests,omitempty"`
	// MaxRequestBytes caps one request's bytes as the guest sends them,
	// head and body (0: 10 MiB).
	MaxRequestBytes int64 `json:"max_request_bytes,omitempty"`
	// MaxResponseBytes caps the response bytes of the whole run (0: 64 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// Timeout caps one request, from its head to its body's end; the run's
	// deadline ends it sooner (0: 30 s).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// NetworkRule allows one endpoint (scheme, host or *.suffix, port,
// methods, path prefix), optionally adding headers the guest never sees
// (credentials).
type NetworkRule struct {
	// Scheme is "https" or "http".
	Scheme string `json:"scheme"`
	// Host is a lower-case name matched exactly, "*.suffix" (any name
	// under suffix, not suffix itself), or a literal IP address: only a
	// literal address lets a run reach a loopback, private, link-local or
	// metadata address.
	Host string `json:"host"`
	// Port is the port; 0 is the scheme's default.
	Port int `json:"port,omitempty"`
	// Methods are the allowed methods, upper-case; none allows any.
	Methods []string `json:"methods,omitempty"`
	// PathPrefix, if set, is a prefix the request's path must have.
	PathPrefix string `json:"path_prefix,omitempty"`
	// Headers are added by the host to each request the rule allows
	// (replacing the guest's of the same name): credentials the guest
	// never sees. They are left out of String and of records.
	Headers map[string]string `json:"-"`
}

// String is the rule as ParseNetworkRule reads it, without its headers.
func (r NetworkRule) String() string { return egress.Rule(r).String() }

// Narrow is p with each rule checked to lie within one of ceiling's and
// each cap the lower of the two: what a server that allows ceiling lets a
// client's policy p do.
//
// # Errors
// ErrInvalidNetworkRule for a rule of p that is invalid or outside
// every rule of ceiling.
func (p NetworkPolicy) Narrow(ceiling NetworkPolicy) (NetworkPolicy, error) {
	n, err := p.egressPolicy().Narrow(ceiling.egressPolicy())
	if err != nil {
		return NetworkPolicy{}, err
	}
	return policyFrom(n), nil
}

// egressPolicy is p for the network code.
func (p NetworkPolicy) egressPolicy() egress.Policy {
	rules := make([]egress.Rule, len(p.Rules))
	for i, r := range p.Rules {
		rules[i] = egress.Rule(r)
	}
	return egress.Policy{Rules: rules, MaxRequests: p.MaxRequests, MaxRequestBytes: p.MaxRequestBytes,
		MaxResponseBytes: p.MaxResponseBytes, Timeout: p.Timeout}
}

func policyFrom(p egress.Policy) NetworkPolicy {
	rules := make([]NetworkRule, len(p.Rules))
	for i, r := range p.Rules {
		rules[i] = NetworkRule(r)
	}
	return NetworkPolicy{Rules: rules, MaxRequests: p.MaxRequests, MaxRequestBytes: p.MaxRequestBytes,
		MaxResponseBytes: p.MaxResponseBytes, Timeout: p.Timeout}
}

// NetworkDecision records one request or refused connection.
type NetworkDecision struct {
	Allowed bool `json:"allowed"`
	// Method and URL are the request's (URL without its query, which
	// may carry secrets); a refused connection has no method.
	Method string `json:"method,omitempty"`
	URL    string `json:"url"`
	// Rule is the rule that allowed it, as ParseNetworkRule reads it.
	Rule string `json:"rule,omitempty"`
	// Reason is a refusal's message, or the error that ended an allowed
	// request.
	Reason string `json:"reason,omitempty"`
	// Address is the address dialled, ip:port.
	Address string `json:"address,omitempty"`
	Status  int    `json:"status,omitempty"`
	// RequestBytes and ResponseBytes are body bytes.
	RequestBytes  int64         `json:"request_bytes"`
	ResponseBytes int64         `json:"response_bytes"`
	Duration      time.Duration `json:"duration_ns"`
}

// NetworkEnv is the host side: the resolver and the TLS roots.
type NetworkEnv struct {
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver NetworkResolver
	// RootCAs are the authorities TLS trusts; nil is the system's.
	RootCAs *x509.CertPool
	// DialTimeout bounds one connection attempt; 0 is 10 s.
	DialTimeout time.Duration
}

// NetworkResolver resolves host names, as *net.Resolver does.
type NetworkResolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ParseNetworkRule reads a rule as --allow-net takes it:
// "api.example.com", "api.example.com:8443", "https://api.example.com/v1/",
// "GET,POST https://api.example.com/v1/", with "header:NAME=VALUE" after
// the target (VALUE "$VAR" read through getenv). A target without a
// scheme is https.
func ParseNetworkRule(s string, getenv func(string) (string, bool)) (NetworkRule, error) {
	r, err := egress.ParseRule(s, getenv)
	return NetworkRule(r), err
}

// WithNetwork is the policy of runs whose Request.Network is nil (which
// otherwise have no network). The network packages (requests, httpx and
// their dependencies, fetched by scripts/fetch-net-wheels.sh) are then
// mounted for every run and session.
func WithNetwork(p NetworkPolicy) Option {
	return func(c *config) { ep := p.egressPolicy(); c.net.policy = &ep }
}

// WithNetworkEnv sets how the host resolves names and which certificate
// authorities it trusts (default: the system's).
func WithNetworkEnv(env NetworkEnv) Option {
	return func(c *config) { c.net.env = env }
}

type netConfig struct {
	policy *egress.Policy
	env    NetworkEnv
	gate   *egress.Gate
}

// NetworkWheelsDir is where scripts/fetch-net-wheels.sh puts the pinned
// network packages, under the cache directory.
func NetworkWheelsDir(cacheDir string) string { return filepath.Join(cacheDir, "netwheels") }

// netWheels lists the fetched network packages (none when not fetched:
// urllib and http.client still work).
func netWheels(cacheDir string) []string {
	paths, _ := filepath.Glob(filepath.Join(NetworkWheelsDir(cacheDir), "*.whl"))
	sort.Strings(paths)
	return paths
}

// distName is the distribution a package path names: a wheel's name up
// to its version, normalized as PEP 503 does; a directory's base name.
func distName(path string) string {
	base := filepath.Base(path)
	if name, _, ok := strings.Cut(base, "-"); ok && strings.HasSuffix(base, ".whl") {
		base = name
	}
	return strings.NewReplacer("_", "-", ".", "-").Replace(strings.ToLower(base))
}

// unshadowed are the network wheels the caller's own packages do not
// replace: a package of the same name given by the caller wins.
func unshadowed(wheels, own []string) []string {
	names := map[string]bool{}
	for _, p := range own {
		names[distName(p)] = true
	}
	var out []string
	for _, w := range wheels {
		if !names[distName(w)] {
			out = append(out, w)
		}
	}
	return out
}

// setupNetwork runs in New: it checks the default policy, makes the gate
// and adds the network packages to the Sandbox's when there is one.
func setupNetwork(cfg *config) error {
	if cfg.net.policy != nil {
		p, err := cfg.net.policy.Validate()
		if err != nil {
			return err
		}
		cfg.net.policy = &p
		cfg.packages = append(unshadowed(netWheels(cfg.cacheDir), cfg.packages), cfg.packages...)
	}
	env := egress.Env{RootCAs: cfg.net.env.RootCAs, DialTimeout: cfg.net.env.DialTimeout}
	if cfg.net.env.Resolver != nil {
		env.Resolver = cfg.net.env.Resolver
	}
	cfg.net.gate = egress.NewGate(env)
	return nil
}

// runPolicy is the policy a request runs under, nil for none.
func (sb *Sandbox) runPolicy(req *Request) *egress.Policy {
	if req.Network != nil {
		p := req.Network.egressPolicy()
		return &p
	}
	return sb.cfg.net.policy
}

// requestNetPackages are the network packages a request needs beyond the
// Sandbox's.
func (sb *Sandbox) requestNetPackages(req *Request) []string {
	if req.Network == nil || sb.cfg.net.policy != nil {
		return nil
	}
	return dropDefaultDuplicates(unshadowed(netWheels(sb.cfg.cacheDir), append(req.Packages, sb.cfg.packages...)), sb.defaults, sb.cfg.cacheDir)
}

// networkDevice sets up a run's network device, or none without a policy.
// The device lives until the returned close, which ends its requests.
func (sb *Sandbox) networkDevice(ctx context.Context, req *Request, devices *map[string]wasi.Device, env *[]string) (*egress.Device, *Error) {
	p := sb.runPolicy(req)
	if p == nil {
		return nil, nil
	}
	dev, err := egress.NewDevice(ctx, sb.cfg.net.gate, *p)
	if err != nil {
		return nil, newError(KindInvalidRequest, err, "network: %v", err)
	}
	if *devices == nil {
		*devices = map[string]wasi.Device{}
	}
	(*devices)[egress.DevicePath] = dev
	*env = append(*env, "AIRLOCK_NET=1") // read by prelude.py
	return dev, nil
}

// ErrInvalidNetworkRule is what a bad rule or cap in a policy wraps.
var ErrInvalidNetworkRule = egress.ErrInvalidRule
