package policy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestParseIPRanges: one reading of CIDR ranges for the frontend's
// identifier policy and the worker's dial policy: a mapped range is its
// IPv4 range, host bits are dropped, and an error names the key.
func TestParseIPRanges(t *testing.T) {
	t.Parallel()
	got, err := ParseIPRanges("policy.deny_ip_ranges", []string{"::ffff:10.0.0.0/104", " 192.168.1.7/16 ", "fd00::/8", "::ffff:127.9.0.2/128"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("127.9.0.2/32"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParseIPRanges("challenge.allow_reserved_ranges", []string{"169.254.169.254"}); err == nil ||
		!strings.Contains(err.Error(), `challenge.allow_reserved_ranges: "169.254.169.254" is not a CIDR range`) {
		t.Errorf("an address without a length: %v, want an error naming the key", err)
	}
}
