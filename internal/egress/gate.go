package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// ErrRefused is what a refusal wraps: a request or an address the
// run's policy does not allow.
var ErrRefused = errors.New("network: refused")

// RefusedError is a refusal, with the message the guest sees.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string        { return e.Msg }
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refused(format string, args ...any) *RefusedError {
	return &RefusedError{Msg: fmt.Sprintf(format, args...)}
}

// Resolver looks up a name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Env is the host side of the network, shared by a Sandbox's runs: how
// names resolve and which certificate authorities TLS trusts.
type Env struct {
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver Resolver
	// RootCAs are the authorities TLS trusts; nil is the system's.
	RootCAs *x509.CertPool
	// DialTimeout bounds one connection attempt; 0 is 10 s.
	DialTimeout time.Duration
}

// Gate makes the requests policies allow: names resolved on the host, each
// address checked as it is dialled, TLS verified in Go, no proxy from the
// environment. Safe for concurrent use; its connections are pooled.
type Gate struct {
	env Env
	tr  *http.Transport
}

// NewGate makes a Gate.
func NewGate(env Env) *Gate {
	if env.Resolver == nil {
		env.Resolver = net.DefaultResolver
	}
	if env.DialTimeout == 0 {
		env.DialTimeout = 10 * time.Second
	}
	g := &Gate{env: env}
	g.tr = &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, unchecked
		DialContext:            g.dial,
		TLSClientConfig:        &tls.Config{RootCAs: env.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        60 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		// The guest's Accept-Encoding passes through and it decodes
		// what it asked for; caps count the bytes as sent.
		DisableCompression: true,
	}
	return g
}

// Close drops the pooled connections.
func (g *Gate) Close() {
	if g != nil {
		g.tr.CloseIdleConnections()
	}
}

// permit is what a request may dial: the literal address its rule names,
// if any.
type permit struct{ literal netip.Addr }

type permitKey struct{}

// check refuses an internal address unless the request's rule names it.
func check(host string, a netip.Addr, p *permit) error {
	a = a.Unmap()
	cls, bad := internal(a)
	if !bad || p != nil && p.literal.IsValid() && p.literal == a {
		return nil
	}
	what := cls
	if metadata[a] {
		what = "a cloud metadata address"
	}
	if host == a.String() {
		return refused("network: %s is %s; it is reachable only through a rule naming it literally (e.g. --allow-net http://%s:PORT)", a, what, hostForURL(a.String()))
	}
	return refused("network: %s resolved to %s, %s; the sandbox refuses such addresses for names (no DNS rebinding); a rule naming the address literally allows it", host, a, what)
}

func hostForURL(h string) string {
	if a, err := netip.ParseAddr(h); err == nil && a.Is6() {
		return "[" + h + "]"
	}
	return h
}

func (g *Gate) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portS, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		return nil, err
	}
	p, _ := ctx.Value(permitKey{}).(*permit)
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.env.Resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("network: resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	var errs []error
	for _, a := range addrs {
		if err := check(host, a, p); err != nil {
			errs = append(errs, err)
			continue
		}
		d := net.Dialer{
			Timeout: g.env.DialTimeout,
			// Checked again on the address the socket connects to.
			Control: func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					return refused("network: cannot check the address %q", address)
				}
				return check(host, ap.Addr(), p)
			},
		}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	// A refusal explains more than a later address's connection error.
	for _, e := range errs {
		if errors.Is(e, ErrRefused) {
			return nil, e
		}
	}
	return nil, errors.Join(errs...)
}
