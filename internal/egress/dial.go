package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// CheckedDialer is a DialContext for the host's own requests on behalf of
// what an operator configured (a package index and its file origins):
// the gate's address checks without a run. An internal address (loopback,
// private, link-local and cloud metadata, ...; see internalRanges) is
// refused, with ErrRefused, unless it is dialed as a literal that named(a)
// says the operator wrote; a name resolving to one is refused (no DNS
// rebinding into the host's networks). The address the socket connects
// to is checked again.
func CheckedDialer(timeout time.Duration, resolver *net.Resolver, named func(netip.Addr) bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	checkAddr := func(host string, a netip.Addr) error {
		a = a.Unmap()
		cls, bad := internal(a)
		// Only the literal itself: a name that resolves to an address
		// the operator named elsewhere is still a name.
		if !bad || named != nil && named(a) && literalHost(host) == a {
			return nil
		}
		if metadata[a] {
			cls = "a cloud metadata address"
		}
		if host == a.String() {
			return refused("network: %s is %s; the host reaches it only where the operator names it literally", a, cls)
		}
		return refused("network: %s resolved to %s, %s; the host refuses such addresses for names (name the address literally, or allow internal addresses)", host, a, cls)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, portS, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.Atoi(portS)
		if err != nil {
			return nil, err
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{a}
		} else if addrs, err = resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("network: resolve %s: %w", host, err)
		}
		var errs []error
		for _, a := range addrs {
			if err := checkAddr(host, a); err != nil {
				errs = append(errs, err)
				continue
			}
			d := net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					return refused("network: cannot check the address %q", address)
				}
				return checkAddr(host, ap.Addr())
			}}
			c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		for _, e := range errs {
			if errors.Is(e, ErrRefused) {
				return nil, e
			}
		}
		if len(errs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
		return nil, errors.Join(errs...)
	}
}

// literalHost is host as an address, if it is one.
func literalHost(host string) netip.Addr {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}
