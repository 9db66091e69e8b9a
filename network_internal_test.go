package airlock

import (
	"slices"
	"testing"
)

// A package the caller mounts replaces the network wheel of its name.
func TestNetworkWheelsGiveWayToTheCallersPackages(t *testing.T) {
	wheels := []string{"/c/netwheels/requests-2.34.2-py3-none-any.whl", "/c/netwheels/charset_normalizer-3.5.3-py3-none-any.whl", "/c/netwheels/idna-3.20-py3-none-any.whl"}
	own := []string{"/mine/requests-2.31.0-py3-none-any.whl", "/mine/Charset.Normalizer", "/mine/other.zip"}
	got := unshadowed(wheels, own)
	if !slices.Equal(got, []string{"/c/netwheels/idna-3.20-py3-none-any.whl"}) {
		t.Fatalf("%v", got)
	}
}
