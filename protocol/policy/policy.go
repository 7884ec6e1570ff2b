package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
)

// DefaultMaxIdentifiers applies when the configuration sets no maximum.
const DefaultMaxIdentifiers = 100

// Policy is the operator's identifier policy, parsed once.
type Policy struct {
	allowDomains, denyDomains []string
	allowIPs, denyIPs         []netip.Prefix
	max                       int
}

// Config is the identifier allow and deny lists, [policy].
type Config struct {
	AllowDomains   []string `toml:"allow_domains"` // suffixes; empty allows any
	DenyDomains    []string `toml:"deny_domains"`
	AllowIPRanges  []string `toml:"allow_ip_ranges"` // CIDRs; empty allows any
	DenyIPRanges   []string `toml:"deny_ip_ranges"`
	MaxIdentifiers int      `toml:"max_identifiers"`
}

// Validate reports every range of [policy] that does not parse, naming its key.
func (c Config) Validate() error {
	var errs []error
	for _, k := range []struct {
		key string
		in  []string
	}{{"policy.allow_ip_ranges", c.AllowIPRanges}, {"policy.deny_ip_ranges", c.DenyIPRanges}} {
		for _, r := range k.in {
			if _, err := ParseIPRanges(k.key, []string{r}); err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not a CIDR range (e.g. \"10.0.0.0/8\", \"fd00::/8\")", k.key, r))
			}
		}
	}
	return errors.Join(errs...)
}

// ParseIPRanges parses the CIDR ranges of an *_ranges key. An IPv4-mapped
// range ("::ffff:10.0.0.0/104") means its IPv4 range (10.0.0.0/8), so a
// range matches an address whichever way either is written; host bits are
// dropped. key names the setting in the error.
func ParseIPRanges(key string, in []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for _, c := range in {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a CIDR range: %w", key, c, err)
		}
		bits := pfx.Bits()
		if pfx.Addr().Is4In6() && bits >= 96 {
			bits -= 96
		}
		out = append(out, netip.PrefixFrom(pfx.Addr().Unmap(), bits).Masked())
	}
	return out, nil
}

// New parses cfg. Domain entries are suffixes matched on label boundaries
// ("example.com" covers "a.example.com" but not "evilexample.com"); a
// leading "*." or "." on an entry is ignored. IP entries are CIDRs.
func New(cfg Config) (*Policy, error) {
	p := &Policy{max: cfg.MaxIdentifiers}
	if p.max <= 0 {
		p.max = DefaultMaxIdentifiers
	}
	var err error
	if p.allowDomains, err = domains("policy.allow_domains", cfg.AllowDomains); err != nil {
		return nil, err
	}
	if p.denyDomains, err = domains("policy.deny_domains", cfg.DenyDomains); err != nil {
		return nil, err
	}
	if p.allowIPs, err = ParseIPRanges("policy.allow_ip_ranges", cfg.AllowIPRanges); err != nil {
		return nil, err
	}
	if p.denyIPs, err = ParseIPRanges("policy.deny_ip_ranges", cfg.DenyIPRanges); err != nil {
		return nil, err
	}
	return p, nil
}

func domains(key string, in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, d := range in {
		n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
		n = strings.TrimPrefix(strings.TrimPrefix(n, "*."), ".")
		if n == "" {
			return nil, fmt.Errorf("%s: %q is not a domain name", key, d)
		}
		if reason := dnsSyntax(n, true); reason != "" {
			return nil, fmt.Errorf("%s: %q %s", key, d, reason)
		}
		out = append(out, n)
	}
	return out, nil
}

// Check validates and normalises an order's identifiers for profile: DNS
// names lower-cased without a trailing dot, IP addresses in canonical form
// (RFC 5952 for IPv6), duplicates removed, order kept. Malformed syntax is
// malformed; a type the profile does not issue for is unsupportedIdentifier;
// a wildcard the profile does not allow, a name outside the allow list or
// inside the deny list, and too many identifiers are rejectedIdentifier.
// Several failures are one problem whose subproblems name each identifier
// (RFC 8555 §6.7.1); its type is theirs when they agree, else compound.
func (p *Policy) Check(ids []acme.Identifier, prof profile.Profile) ([]acme.Identifier, error) {
	if len(ids) == 0 {
		return nil, acme.Malformed("an order must name at least one identifier")
	}
	out := make([]acme.Identifier, 0, len(ids))
	seen := make(map[acme.Identifier]bool, len(ids))
	var probs []acme.Problem
	for _, id := range ids {
		norm, prob := p.checkOne(id, prof)
		if prob != nil {
			probs = append(probs, *prob)
			continue
		}
		if seen[norm] {
			continue
		}
		seen[norm] = true
		out = append(out, norm)
	}
	if len(probs) > 0 {
		return nil, combine(probs)
	}
	if len(out) > p.max {
		return nil, acme.New(acme.ProblemRejectedIdentifier, "an order may name at most %d identifiers; this one names %d", p.max, len(out))
	}
	return out, nil
}

