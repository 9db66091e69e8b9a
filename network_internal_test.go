package airlock

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/airlock-sandbox/airlock/internal/egress"
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

// The public network types are copies of internal/egress's: Rule and
// Decision convert (the compiler checks their fields), Policy is copied
// field by field, so a field added to one must be added to the other.
func TestNetworkPolicyCopiesEveryField(t *testing.T) {
	pub, internal := reflect.TypeFor[NetworkPolicy](), reflect.TypeFor[egress.Policy]()
	if pub.NumField() != internal.NumField() {
		t.Fatalf("NetworkPolicy has %d fields, egress.Policy %d", pub.NumField(), internal.NumField())
	}
	for i := range pub.NumField() {
		if pub.Field(i).Name != internal.Field(i).Name {
			t.Errorf("field %d: %s, egress.Policy's is %s", i, pub.Field(i).Name, internal.Field(i).Name)
		}
	}
	p := NetworkPolicy{Rules: []NetworkRule{{Scheme: "https", Host: "api.example.com", Methods: []string{"GET"}, Headers: map[string]string{"A": "b"}}},
		MaxRequests: 3, MaxRequestBytes: 4, MaxResponseBytes: 5, Timeout: time.Second}
	if back := policyFrom(p.egressPolicy()); !reflect.DeepEqual(back, p) {
		t.Errorf("round trip through egress: %+v, want %+v", back, p)
	}
	b, _ := json.Marshal(p)
	const want = `{"rules":[{"scheme":"https","host":"api.example.com","methods":["GET"]}],"max_requests":3,"max_request_bytes":4,"max_response_bytes":5,"timeout":1000000000}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}
