package main

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// flagUnauthenticatedNetwork is the one way to serve without a bearer
// token beyond loopback: its name says what the operator accepts.
const flagUnauthenticatedNetwork = "allow-unauthenticated-network"

// checkListenAuth refuses a listen address reachable from beyond this
// host when there is no token, unless allowed: whoever reaches such a
// port runs code with the server's tools, egress rules and their
// credentials (as Jupyter and Redis's protected mode refuse it).
// Loopback is 127.0.0.0/8, ::1 (also IPv4-mapped) and the name
// "localhost"; any other name counts as reachable, as it may resolve to
// anything, and so does an empty host (every interface).
func checkListenAuth(flagName, addr, token string, allowed bool) error {
	if token != "" || allowed {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{fmt.Sprintf("%s %q: %v (want HOST:PORT)", flagName, addr, err)}
	}
	if isLoopbackHost(host) {
		return nil
	}
	return usageError{fmt.Sprintf("%s %s listens beyond loopback with no bearer token: anyone who reaches the port runs code "+
		"with this server's tools and network rules; set $AIRLOCK_TOKEN, listen on 127.0.0.1, "+
		"or pass --%s to serve without authentication anyway", flagName, addr, flagUnauthenticatedNetwork)}
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