func combine(probs []acme.Problem) error {
	if len(probs) == 1 {
		pr := probs[0]
		return &acme.Error{Problem: acme.Problem{
			Type:        pr.Type,
			Detail:      fmt.Sprintf("cannot issue for %q: %s", pr.Identifier.Value, pr.Detail),
			Subproblems: probs,
		}}
	}
	typ := probs[0].Type
	for _, pr := range probs[1:] {
		if pr.Type != typ {
			typ = acme.ProblemCompound
			break
		}
	}
	return &acme.Error{Problem: acme.Problem{
		Type: typ,
		Detail: fmt.Sprintf("cannot issue for %d identifiers, first %q: %s (the subproblems list each)",
			len(probs), probs[0].Identifier.Value, probs[0].Detail),
		Subproblems: probs,
	}}
}

func problem(t acme.ProblemType, id acme.Identifier, format string, args ...any) *acme.Problem {
	return &acme.Problem{Type: t, Detail: fmt.Sprintf(format, args...), Identifier: &id}
}

func allowsType(prof profile.Profile, t acme.IdentifierType) bool {
	types := prof.IdentifierTypes
	if len(types) == 0 {
		// RFC 8555's baseline; IP identifiers (RFC 8738) are opt-in.
		types = []string{string(acme.IdentifierDNS)}
	}
	for _, x := range types {
		if x == string(t) {
			return true
		}
	}
	return false
}

func (p *Policy) checkOne(id acme.Identifier, prof profile.Profile) (acme.Identifier, *acme.Problem) {
	switch id.Type {
	case acme.IdentifierDNS:
		if !allowsType(prof, id.Type) {
			return id, problem(acme.ProblemUnsupportedIdentifier, id, "this profile does not issue for DNS names")
		}
		return p.checkDNS(id, prof)
	case acme.IdentifierIP:
		if !allowsType(prof, id.Type) {
			return id, problem(acme.ProblemUnsupportedIdentifier, id, "this profile does not issue for IP addresses")
		}
		return p.checkIP(id)
	}
	return id, problem(acme.ProblemUnsupportedIdentifier, id, "identifier type %q is not supported; use \"dns\" or \"ip\"", id.Type)
}

func (p *Policy) checkDNS(id acme.Identifier, prof profile.Profile) (acme.Identifier, *acme.Problem) {
	name := strings.TrimSuffix(strings.ToLower(id.Value), ".")
	norm := acme.Identifier{Type: acme.IdentifierDNS, Value: name}
	if reason := dnsSyntax(name, false); reason != "" {
		return id, problem(acme.ProblemMalformed, id, "the DNS name %s", reason)
	}
	base := name
	if wild := strings.HasPrefix(name, "*."); wild {
		if !prof.AllowWildcards {
			return id, problem(acme.ProblemRejectedIdentifier, norm, "this profile does not issue wildcard certificates")
		}
		base = name[2:]
	}
	for _, d := range p.denyDomains {
		// A wildcard "*.B" would also cover a denied name one label below B.
		if under(base, d) || (base != name && parent(d) == base) {
			return id, problem(acme.ProblemRejectedIdentifier, norm, "the CA's policy forbids certificates for this name")
		}
	}
	if len(p.allowDomains) > 0 {
		ok := false
		for _, a := range p.allowDomains {
			if under(base, a) {
				ok = true
				break
			}
		}
		if !ok {
			return id, problem(acme.ProblemRejectedIdentifier, norm, "the CA's policy allows certificates only for names under %s", strings.Join(p.allowDomains, ", "))
		}
	}
	return norm, nil
}

