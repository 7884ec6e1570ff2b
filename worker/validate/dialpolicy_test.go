package validate

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

func prefixes(t *testing.T, cidrs ...string) []netip.Prefix {
	t.Helper()
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// TestDialPolicy: which address and port validation may connect to, and
// that a refusal names its rule and how to lift it. Nothing here dials.
func TestDialPolicy(t *testing.T) {
	t.Parallel()
	type rules struct {
		deny, allow []string
		listeners   []workerconf.Listener
	}
	// This host's addresses, as wildcard listeners see them.
	local := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}
	tests := []struct {
		name  string
		rules rules
		dial  string
		want  []string // the refusal mentions each; none: allowed
	}{
		{name: "link-local", dial: "169.254.1.1:80", want: []string{"169.254.1.1 is link-local (169.254.0.0/16", "set challenge.allow_reserved_ranges to allow it"}},
		{name: "metadata v4", dial: "169.254.169.254:80", want: []string{"169.254.169.254 is link-local", "cloud metadata", "challenge.allow_reserved_ranges"}},
		{name: "metadata v6 (AWS)", dial: "[fd00:ec2::254]:80", want: []string{"fd00:ec2::254 is a cloud metadata address", "challenge.allow_reserved_ranges"}},
		{name: "metadata Alibaba", dial: "100.100.100.200:80", want: []string{"cloud metadata"}},
		{name: "link-local v6", dial: "[fe80::1]:80", want: []string{"fe80::1 is link-local (fe80::/10)"}},
		{name: "link-local v6 with a zone", dial: "[fe80::1%lo]:80", want: []string{"fe80::1 is link-local"}},
		{name: "unspecified v4", dial: "0.0.0.0:80", want: []string{"0.0.0.0 is unspecified"}},
		{name: "this network", dial: "0.1.2.3:80", want: []string{"0.1.2.3 is unspecified (0.0.0.0/8"}},
		{name: "unspecified v6", dial: "[::]:80", want: []string{":: is unspecified"}},
		{name: "multicast v4", dial: "224.0.0.251:80", want: []string{"multicast (224.0.0.0/4)"}},
		{name: "multicast v6", dial: "[ff02::1]:80", want: []string{"multicast (ff00::/8)"}},
		{name: "broadcast", dial: "255.255.255.255:80", want: []string{"broadcast"}},
		{name: "mapped metadata", dial: "[::ffff:169.254.169.254]:80", want: []string{"169.254.169.254 is link-local"}},
		{name: "mapped unspecified", dial: "[::ffff:0.0.0.0]:80", want: []string{"0.0.0.0 is unspecified"}},

		{name: "deny_ip_ranges", rules: rules{deny: []string{"127.9.0.0/16"}}, dial: "127.9.0.2:80",
			want: []string{"127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16"}},
		{name: "deny_ip_ranges private", rules: rules{deny: []string{"10.0.0.0/8", "fc00::/7"}}, dial: "[fd12::1]:443",
			want: []string{"fd12::1 is in policy.deny_ip_ranges fc00::/7"}},
		{name: "deny_ip_ranges, mapped address", rules: rules{deny: []string{"127.9.0.0/16"}}, dial: "[::ffff:127.9.0.2]:80",
			want: []string{"127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16"}},
		{name: "deny_ip_ranges next door", rules: rules{deny: []string{"127.9.0.0/16"}}, dial: "127.10.0.1:80"},

		{name: "private 10/8", dial: "10.1.2.3:80"},
		{name: "private 172.16/12", dial: "172.16.0.1:80"},
		{name: "private 192.168/16", dial: "192.168.1.1:443"},
		{name: "loopback", dial: "127.0.0.1:80"},
		{name: "loopback v6", dial: "[::1]:80"},
		{name: "ULA", dial: "[fd12:3456::1]:80"},
		{name: "mapped private", dial: "[::ffff:10.0.0.1]:80"},
		{name: "public", dial: "192.0.2.1:80"},

		{name: "the CA's own listener", rules: rules{listeners: []workerconf.Listener{{Key: "server.listen", Addr: "127.0.0.1:14000"}}}, dial: "127.0.0.1:14000",
			want: []string{"127.0.0.1:14000 is the CA's own listener (server.listen)", "challenge.allow_reserved_ranges"}},
		{name: "the listener's address on another port", rules: rules{listeners: []workerconf.Listener{{Key: "server.listen", Addr: "127.0.0.1:14000"}}}, dial: "127.0.0.1:80"},
		{name: "the listener's port on another address", rules: rules{listeners: []workerconf.Listener{{Key: "server.listen", Addr: "127.0.0.1:14000"}}}, dial: "127.0.0.2:14000"},
		{name: "wildcard listener: loopback", rules: rules{listeners: []workerconf.Listener{{Key: "server.listen", Addr: "0.0.0.0:443"}}}, dial: "127.0.0.7:443",
			want: []string{"127.0.0.7:443 is the CA's own listener (server.listen)"}},
		{name: "wildcard listener: v6 loopback", rules: rules{listeners: []workerconf.Listener{{Key: "admin.listen", Addr: "[::]:8443"}}}, dial: "[::1]:8443",
			want: []string{"[::1]:8443 is the CA's own listener (admin.listen)"}},
		{name: "wildcard listener: a local address", rules: rules{listeners: []workerconf.Listener{{Key: "worker.health_listen", Addr: ":9090"}}}, dial: "192.0.2.10:9090",
			want: []string{"192.0.2.10:9090 is the CA's own listener (worker.health_listen)"}},
		{name: "wildcard listener: a local v6 address", rules: rules{listeners: []workerconf.Listener{{Key: "server.listen", Addr: "0.0.0.0:443"}}}, dial: "[2001:db8::10]:443",
			want: []string{"[2001:db8::10]:443 is the CA's own listener"}},
		{name: "wildcard listener: another host", rules: rules{listeners: []workerconf.Listener{{Key: "server.listen", Addr: "0.0.0.0:443"}}}, dial: "192.0.2.11:443"},
		{name: "host-name listener counts as every local address", rules: rules{listeners: []workerconf.Listener{{Key: "server.public_http_listen", Addr: "localhost:http"}}}, dial: "127.0.0.1:80",
			want: []string{"127.0.0.1:80 is the CA's own listener (server.public_http_listen)"}},

		{name: "opt-out of metadata", rules: rules{allow: []string{"169.254.169.254/32"}}, dial: "169.254.169.254:80"},
		{name: "opt-out is only its range", rules: rules{allow: []string{"169.254.169.254/32"}}, dial: "169.254.169.253:80", want: []string{"link-local"}},
		{name: "opt-out of link-local v6", rules: rules{allow: []string{"fe80::/10"}}, dial: "[fe80::1]:80"},
		{name: "opt-out of a listener", rules: rules{allow: []string{"127.0.0.1/32"}, listeners: []workerconf.Listener{{Key: "server.listen", Addr: "127.0.0.1:14000"}}}, dial: "127.0.0.1:14000"},
		{name: "opt-out does not lift deny_ip_ranges", rules: rules{allow: []string{"169.254.0.0/16"}, deny: []string{"169.254.169.254/32"}}, dial: "169.254.169.254:80",
			want: []string{"169.254.169.254 is in policy.deny_ip_ranges 169.254.169.254/32"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newDialPolicy(DialRules{Deny: prefixes(t, tc.rules.deny...), AllowReserved: prefixes(t, tc.rules.allow...), Listeners: tc.rules.listeners})
			p.localAddrs = func() []netip.Addr { return local }
			ap, err := netip.ParseAddrPort(tc.dial)
			if err != nil {
				t.Fatal(err)
			}
			got := p.refusal(ap)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("%s refused: %s", tc.dial, got)
				}
				return
			}
			if got == "" {
				t.Fatalf("%s allowed, want it refused", tc.dial)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("refusal %q does not mention %q", got, w)
				}
			}
			// The dialer's own check, on the address string a socket is
			// about to connect to, agrees.
			if err := p.control("tcp", tc.dial, nil); err == nil {
				t.Errorf("the dialer's control allowed %s", tc.dial)
			} else if _, ok := asRefused(err); !ok {
				t.Errorf("the dialer's control refused %s without a refusal: %v", tc.dial, err)
			}
		})
	}
}

// TestDialControlRefusesBeforeConnect: the dialer's last check runs before
// connect(2), so a refused listener accepts nothing even when the address
// reaches net.Dialer directly.
func TestDialControlRefusesBeforeConnect(t *testing.T) {
	t.Parallel()
	denied := countAccepts(t, "127.9.0.2:0", "secret")
	p := newDialPolicy(DialRules{Deny: prefixes(t, "127.9.0.0/16")})
	d := net.Dialer{Control: p.control}
	_, err := d.DialContext(t.Context(), "tcp", denied.addr)
	re, ok := asRefused(err)
	if !ok {
		t.Fatalf("dial to %s: %v, want a refusal", denied.addr, err)
	}
	if !strings.Contains(re.Error(), "policy.deny_ip_ranges 127.9.0.0/16") {
		t.Errorf("refusal %q does not name the rule", re)
	}
	// Without the rule, the same dial connects: the listener is real.
	if c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", denied.addr); err != nil {
		t.Fatalf("the listener is not reachable: %v", err)
	} else {
		c.Close()
	}
	denied.wantAccepts(t, 1)
}
