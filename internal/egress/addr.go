package egress

import "net/netip"

// internalRanges are addresses a run reaches only through a rule naming
// the address literally: they lead into the host's own networks, not to
// the internet. The cloud metadata addresses (169.254.169.254,
// fd00:ec2::254) fall in link-local and unique-local.
var internalRanges = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"; 0.0.0.0 reaches the host
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // CGNAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.88.99.0/24",  // 6to4 relay
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4: embeds an IPv4 address
		"fc00::/7",        // unique local, fd00:ec2::254
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// internal tells whether a is an address only a literal rule may reach,
// and names its class for messages.
func internal(a netip.Addr) (string, bool) {
	a = a.Unmap()
	if a.Zone() != "" {
		return "a zoned (link-local) address", true
	}
	if nat64.Contains(a) {
		// The well-known NAT64 prefix carries an IPv4 address: judge that.
		b := a.As16()
		return internal(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	for _, p := range internalRanges {
		if p.Contains(a) {
			return className(p), true
		}
	}
	return "", false
}

func className(p netip.Prefix) string {
	switch p.String() {
	case "127.0.0.0/8", "::1/128":
		return "a loopback address"
	case "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7":
		return "a private address"
	case "169.254.0.0/16", "fe80::/10":
		return "a link-local address (cloud metadata lives there)"
	case "100.64.0.0/10":
		return "a carrier-grade NAT address"
	case "224.0.0.0/4", "ff00::/8":
		return "a multicast address"
	}
	return "a reserved address"
}

// metadata are the cloud metadata endpoints, named in messages.
var metadata = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true,
	netip.MustParseAddr("fd00:ec2::254"):   true,
}
