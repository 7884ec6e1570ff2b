package validate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// caaFlagCritical is the Issuer Critical flag (RFC 8659 §4.1: bit 0, 128).
const caaFlagCritical = 128

// maxCAAReasons bounds how many non-matching records a problem describes.
const maxCAAReasons = 5

// knownCAATags are the property tags this CA understands. A critical
// property with any other tag forbids issuance (RFC 8659 §4.1). iodef,
// issuemail and issuevmc place no restriction on TLS server certificates.
var knownCAATags = map[string]bool{"issue": true, "issuewild": true, "iodef": true, "issuemail": true, "issuevmc": true}

// CheckCAA decides whether CAA (RFC 8659) lets this CA issue for identifier
// after validating it by method, for the account accountURI (RFC 8657). It
// returns nil, nil when issuance is permitted. IP identifiers have no CAA.
// A DNS failure is never permission: it is reported as a dns problem, or,
// when the check could not run at all (ErrNotConfigured,
// ErrResolversUnreachable, ctx ended), as an error with a nil problem. The
// caller must then not issue, and should retry.
func (v *Validator) CheckCAA(parent context.Context, identifier acme.Identifier, wildcard bool, method acme.ChallengeType, accountURI string) (p *acme.Problem, err error) {
	ctx, cancel := context.WithTimeout(parent, v.cfg.Timeout)
	defer cancel()
	if identifier.Type != acme.IdentifierDNS {
		return nil, nil
	}
	name := identifier.Value
	if strings.HasPrefix(name, "*.") {
		name, wildcard = name[2:], true
	}
	if !validDNSName(name) {
		return problem(acme.ProblemMalformed, "identifier %q is not a valid DNS name", identifier.Value), nil
	}
	if len(v.cfg.Resolvers) == 0 {
		return nil, ErrNotConfigured
	}
	p, err = v.checkCAA(ctx, name, wildcard, method, accountURI)
	if perr := ended(parent); perr != nil {
		// Only Config.Timeout expiring is the client's fault.
		return nil, fmt.Errorf("CAA check interrupted: %w", perr)
	}
	return p, err
}

// checkCAA climbs from name towards the root (RFC 8659 §3): the relevant
// RRset is the first non-empty CAA RRset found at name or an ancestor, the
// root itself excluded. NXDOMAIN counts as empty; any other failure stops:
// with a dns problem, or with an error when the CA's own resolvers could not
// be reached (not the client's failure; issuance is not permitted either).
//
// Every level is asked at once, as Boulder does, and the answers are
// weighed in the climb's order, so the verdict is the sequential climb's:
// an ancestor's answer (or failure) counts only when every level below it
// was empty. The climb was the long pole of a validation at one request at
// a time: three queries in a row for a name three labels deep, against the
// http-01 fetch's one lookup before its request. Asking an ancestor the
// climb would not have reached costs a query, never a different answer.
func (v *Validator) checkCAA(ctx context.Context, name string, wildcard bool, method acme.ChallengeType, accountURI string) (*acme.Problem, error) {
	subject := name
	if wildcard {
		subject = "*." + name
	}
	labels := dns.SplitDomainName(strings.ToLower(name))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the levels above the relevant RRset are not waited for
	type answer struct {
		rrs []dns.RR
		err error
	}
	domains := make([]string, len(labels))
	answers := make([]chan answer, len(labels))
	for i := range labels {
		domains[i] = strings.Join(labels[i:], ".")
		answers[i] = make(chan answer, 1)
		go func(domain string, out chan<- answer) {
			rrs, err := v.res.lookup(ctx, domain, dns.TypeCAA)
			out <- answer{rrs, err}
		}(domains[i], answers[i])
	}
	for i, domain := range domains {
		a := <-answers[i]
		rrs, err := a.rrs, a.err
		if err != nil {
			if isNXDOMAIN(err) {
				continue
			}
			if err := unreachable(err); err != nil {
				return nil, fmt.Errorf("checking CAA for %s: %w", subject, err)
			}
			// RFC 8659 §3: when the relevant RRset cannot be determined
			// because of a DNS failure, issuance is not permitted.
			return problem(acme.ProblemDNS, "While checking CAA for %s: DNS problem: %v; issuance is not permitted until CAA can be read", subject, err), nil
		}
		var caas []*dns.CAA
		for _, rr := range rrs {
			if c, ok := rr.(*dns.CAA); ok {
				caas = append(caas, c)
			}
		}
		if len(caas) == 0 {
			continue
		}
		return v.evaluateCAA(subject, domain, caas, wildcard, method, accountURI), nil
	}
	return nil, nil
}

// evaluateCAA applies the relevant RRset found at domain (RFC 8659 §4,
// RFC 8657 §3–4).
func (v *Validator) evaluateCAA(subject, domain string, caas []*dns.CAA, wildcard bool, method acme.ChallengeType, accountURI string) *acme.Problem {
	var issue, issuewild []*dns.CAA
	for _, c := range caas {
		tag := strings.ToLower(c.Tag) // RFC 8659 §4.1: tags match case-insensitively
		switch tag {
		case "issue":
			issue = append(issue, c)
		case "issuewild":
			issuewild = append(issuewild, c)
		default:
			if !knownCAATags[tag] && c.Flag&caaFlagCritical != 0 {
				return problem(acme.ProblemCAA, "CAA record for %s has a critical property %q this CA does not understand, so it may not issue for %s (RFC 8659 §4.1)",
					domain, truncate(c.Tag, 64), subject)
			}
		}
	}
	// RFC 8659 §4.3: issuewild, when present, governs wildcard names and
	// issue does not; without issuewild, issue governs both.
	relevant, tagName := issue, "issue"
	if wildcard && len(issuewild) > 0 {
		relevant, tagName = issuewild, "issuewild"
	}
	if len(relevant) == 0 {
		return nil
	}
	var reasons []string
	for _, c := range relevant {
		why := v.caaMatch(c.Value, method, accountURI)
		if why == "" {
			return nil
		}
		reasons = append(reasons, fmt.Sprintf("%s %q %s", tagName, truncate(c.Value, 128), why))
	}
	more := ""
	if len(reasons) > maxCAAReasons {
		more = fmt.Sprintf("; and %d more", len(reasons)-maxCAAReasons)
		reasons = reasons[:maxCAAReasons]
	}
	return problem(acme.ProblemCAA, "CAA record for %s prevents issuance for %s by this CA (%s): %s%s",
		domain, subject, strings.Join(v.cfg.CAAIdentities, ", "), strings.Join(reasons, "; "), more)
}

