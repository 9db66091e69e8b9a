package pkgindex

import (
	"net/netip"
	"net/url"
)

// namedAddress tells whether a is an address the operator named
// literally, as the host of URL or of a file origin: those are reached
// even where internal (a mirror on loopback, say).
func (c Config) namedAddress(a netip.Addr) bool {
	for _, s := range append([]string{c.URL}, c.FileOrigins...) {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		if h, err := netip.ParseAddr(u.Hostname()); err == nil && h.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}
