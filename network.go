package airlock

import (
	"context"
	"path/filepath"
	"sort"
	"strings"

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
type (
	// NetworkPolicy is a run's allow-list and caps; the zero value allows
	// nothing.
	NetworkPolicy = egress.Policy
	// NetworkRule allows one endpoint (scheme, host or *.suffix, port,
	// methods, path prefix), optionally adding headers the guest never
	// sees (credentials).
	NetworkRule = egress.Rule
	// NetworkDecision records one request or refused connection.
	NetworkDecision = egress.Decision
	// NetworkEnv is the host side: the resolver and the TLS roots.
	NetworkEnv = egress.Env
)

// ParseNetworkRule reads a rule as --allow-net takes it:
// "api.example.com", "api.example.com:8443", "https://api.example.com/v1/",
// "GET,POST https://api.example.com/v1/", with "header:NAME=VALUE" after
// the target (VALUE "$VAR" read through getenv). A target without a
// scheme is https.
func ParseNetworkRule(s string, getenv func(string) (string, bool)) (NetworkRule, error) {
	return egress.ParseRule(s, getenv)
}

// WithNetwork is the policy of runs whose Request.Network is nil (which
// otherwise have no network). The network packages (requests, httpx and
// their dependencies, fetched by scripts/fetch-net-wheels.sh) are then
// mounted for every run and session.
func WithNetwork(p NetworkPolicy) Option {
	return func(c *config) { c.net.policy = &p }
}

// WithNetworkEnv sets how the host resolves names and which certificate
// authorities it trusts (default: the system's).
func WithNetworkEnv(env NetworkEnv) Option {
	return func(c *config) { c.net.env = env }
}

type netConfig struct {
	policy *egress.Policy
	env    egress.Env
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
	cfg.net.gate = egress.NewGate(cfg.net.env)
	return nil
}

// runPolicy is the policy a request runs under, nil for none.
func (sb *Sandbox) runPolicy(req *Request) *egress.Policy {
	if req.Network != nil {
		return req.Network
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
