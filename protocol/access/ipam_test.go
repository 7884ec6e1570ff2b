package access

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// records is an IPAM's answer per address; an address in down makes it fail.
type records struct {
	names map[string][]string
	down  map[string]bool
}

func (r records) Names(_ context.Context, a netip.Addr) ([]string, error) {
	if r.down[a.String()] {
		return nil, errors.New("503 from the IPAM")
	}
	return r.names[a.String()], nil
}

// TestIPAMCheck: a name is the client's when the IPAM gives the client's
// address that name, exactly; the client's own address is its own; another
// address is the client's when the IPAM gives it one of the client's
// names. An IPAM that fails is unknown, and with none built every ipam
// check is unknown.
func TestIPAMCheck(t *testing.T) {
	t.Parallel()
	src := records{
		names: map[string][]string{
			"192.0.2.10": {"WS10.lab.test.", "ws10-alias.lab.test"},
			"192.0.2.99": {"ws10.lab.test"}, // a VIP of the same host
			"192.0.2.50": {"other.lab.test"},
		},
		down: map[string]bool{"192.0.2.66": true},
	}
	opts := Options{IPAM: func(name string, c Check) (NameSource, error) { return src, nil }}
	c, err := newIPAMCheck("owned", Check{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ip := func(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierIP, Value: v} }
	for _, tc := range []struct {
		client string
		ids    []acme.Identifier
		want   Answer
	}{
		{"192.0.2.10", dns("ws10.lab.test", "ws10-alias.lab.test"), Yes},
		{"192.0.2.10", dns("www.ws10.lab.test"), No}, // exact names only
		{"192.0.2.10", dns("other.lab.test"), No},
		{"192.0.2.10", []acme.Identifier{ip("192.0.2.10")}, Yes},
		{"192.0.2.10", []acme.Identifier{ip("192.0.2.99")}, Yes},
		{"192.0.2.10", []acme.Identifier{ip("192.0.2.50")}, No},
		{"192.0.2.77", dns("ws10.lab.test"), No}, // unknown to the IPAM: no names
		{"192.0.2.77", []acme.Identifier{ip("192.0.2.77")}, Yes},
		{"192.0.2.66", dns("ws10.lab.test"), Unknown},
		{"192.0.2.10", []acme.Identifier{ip("192.0.2.66")}, Unknown},
	} {
		f := &Facts{Client: Client{Addr: netip.MustParseAddr(tc.client)}, Identifiers: tc.ids}
		if got := c.check(context.Background(), f); got.Answer != tc.want {
			t.Errorf("%s ordering %v: %s (%s), want %s", tc.client, tc.ids, got.Answer, got.Detail, tc.want)
		}
	}
	none, _ := newIPAMCheck("owned", Check{}, Options{})
	got := none.check(context.Background(), &Facts{Client: Client{Addr: netip.MustParseAddr("192.0.2.10")}, Identifiers: dns("ws10.lab.test")})
	if got.Answer != Unknown || !strings.Contains(got.Detail, "IPAM not built") {
		t.Errorf("no IPAM built: %s (%s), want unknown", got.Answer, got.Detail)
	}
}
