package validate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// acmeTLSProtocol is the ALPN protocol of RFC 8737 §6.2.
const acmeTLSProtocol = "acme-tls/1"

var (
	// oidACMEIdentifier is id-pe-acmeIdentifier (RFC 8737 §6.1).
	oidACMEIdentifier = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 31}
	// oidSubjectAltName is id-ce-subjectAltName (RFC 5280 §4.2.1.6).
	oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}
)

// GeneralName tags (RFC 5280 §4.2.1.6), context-specific.
const (
	tagDNSName   = 2
	tagIPAddress = 7
)

// tlsALPN01 connects with ALPN "acme-tls/1" and checks the certificate the
// server presents (RFC 8737 §3, RFC 8738 §6 for IP addresses).
// An error with a nil problem means the lookup could not be made at all
// (ErrResolversUnreachable): no verdict.
func (v *Validator) tlsALPN01(ctx context.Context, r Request) ([]Attempt, *acme.Problem, error) {
	port := v.cfg.TLSALPNPort
	att := Attempt{Hostname: r.Identifier.Value, Port: port}
	var addrs []netip.Addr
	var wantIP netip.Addr
	if r.Identifier.Type == acme.IdentifierIP {
		wantIP, _ = parseIP(r.Identifier.Value) // checked by checkRequest
		addrs = []netip.Addr{wantIP}
		// RFC 8738 §6: the SNI is the reverse-DNS name of the address
		// (in-addr.arpa / ip6.arpa), since SNI cannot carry an IP address.
		arpa, err := dns.ReverseAddr(wantIP.String())
		if err != nil {
			return []Attempt{att}, problem(acme.ProblemMalformed, "cannot build the reverse name of %s: %v", wantIP, err), nil
		}
		att.ServerName = strings.TrimSuffix(arpa, ".")
	} else {
		att.ServerName = r.Identifier.Value
		var err error
		addrs, err = v.res.lookupIPs(ctx, r.Identifier.Value)
		if err := unreachable(err); err != nil {
			return []Attempt{att}, nil, err
		}
		if err != nil {
			return []Attempt{att}, problem(acme.ProblemDNS, "DNS problem: %v", err), nil
		}
		if len(addrs) == 0 {
			return []Attempt{att}, problem(acme.ProblemDNS, "DNS problem: no A or AAAA records found for %s", r.Identifier.Value), nil
		}
	}
	att.AddressesResolved = addrStrings(addrs)

	conn, used, err := v.dial(ctx, r.Identifier.Value, addrs, port, &att)
	record := []Attempt{att}
	if re, ok := asRefused(err); ok {
		// An IP identifier refused is the identifier itself; a name is
		// refused for where it points now.
		typ := acme.ProblemConnection
		if r.Identifier.Type == acme.IdentifierIP {
			typ = acme.ProblemRejectedIdentifier
		}
		return record, problem(typ, "Connecting to %s on port %d with TLS: %v", r.Identifier.Value, port, re), nil
	}
	where := fmt.Sprintf("Connecting to %s with TLS (SNI %q, ALPN %q)", netip.AddrPortFrom(used, uint16(port)), att.ServerName, acmeTLSProtocol)
	if err != nil {
		return record, connectionProblem(where, err), nil
	}
	defer conn.Close()
	// The certificate is self-signed by design (RFC 8737 §3); what proves
	// control is checked below, not the chain.
	tc := tls.Client(conn, &tls.Config{
		ServerName:         att.ServerName,
		NextProtos:         []string{acmeTLSProtocol},
		InsecureSkipVerify: true, //nolint:gosec // see above
		MinVersion:         tls.VersionTLS12,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		if isTimeout(err) {
			return record, connectionProblem(where, err), nil
		}
		return record, problem(acme.ProblemTLS, "%s: TLS handshake failed: %v", where, err), nil
	}
	state := tc.ConnectionState()
	// RFC 8737 §3: the server verifies that "acme-tls/1" was successfully
	// negotiated.
	if state.NegotiatedProtocol != acmeTLSProtocol {
		return record, problem(acme.ProblemTLS, "%s: the server did not negotiate the ALPN protocol %q (got %q); it is not answering tls-alpn-01",
			where, acmeTLSProtocol, state.NegotiatedProtocol), nil
	}
	if len(state.PeerCertificates) == 0 {
		return record, problem(acme.ProblemTLS, "%s: the server presented no certificate", where), nil
	}
	sum := sha256.Sum256([]byte(r.KeyAuthorization))
	if why := checkALPNCert(state.PeerCertificates[0], r.Identifier, wantIP, sum[:]); why != "" {
		return record, problem(acme.ProblemUnauthorized, "%s: Incorrect validation certificate for tls-alpn-01 challenge: %s", where, why), nil
	}
	return record, nil, nil
}

// checkALPNCert applies RFC 8737 §3 to the presented certificate: "a
// subjectAltName extension containing the dNSName being validated and no
// other entries" (an iPAddress for IP identifiers, RFC 8738 §6), and "the
// critical acmeIdentifier extension containing the expected SHA-256 digest".
// It returns why the certificate fails, or "".
func checkALPNCert(cert *x509.Certificate, id acme.Identifier, wantIP netip.Addr, want []byte) string {
	var san, acmeExt *pkixExtension
	for i := range cert.Extensions {
		e := &cert.Extensions[i]
		switch {
		case e.Id.Equal(oidSubjectAltName):
			san = &pkixExtension{critical: e.Critical, value: e.Value}
		case e.Id.Equal(oidACMEIdentifier):
			acmeExt = &pkixExtension{critical: e.Critical, value: e.Value}
		}
	}
	if san == nil {
		return "the certificate has no subjectAltName extension"
	}
	tag, value, err := parseSingleSAN(san.value)
	if err != nil {
		return err.Error()
	}
	switch id.Type {
	case acme.IdentifierIP:
		// Compared as given: an IPv4 iPAddress is exactly four octets (RFC
		// 5280 §4.2.1.6), and sixteen holding ::ffff:a.b.c.d name another
		// address. wantIP, from a normalised identifier, is never mapped.
		got, ok := netip.AddrFromSlice(value)
		if tag != tagIPAddress || !ok || got != wantIP {
			return fmt.Sprintf("the subjectAltName must be the single iPAddress %s, got %s", wantIP, describeSAN(tag, value))
		}
	default:
		if tag != tagDNSName || !strings.EqualFold(string(value), id.Value) {
			return fmt.Sprintf("the subjectAltName must be the single dNSName %q, got %s", id.Value, describeSAN(tag, value))
		}
	}
	if acmeExt == nil {
		return "the certificate has no acmeIdentifier extension (1.3.6.1.5.5.7.1.31)"
	}
	if !acmeExt.critical {
		return "the acmeIdentifier extension (1.3.6.1.5.5.7.1.31) is not marked critical"
	}
	got, err := parseACMEIdentifier(acmeExt.value)
	if err != nil {
		return err.Error()
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return fmt.Sprintf("the acmeIdentifier extension holds %x, expected SHA-256 of the key authorization %x", truncateBytes(got, 64), want)
	}
	return ""
}

type pkixExtension struct {
	critical bool
	value    []byte
}

// parseSingleSAN parses a subjectAltName extension value (a SEQUENCE OF
// GeneralName) and returns its one entry. Every GeneralName form counts,
// including those crypto/x509 does not surface (otherName, directoryName).
func parseSingleSAN(der []byte) (tag int, value []byte, err error) {
	var names []asn1.RawValue
	rest, err := asn1.Unmarshal(der, &names)
	if err != nil || len(rest) != 0 {
		return 0, nil, errors.New("the subjectAltName extension is not valid DER")
	}
	if len(names) != 1 {
		return 0, nil, fmt.Errorf("the subjectAltName extension must hold exactly one name, it holds %d", len(names))
	}
	n := names[0]
	if n.Class != asn1.ClassContextSpecific {
		return 0, nil, errors.New("the subjectAltName entry is not a GeneralName")
	}
	return n.Tag, n.Bytes, nil
}

// parseACMEIdentifier parses the acmeIdentifier extension value: an
// "Authorization ::= OCTET STRING (SIZE (32))" (RFC 8737 §6.1).
func parseACMEIdentifier(der []byte) ([]byte, error) {
	var digest []byte
	rest, err := asn1.Unmarshal(der, &digest)
	if err != nil || len(rest) != 0 {
		return nil, errors.New("the acmeIdentifier extension is not a DER OCTET STRING")
	}
	if len(digest) != sha256.Size {
		return nil, fmt.Errorf("the acmeIdentifier extension holds %d bytes, want a %d-byte SHA-256 digest", len(digest), sha256.Size)
	}
	return digest, nil
}

func describeSAN(tag int, value []byte) string {
	switch tag {
	case tagDNSName:
		return fmt.Sprintf("dNSName %q", truncate(string(value), 256))
	case tagIPAddress:
		if a, ok := netip.AddrFromSlice(value); ok {
			return "iPAddress " + a.Unmap().String()
		}
		return fmt.Sprintf("iPAddress %x", truncateBytes(value, 32))
	default:
		return fmt.Sprintf("a GeneralName with tag [%d]", tag)
	}
}

func truncateBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return bytes.Clone(b)
}