// caaMatch reports why one issue/issuewild value does not authorize this
// CA, or "" when it does.
func (v *Validator) caaMatch(value string, method acme.ChallengeType, accountURI string) string {
	issuer, params, err := parseIssueValue(value)
	if err != nil {
		// RFC 8659 §4.2: a value that does not parse authorizes no one.
		return "is malformed (" + err.Error() + ")"
	}
	if issuer == "" {
		return "authorizes no CA"
	}
	ours := false
	for _, id := range v.cfg.CAAIdentities {
		if strings.EqualFold(issuer, id) {
			ours = true
			break
		}
	}
	if !ours {
		return "names another CA"
	}
	for _, p := range params {
		switch p.tag {
		case "accounturi":
			// RFC 8657 §3: the CA MUST NOT issue unless the account URI
			// matches the parameter exactly.
			if p.value != accountURI {
				return "is restricted to another ACME account (accounturi)"
			}
		case "validationmethods":
			// RFC 8657 §4: the CA MUST NOT issue unless the validation
			// method used is one of those listed.
			methods, err := parseValidationMethods(p.value)
			if err != nil {
				return "has a malformed validationmethods parameter"
			}
			found := false
			for _, m := range methods {
				if m == string(method) {
					found = true
					break
				}
			}
			if !found {
				return fmt.Sprintf("does not allow the %s validation method (validationmethods)", method)
			}
		}
		// Unknown parameters are ignored (RFC 8659 §4.2).
	}
	return ""
}

// caaParam is one "tag=value" parameter of an issue or issuewild value.
type caaParam struct {
	tag   string // lower-cased
	value string
}

// parseIssueValue parses the value of an issue or issuewild property
// (RFC 8659 §4.2):
//
//	issue-value = *WSP [issuer-domain-name *WSP] [";" *WSP [parameters *WSP]]
//	issuer-domain-name = label *("." label)
//	label = (ALPHA / DIGIT) *( *("-") (ALPHA / DIGIT))
//	parameters = (parameter *WSP ";" *WSP parameters) / parameter
//	parameter = tag *WSP "=" *WSP value
//	tag = (ALPHA / DIGIT) *( *("-") (ALPHA / DIGIT))
//	value = *(%x21-3A / %x3C-7E)
//
// Parameter tags are returned lower-cased; a tag given twice is an error,
// so "accounturi" cannot be satisfied by one copy and contradicted by another.
func parseIssueValue(s string) (issuer string, params []caaParam, err error) {
	s = strings.Trim(s, " \t")
	head, tail, hasParams := strings.Cut(s, ";")
	issuer = strings.TrimRight(head, " \t")
	if issuer != "" && !isCAADomain(issuer) {
		return "", nil, fmt.Errorf("%q is not an issuer domain name", truncate(issuer, 64))
	}
	if !hasParams {
		return issuer, nil, nil
	}
	tail = strings.Trim(tail, " \t")
	if tail == "" {
		return issuer, nil, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(tail, ";") {
		part = strings.Trim(part, " \t")
		tag, value, ok := strings.Cut(part, "=")
		if !ok {
			return "", nil, fmt.Errorf("parameter %q has no \"=\"", truncate(part, 64))
		}
		tag = strings.TrimRight(tag, " \t")
		value = strings.TrimLeft(value, " \t")
		if !isCAALabel(tag) {
			return "", nil, fmt.Errorf("parameter tag %q is not valid", truncate(tag, 64))
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; c < 0x21 || c > 0x7e || c == ';' {
				return "", nil, fmt.Errorf("parameter %s has a character not allowed in a value", tag)
			}
		}
		tag = strings.ToLower(tag)
		if seen[tag] {
			return "", nil, fmt.Errorf("parameter %s appears twice", tag)
		}
		seen[tag] = true
		params = append(params, caaParam{tag: tag, value: value})
	}
	return issuer, params, nil
}

// isCAADomain reports whether s is an issuer-domain-name.
func isCAADomain(s string) bool {
	for _, label := range strings.Split(s, ".") {
		if !isCAALabel(label) {
			return false
		}
	}
	return true
}

// isCAALabel matches (ALPHA / DIGIT) *( *("-") (ALPHA / DIGIT)).
func isCAALabel(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// parseValidationMethods parses RFC 8657 §4's
// "value = [*(label ",") label]", label = 1*(ALPHA / DIGIT / "-").
func parseValidationMethods(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	methods := strings.Split(s, ",")
	for _, m := range methods {
		if m == "" {
			return nil, errors.New("empty method")
		}
		for i := 0; i < len(m); i++ {
			c := m[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return nil, errors.New("invalid character")
			}
		}
	}
	return methods, nil
}
