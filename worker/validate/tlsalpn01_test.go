package validate

import (
	"net"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

func TestTLSALPN01(t *testing.T) {
	t.Parallel()
	acmeProtos := []string{acmeTLSProtocol}
	tests := []struct {
		name     string
		id       acme.Identifier
		cert     alpnCert
		protos   []string
		wantSNI  string
		noServer bool
		want     acme.ProblemType
		mentions []string
	}{
		{
			name:    "certificate with the extension",
			id:      dnsID("example.test"),
			cert:    alpnCert{dnsNames: []string{"example.test"}},
			protos:  acmeProtos,
			wantSNI: "example.test",
		},
		{
			name:     "missing acmeIdentifier extension",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"example.test"}, noExtension: true},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"no acmeIdentifier extension", "127.0.0.1", `SNI "example.test"`},
		},
		{
			name:     "extension not critical",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"example.test"}, notCritical: true},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"not marked critical"},
		},
		{
			name:     "wrong digest",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"example.test"}, digest: make([]byte, 32)},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"expected SHA-256 of the key authorization"},
		},
		{
			name:     "digest of the wrong length",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"example.test"}, digest: []byte("short")},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"holds 5 bytes"},
		},
		{
			name:     "wrong SAN",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"other.test"}},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{`single dNSName "example.test"`, `got dNSName "other.test"`},
		},
		{
			name:     "two SANs",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"example.test", "extra.test"}},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"exactly one name, it holds 2"},
		},
		{
			name:     "server without ALPN",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"example.test"}},
			want:     acme.ProblemTLS,
			mentions: []string{`did not negotiate the ALPN protocol "acme-tls/1"`},
		},
		{
			name:     "server speaking another ALPN protocol",
			id:       dnsID("example.test"),
			cert:     alpnCert{dnsNames: []string{"example.test"}},
			protos:   []string{"h2", "http/1.1"},
			want:     acme.ProblemTLS,
			mentions: []string{"TLS handshake failed", "127.0.0.1"},
		},
		{
			name:     "nothing listening",
			id:       dnsID("example.test"),
			noServer: true,
			want:     acme.ProblemConnection,
			mentions: []string{"Connection refused", "127.0.0.1"},
		},
		{
			name:    "IP identifier with reverse-DNS SNI",
			id:      ipID("127.0.0.1"),
			cert:    alpnCert{ips: []net.IP{net.ParseIP("127.0.0.1")}},
			protos:  acmeProtos,
			wantSNI: "1.0.0.127.in-addr.arpa",
		},
		{
			name:     "IP identifier with a dNSName SAN",
			id:       ipID("127.0.0.1"),
			cert:     alpnCert{dnsNames: []string{"1.0.0.127.in-addr.arpa"}},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"single iPAddress 127.0.0.1"},
		},
		{
			// RFC 5280 §4.2.1.6: an IPv4 iPAddress is exactly four octets;
			// the IPv4-mapped IPv6 form is another address.
			name:     "IPv4 identifier with its IPv4-mapped IPv6 SAN",
			id:       ipID("127.0.0.1"),
			cert:     alpnCert{rawIP: net.ParseIP("127.0.0.1").To16()},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"single iPAddress 127.0.0.1"},
		},
		{
			name:     "IP identifier with another IP SAN",
			id:       ipID("127.0.0.1"),
			cert:     alpnCert{ips: []net.IP{net.ParseIP("127.0.0.2")}},
			protos:   acmeProtos,
			want:     acme.ProblemUnauthorized,
			mentions: []string{"got iPAddress 127.0.0.2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			d.host(t, "example.test")
			cfg := testConfig(d)
			if !tc.noServer {
				cfg.TLSALPNPort = serveALPN(t, tc.cert.build(t), tc.protos, tc.wantSNI)
			}
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: tc.id, Type: acme.ChallengeTLSALPN01, Token: testToken,
				KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			if res.Problem != nil {
				t.Logf("%s: %s", res.Problem.Type, res.Problem.Detail)
			}
			checkResult(t, res, tc.want, tc.mentions...)
			if len(res.Record) != 1 {
				t.Fatalf("want one attempt recorded, got %+v", res.Record)
			}
			att := res.Record[0]
			if att.AddressUsed != "127.0.0.1" || att.Port != cfg.TLSALPNPort || att.Hostname != tc.id.Value {
				t.Errorf("attempt = %+v, want 127.0.0.1:%d for %s", att, cfg.TLSALPNPort, tc.id.Value)
			}
			if tc.wantSNI != "" && att.ServerName != tc.wantSNI {
				t.Errorf("attempt SNI = %q, want %q", att.ServerName, tc.wantSNI)
			}
		})
	}
}

// TestTLSALPN01BlackHole proves a server that accepts and never completes
// the handshake costs at most Config.Timeout, reported as a connection problem.
func TestTLSALPN01BlackHole(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.host(t, "example.test")
	cfg := testConfig(d)
	cfg.TLSALPNPort = blackHole(t)
	cfg.Timeout = time.Second
	start := time.Now()
	res := New(cfg).Validate(t.Context(), Request{
		Identifier: dnsID("example.test"), Type: acme.ChallengeTLSALPN01, Token: testToken, KeyAuthorization: testKeyAuth,
	})
	elapsed := time.Since(start)
	checkResult(t, res, acme.ProblemConnection, "Timeout", "127.0.0.1")
	if elapsed > cfg.Timeout+2*time.Second {
		t.Fatalf("attempt took %v, want about %v", elapsed, cfg.Timeout)
	}
}
