package validate

import (
	"context"
	"errors"
	"fmt"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// The worker never validates DNSSEC itself: its resolvers do (challenge.dnssec,
// workerconf.DNSSEC*). It sets DO (and AD, RFC 6840 §5.7) so a validating
// resolver reports what it found, and reads the answer:
//
//	| answer                                   | check               | require             |
//	| NOERROR/NXDOMAIN with AD (secure)        | used                | used                |
//	| NOERROR/NXDOMAIN without AD (insecure)   | used                | DNSSEC failure      |
//	| SERVFAIL, bogus (EDE, or a CD probe)     | DNSSEC failure      | DNSSEC failure      |
//	| SERVFAIL, anything else                  | next resolver       | next resolver       |
//
// A DNSSEC failure ends the lookup at once: another resolver's answer is
// never asked for, so a bogus record is not read as "no record" (for CAA
// that would permit issuance).

// dnssecEDE are the Extended DNS Errors (RFC 8914 §4) that say an answer
// failed DNSSEC validation. 1 and 2 (an algorithm or digest the resolver
// does not know) make a zone insecure, not bogus, so they are not here.
var dnssecEDE = map[uint16]bool{
	dns.ExtendedErrorCodeDNSSECIndeterminate:  true,
	dns.ExtendedErrorCodeDNSBogus:             true,
	dns.ExtendedErrorCodeSignatureExpired:     true,
	dns.ExtendedErrorCodeSignatureNotYetValid: true,
	dns.ExtendedErrorCodeDNSKEYMissing:        true,
	dns.ExtendedErrorCodeRRSIGsMissing:        true,
	dns.ExtendedErrorCodeNoZoneKeyBitSet:      true,
	dns.ExtendedErrorCodeNSECMissing:          true,
}

// dnssecMode is challenge.dnssec with "" read as the default.
func dnssecMode(s string) string {
	if s == "" {
		return workerconf.DNSSECCheck
	}
	return s
}

// errBogus and errInsecure mark a dnsError as a DNSSEC failure.
var (
	errBogus    = errors.New("DNSSEC validation failed")
	errInsecure = errors.New("answer not DNSSEC-validated")
)

// isDNSSECFailure reports whether err is a lookup that failed for DNSSEC.
func isDNSSECFailure(err error) bool {
	return errors.Is(err, errBogus) || errors.Is(err, errInsecure)
}

// insecure returns the error for an answer without AD when the mode
// requires DNSSEC, nil otherwise.
func (r *resolver) insecure(resp *dns.Msg, qtype uint16, display string) error {
	if r.dnssec != workerconf.DNSSECRequire || resp.AuthenticatedData {
		return nil
	}
	return &dnsError{qtype: qtype, name: display, rcode: -1, err: errInsecure, why: "answer not DNSSEC-validated",
		hint: ": this CA accepts only DNSSEC-validated answers, and the resolver did not mark this one secure (no AD bit: the zone is unsigned, or has no chain of trust)"}
}

// bogus returns a DNSSEC failure when resp, a SERVFAIL from server, says
// the answer failed validation: by an Extended DNS Error, or, when it
// carries none, because the same question with CD (checking disabled)
// gets an answer. It returns nil for any other SERVFAIL, and always when
// DNSSEC is off.
func (r *resolver) bogus(ctx context.Context, m, resp *dns.Msg, server string, qtype uint16, display string) error {
	if r.dnssec == workerconf.DNSSECOff {
		return nil
	}
	fail := func(why string) error {
		return &dnsError{qtype: qtype, name: display, rcode: -1, err: errBogus, why: "DNSSEC validation failed (" + why + ")",
			hint: ": the validating resolver found the signed answer bogus (forged, or its signatures do not verify), so it is not used"}
	}
	if opt := resp.IsEdns0(); opt != nil {
		seen := false
		for _, o := range opt.Option {
			ede, ok := o.(*dns.EDNS0_EDE)
			if !ok {
				continue
			}
			seen = true
			if dnssecEDE[ede.InfoCode] {
				return fail(fmt.Sprintf("extended DNS error %d, %s", ede.InfoCode, dns.ExtendedErrorCodeToString[ede.InfoCode]))
			}
		}
		if seen {
			return nil // the resolver said why, and it was not DNSSEC
		}
	}
	probe := m.Copy()
	probe.CheckingDisabled = true
	cd, err := exchangeOne(ctx, probe, server)
	if err == nil && (cd.Rcode == dns.RcodeSuccess || cd.Rcode == dns.RcodeNameError) {
		return fail("SERVFAIL, but an answer with checking disabled")
	}
	return nil
}
