package relay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
)

// dnsPublisher adds and removes the upstream's dns-01 TXT records by RFC
// 2136 UPDATE signed with TSIG (RFC 8945), through miekg/dns, which has
// both: hand-written wire code for signed updates would be the riskiest
// part of the relay.
type dnsPublisher struct {
	server, zone string
	keyName, alg string
	secret       string // base64
	propagation  time.Duration
	label        string
}

// newDNSPublisher reads the TSIG secret and builds the publisher of
// backend name's dns01 settings.
func newDNSPublisher(name string, c signerconf.Relay) (*dnsPublisher, error) {
	data, err := os.ReadFile(c.TSIGSecretFile)
	if err != nil {
		return nil, fmt.Errorf("backends.%s.tsig_secret_file: %w", name, err)
	}
	wait := time.Duration(c.PropagationWait()) * time.Second
	return &dnsPublisher{server: c.DNSServer, zone: dns.Fqdn(c.DNSZone), keyName: dns.Fqdn(c.TSIGKeyName),
		alg: dns.Fqdn(strings.ToLower(c.TSIGAlgorithm)), secret: strings.TrimSpace(string(data)), propagation: wait,
		label: "backends." + name}, nil
}

// recordName is where the dns-01 record of identifier goes: the base name
// for a wildcard (RFC 8555 §8.4).
func recordName(identifier string) string {
	return dns.Fqdn("_acme-challenge." + strings.TrimPrefix(identifier, "*."))
}

func (p *dnsPublisher) txt(name, value string) *dns.TXT {
	return &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{value}}
}

// update sends one signed UPDATE adding (add) or removing the TXT record.
func (p *dnsPublisher) update(ctx context.Context, name, value string, add bool) error {
	if !dns.IsSubDomain(p.zone, name) {
		return acme.New(acme.ProblemServerInternal, "relay %s: %s is outside the configured dns_zone %s, so its dns-01 record cannot be published there", p.label, name, p.zone)
	}
	m := new(dns.Msg)
	m.SetUpdate(p.zone)
	if add {
		m.Insert([]dns.RR{p.txt(name, value)})
	} else {
		m.Remove([]dns.RR{p.txt(name, value)})
	}
	m.SetTsig(p.keyName, p.alg, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", TsigSecret: map[string]string{p.keyName: p.secret}, Timeout: 10 * time.Second}
	r, _, err := c.ExchangeContext(ctx, m, p.server)
	verb := "adding"
	if !add {
		verb = "removing"
	}
	switch {
	case err == nil && r.Rcode == dns.RcodeSuccess:
		return nil
	case errors.Is(err, dns.ErrAuth) || errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrKeyAlg) || (err == nil && r.Rcode == dns.RcodeNotAuth):
		// The key is wrong: the operator's to fix, not the retry's.
		return acme.New(acme.ProblemServerInternal, "relay %s: the DNS server %s refused the TSIG-signed update %s %s (key %s, %s): check tsig_key_name, tsig_algorithm and tsig_secret_file against the server's key",
			p.label, p.server, verb, name, p.keyName, errText(err, r))
	case err == nil && r.Rcode == dns.RcodeRefused:
		return acme.New(acme.ProblemServerInternal, "relay %s: the DNS server %s refused the update %s %s in zone %s (REFUSED): its policy does not let key %s update that name",
			p.label, p.server, verb, name, p.zone, p.keyName)
	default:
		return fmt.Errorf("%w: relay %s: %s the dns-01 record %s at %s: %s", signer.ErrUnavailable, p.label, verb, name, p.server, errText(err, r))
	}
}

func errText(err error, r *dns.Msg) string {
	if err != nil {
		return err.Error()
	}
	return dns.RcodeToString[r.Rcode]
}

// served waits until the authoritative server answers name with value, up
// to the propagation wait: the upstream is asked to validate only once the
// record is there to see.
func (p *dnsPublisher) served(ctx context.Context, name, value string) error {
	ctx, cancel := context.WithTimeout(ctx, p.propagation)
	defer cancel()
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	for {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeTXT)
		r, _, err := c.ExchangeContext(ctx, q, p.server)
		if err == nil {
			for _, rr := range r.Answer {
				if t, ok := rr.(*dns.TXT); ok && strings.Join(t.Txt, "") == value {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: relay %s: the dns-01 record %s was not served by %s within %s of its update", signer.ErrUnavailable, p.label, name, p.server, p.propagation)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