// under reports whether name is suffix or a subdomain of it, on a label
// boundary.
func under(name, suffix string) bool {
	return name == suffix || strings.HasSuffix(name, "."+suffix)
}

func parent(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return ""
}

// DomainSyntax returns why name, a domain outside an identifier (a
// contact address's), is not one Hallmark accepts, or "": the syntax of a
// DNS identifier (ASCII letters, digits and hyphens, internationalized
// names as valid A-labels, at least two labels), without wildcards. Letter
// case does not matter.
func DomainSyntax(name string) string {
	if strings.Contains(name, "*") {
		return "has a \"*\"; a wildcard is no domain of a mailbox"
	}
	return dnsSyntax(strings.ToLower(name), false)
}

// dnsSyntax returns why name (lower-case, no trailing dot) is not an
// acceptable DNS identifier, or "". A wildcard is accepted only as the whole
// leftmost label, unless bare is set (policy list entries).
func dnsSyntax(name string, bare bool) string {
	if name == "" {
		return "is empty"
	}
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			return "contains non-ASCII characters; send internationalised names in punycode (xn--...)"
		}
	}
	if len(name) > 253 {
		return fmt.Sprintf("is %d characters long; at most 253 are allowed", len(name))
	}
	labels := strings.Split(name, ".")
	for i, l := range labels {
		if l == "*" && i == 0 && !bare {
			if len(labels) < 3 {
				return "is a wildcard over a single label; \"*.\" must be followed by at least two labels"
			}
			continue
		}
		if strings.Contains(l, "*") {
			return "has a \"*\" that is not the whole leftmost label; a wildcard must look like \"*.example.com\""
		}
		if r := labelSyntax(l); r != "" {
			return r
		}
	}
	if len(labels) < 2 && !bare {
		return "has a single label; a fully qualified name such as \"host.example.com\" is needed"
	}
	if allDigits(labels[len(labels)-1]) {
		return "looks like an IP address; use an identifier of type \"ip\" for addresses"
	}
	return ""
}

func labelSyntax(l string) string {
	if l == "" {
		return "has an empty label"
	}
	if len(l) > 63 {
		return fmt.Sprintf("has a label of %d characters; at most 63 are allowed", len(l))
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Sprintf("has a label %q with a character other than letters, digits and hyphens", l)
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Sprintf("has a label %q that starts or ends with a hyphen", l)
	}
	if len(l) >= 4 && l[2:4] == "--" {
		if !strings.HasPrefix(l, "xn--") {
			return fmt.Sprintf("has a label %q with hyphens in the third and fourth positions, which are reserved", l)
		}
		// Registration, not plain Punycode: a label must decode to one a
		// registry could have issued (IDNA2008 via UTS #46), so "xn--a-ecp"
		// ("a⒈", a disallowed rune) is refused, not certified.
		if _, err := idna.Registration.ToUnicode(l); err != nil {
			return fmt.Sprintf("has a label %q that is not a valid internationalized label (%v)", l, err)
		}
	}
	return ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func (p *Policy) checkIP(id acme.Identifier) (acme.Identifier, *acme.Problem) {
	addr, err := netip.ParseAddr(id.Value)
	if err != nil {
		return id, problem(acme.ProblemMalformed, id, "the value is not an IPv4 or IPv6 address")
	}
	if addr.Zone() != "" {
		return id, problem(acme.ProblemMalformed, id, "an IP address identifier cannot carry a zone (%%%s)", addr.Zone())
	}
	addr = addr.Unmap()
	norm := acme.Identifier{Type: acme.IdentifierIP, Value: addr.String()}
	if addr.IsUnspecified() || addr.IsMulticast() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return id, problem(acme.ProblemRejectedIdentifier, norm, "unspecified, multicast and broadcast addresses cannot be certified")
	}
	for _, d := range p.denyIPs {
		if d.Contains(addr) {
			return id, problem(acme.ProblemRejectedIdentifier, norm, "the CA's policy forbids certificates for %s", d)
		}
	}
	if len(p.allowIPs) > 0 {
		for _, a := range p.allowIPs {
			if a.Contains(addr) {
				return norm, nil
			}
		}
		return id, problem(acme.ProblemRejectedIdentifier, norm, "the CA's policy allows certificates only for addresses in %s", prefixList(p.allowIPs))
	}
	return norm, nil
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
