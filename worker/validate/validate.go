package validate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Limits on what an attempt may consume. They are not configuration: each is
// far above what a correct responder needs and low enough that a hostile one
// cannot hold a worker.
const (
	// MaxRedirects is how many HTTP redirects http-01 follows (RFC 8555 §8.3
	// lets the server follow redirects; 10 is what Let's Encrypt allows).
	MaxRedirects = 10
	// MaxBodyBytes is the largest http-01 response body accepted. A key
	// authorization is under 100 bytes; anything bigger is not one.
	MaxBodyBytes = 8 << 10
	// maxHeaderBytes bounds the HTTP response headers of one hop.
	maxHeaderBytes = 16 << 10
	// maxCNAMEChain bounds how many CNAMEs one DNS lookup follows.
	maxCNAMEChain = 8
	// defaultTimeout applies when Config.Timeout is zero.
	defaultTimeout = 30 * time.Second
)

// Config is what a Validator needs to reach the outside world. Ports are
// configuration so tests can point validation at loopback listeners.
type Config struct {
	Resolvers     []string      // "host:port" DNS resolvers, tried in order
	DNSSEC        string        // challenge.dnssec (workerconf.DNSSEC*; "" is DNSSECCheck): dnssec.go
	HTTPPort      int           // port for http-01 (80 in production)
	HTTPSPort     int           // port a redirect to https:// may use (443 in production)
	TLSALPNPort   int           // port for tls-alpn-01 (443 in production)
	Timeout       time.Duration // bounds one whole attempt, challenge and CAA (challenge.timeout_ms)
	CAAIdentities []string      // issuer domain names this CA answers to in CAA issue/issuewild records
	// AccountHashPrefix, when set, is where dns-persist-01's hashed account
	// URIs live (draft -02; base URL + acme.AccountHashPath).
	AccountHashPrefix string
	Dial              DialRules // where http-01 and tls-alpn-01 may connect (dialpolicy.go)
}

// Validator runs challenges and CAA checks. It is safe for concurrent use.
type Validator struct {
	cfg    Config
	res    *resolver
	dialer *dialPolicy
}

