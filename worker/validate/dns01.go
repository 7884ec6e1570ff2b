package validate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// maxTXTShown bounds how many wrong TXT values a problem quotes.
const maxTXTShown = 5

// dns01 looks up TXT records at _acme-challenge.<name> and looks for
// base64url(SHA-256(key authorization)) among them (RFC 8555 §8.4).
// An error with a nil problem means the lookup could not be made at all
// (ErrResolversUnreachable): no verdict.
func (v *Validator) dns01(ctx context.Context, r Request) ([]Attempt, *acme.Problem, error) {
	return v.keyAuthTXT(ctx, "_acme-challenge."+strings.TrimSuffix(r.Identifier.Value, "."), r)
}

// keyAuthTXT looks for r's key authorization digest among the TXT records
// at name: dns-01's check, and dns-account-01's at its own name.
func (v *Validator) keyAuthTXT(ctx context.Context, name string, r Request) ([]Attempt, *acme.Problem, error) {
	record := []Attempt{{Hostname: name}}
	sum := sha256.Sum256([]byte(r.KeyAuthorization))
	want := base64.RawURLEncoding.EncodeToString(sum[:])

	rrs, err := v.res.lookup(ctx, name, dns.TypeTXT)
	if err := unreachable(err); err != nil {
		return record, nil, err
	}
	if err != nil {
		return record, lookupProblem(name, err), nil
	}
	var found []string
	for _, rr := range rrs {
		txt, ok := rr.(*dns.TXT)
		if !ok {
			continue
		}
		// A TXT record's character-strings are one value (RFC 8555 §8.4
		// clients split long values this way).
		value := strings.Join(txt.Txt, "")
		if value == want {
			return record, nil, nil
		}
		found = append(found, value)
	}
	if len(found) == 0 {
		return record, problem(acme.ProblemUnauthorized, "No TXT record found at %s (want %q)", name, want), nil
	}
	shown := found
	if len(shown) > maxTXTShown {
		shown = shown[:maxTXTShown]
	}
	quoted := make([]string, len(shown))
	for i, s := range shown {
		quoted[i] = fmt.Sprintf("%q", truncate(s, 100))
	}
	more := ""
	if len(found) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(found)-len(shown))
	}
	return record, problem(acme.ProblemUnauthorized, "Incorrect TXT record at %s: expected %q, found %s%s",
		name, want, strings.Join(quoted, ", "), more), nil
}

// lookupProblem is the dns problem for a failed lookup of name.
func lookupProblem(name string, err error) *acme.Problem {
	detail := fmt.Sprintf("DNS problem: %v", err)
	var de *dnsError
	if errors.As(err, &de) && !strings.EqualFold(de.name, name) {
		detail += " (reached by following CNAMEs from " + name + ")"
	}
	if isNXDOMAIN(err) {
		detail += " - check that a DNS record exists for this domain"
	}
	return problem(acme.ProblemDNS, "%s", detail)
}