// New builds a Validator. Zero ports and timeout take the production
// defaults (80, 443, 443, 30s).
func New(cfg Config) *Validator {
	if cfg.HTTPPort == 0 {
		cfg.HTTPPort = 80
	}
	if cfg.HTTPSPort == 0 {
		cfg.HTTPSPort = 443
	}
	if cfg.TLSALPNPort == 0 {
		cfg.TLSALPNPort = 443
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	cfg.Resolvers = append([]string(nil), cfg.Resolvers...)
	cfg.CAAIdentities = append([]string(nil), cfg.CAAIdentities...)
	return &Validator{cfg: cfg, res: &resolver{servers: cfg.Resolvers, dnssec: dnssecMode(cfg.DNSSEC)}, dialer: newDialPolicy(cfg.Dial)}
}

// Request describes one challenge attempt.
type Request struct {
	Identifier       acme.Identifier // the authorization's identifier (base name, no "*.")
	Wildcard         bool            // the authorization is for "*." + Identifier.Value
	Type             acme.ChallengeType
	Token            string
	KeyAuthorization string // token + "." + base64url(JWK thumbprint), computed by the caller
	AccountURI       string // the account's URL, for RFC 8657 accounturi
	// PriorThumbprints are the keys the account has replaced, newest first:
	// dns-persist-01 accepts a hashed accounturi made with one of them.
	PriorThumbprints []string
}

// Attempt is one thing validation tried: an HTTP request (one per redirect
// hop), a TLS connection or a DNS query. It is recorded on the challenge so an
// operator can see where the CA looked.
type Attempt struct {
	URL               string   `json:"url,omitempty"`               // http-01: the URL fetched
	Hostname          string   `json:"hostname,omitempty"`          // the name (or IP) connected to or queried
	Port              int      `json:"port,omitempty"`              // the port connected to
	ServerName        string   `json:"serverName,omitempty"`        // tls-alpn-01: the SNI sent
	AddressesResolved []string `json:"addressesResolved,omitempty"` // what the resolvers returned for Hostname
	AddressUsed       string   `json:"addressUsed,omitempty"`       // the address connected to (or last tried)
	AddressesTried    []string `json:"addressesTried,omitempty"`    // addresses that failed before AddressUsed (an IPv6 one, then IPv4 was used)
	AddressesRefused  []string `json:"addressesRefused,omitempty"`  // resolved addresses the dial policy refused: never connected to
}

// Result is the verdict of one attempt: Problem is nil on success. Record
// lists what was tried, in order.
//
// Err, when set, means there is no verdict: the attempt could not happen
// (ErrNotConfigured, ErrResolversUnreachable, or the caller's context
// ended). Problem is then nil, and the caller must retry rather than record
// anything on the challenge.
type Result struct {
	Problem *acme.Problem
	Record  []Attempt
	Err     error
	// ExpiresBy, when set on success, is the latest the authorization may
	// last: the persistUntil of the dns-persist-01 record that validated.
	ExpiresBy time.Time
}

// ErrNotConfigured is the cause of every attempt by a Validator built with
// no resolvers: it cannot look anything up, which is the CA's fault, not the
// client's. hallmark-worker refuses to start without challenge.resolvers.
var ErrNotConfigured = errors.New("validation is not configured: challenge.resolvers is empty")

// Validate runs the challenge r asks for and, for dns identifiers, the CAA
// check (RFC 8659) for the challenge's method. ctx and Config.Timeout together
// bound the whole attempt. CAA runs alongside the challenge; a challenge
// failure is reported in preference to a CAA one, and either in preference
// to the other's could-not-run error.
//
// Only Config.Timeout expiring is the client's fault. If ctx itself ends
// first (the worker is shutting down, the job timed out), the Result is not a
// verdict: Err is ctx's error. Err is also set when validation is not
// configured, and when every configured resolver failed at the transport
// level (ErrResolversUnreachable: the CA's own resolvers are down).
func (v *Validator) Validate(parent context.Context, r Request) (res Result) {
	ctx, cancel := context.WithTimeout(parent, v.cfg.Timeout)
	defer cancel()
	defer func() {
		if err := ended(parent); err != nil {
			res.Problem, res.Err = nil, fmt.Errorf("validation interrupted: %w", err)
		}
	}()

	if len(v.cfg.Resolvers) == 0 {
		return Result{Err: ErrNotConfigured}
	}
	if p := v.checkRequest(r); p != nil {
		return Result{Problem: p}
	}

	type caaAnswer struct {
		p   *acme.Problem
		err error
	}
	var caaDone chan caaAnswer
	caaCtx, caaCancel := context.WithCancel(ctx)
	defer caaCancel()
	if r.Identifier.Type == acme.IdentifierDNS {
		caaDone = make(chan caaAnswer, 1)
		go func() {
			p, err := v.checkCAA(caaCtx, r.Identifier.Value, r.Wildcard, r.Type, r.AccountURI)
			caaDone <- caaAnswer{p, err}
		}()
	}

	switch r.Type {
	case acme.ChallengeHTTP01:
		res.Record, res.Problem, res.Err = v.http01(ctx, r)
	case acme.ChallengeDNS01:
		res.Record, res.Problem, res.Err = v.dns01(ctx, r)
	case acme.ChallengeTLSALPN01:
		res.Record, res.Problem, res.Err = v.tlsALPN01(ctx, r)
	case acme.ChallengeDNSAccount01:
		res.Record, res.Problem, res.Err = v.dnsAccount01(ctx, r)
	case acme.ChallengeDNSPersist01:
		res.Record, res.Problem, res.Err = v.dnsPersist01(ctx, r, &res.ExpiresBy)
	}
	if caaDone != nil {
		if res.Problem != nil {
			caaCancel() // the verdict is already known
		}
		caa := <-caaDone
		switch {
		case res.Problem != nil:
		case caa.p != nil:
			// CAA forbids issuance whether or not the challenge could run.
			res.Problem, res.Err = caa.p, nil
		case res.Err == nil:
			res.Err = caa.err
		}
	}
	return res
}

// ended returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed: a read bounded by that deadline can return before the
// context's own timer marks it done.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// checkRequest rejects requests that no challenge may satisfy, before any
// network traffic: the identifier and token end up in DNS queries and URLs.
func (v *Validator) checkRequest(r Request) *acme.Problem {
	switch r.Type {
	case acme.ChallengeHTTP01, acme.ChallengeDNS01, acme.ChallengeTLSALPN01, acme.ChallengeDNSAccount01, acme.ChallengeDNSPersist01:
	default:
		return problem(acme.ProblemMalformed, "unknown challenge type %q", r.Type)
	}
	switch r.Identifier.Type {
	case acme.IdentifierDNS:
		if !validDNSName(r.Identifier.Value) {
			return problem(acme.ProblemMalformed, "identifier %q is not a valid DNS name", r.Identifier.Value)
		}
		// RFC 8555 §7.1.3: wildcard authorizations are satisfied through DNS
		// only (the others would prove control of one host, not the zone).
		if r.Wildcard && !r.Type.ByDNS() {
			return problem(acme.ProblemMalformed, "*.%s is a wildcard; only dns-01, dns-account-01 or dns-persist-01 can validate it, not %s", r.Identifier.Value, r.Type)
		}
	case acme.IdentifierIP:
		if _, err := parseIP(r.Identifier.Value); err != nil {
			return problem(acme.ProblemMalformed, "identifier %q is not a valid IP address", r.Identifier.Value)
		}
		if r.Wildcard {
			return problem(acme.ProblemMalformed, "an IP address identifier cannot be a wildcard")
		}
		// RFC 8738 §7: dns-01 must not be used for IP identifiers; BR
		// §3.2.2.5.8 gives dns-persist-01 a name in the reverse zone.
		if !r.Type.ForIP() {
			return problem(acme.ProblemMalformed, "%s cannot validate the IP address %s (RFC 8738 §7); use http-01, tls-alpn-01 or dns-persist-01", r.Type, r.Identifier.Value)
		}
	default:
		return problem(acme.ProblemUnsupportedIdentifier, "identifier type %q is not supported", r.Identifier.Type)
	}
	// RFC 8555 §8.3: the token "MUST NOT contain any characters outside the
	// base64url alphabet"; it becomes part of a URL path.
	if r.Token == "" || len(r.Token) > 256 || strings.Trim(r.Token, base64URLAlphabet) != "" {
		return problem(acme.ProblemMalformed, "challenge token %q is not base64url", r.Token)
	}
	if !strings.HasPrefix(r.KeyAuthorization, r.Token+".") {
		return problem(acme.ProblemServerInternal, "the key authorization does not start with the challenge token")
	}
	return nil
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func problem(t acme.ProblemType, format string, args ...any) *acme.Problem {
	return &acme.Problem{Type: t, Detail: fmt.Sprintf(format, args...)}
}

// validDNSName accepts a hostname: dot-separated labels of letters, digits,
// hyphens and underscores, 1–63 octets each, 253 in all, no trailing dot.
// Anything else (ports, slashes, spaces, "*") never reaches a query or a URL.
func validDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// parseIP parses an IP identifier: no zone, IPv4-mapped IPv6 unmapped.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q has a zone", s)
	}
	return a.Unmap(), nil
}

// truncate shortens untrusted text quoted into a problem detail.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
