package validate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// PersistLabel is the label of dns-persist-01's validation domain name;
// PersistIPLabel is an IP address's, under its reverse zone name (CA/B
// Forum BR §3.2.2.5.8).
const (
	PersistLabel   = "_validation-persist"
	PersistIPLabel = "_ip-validation-persist"
)

// MaxIssuerDomainNames is the most issuer domain names a dns-persist-01
// challenge may carry (draft-ietf-acme-dns-persist-01 §3.1).
const MaxIssuerDomainNames = 10

// IssuerDomainNames are the names a dns-persist-01 record may give as its
// issuer-domain-name: the CA's CAA identities, lower-cased, without a
// trailing dot, at most MaxIssuerDomainNames (the challenge object's
// issuer-domain-names).
func IssuerDomainNames(caaIdentities []string) []string {
	var out []string
	for _, id := range caaIdentities {
		if len(out) == MaxIssuerDomainNames {
			break
		}
		out = append(out, strings.ToLower(strings.TrimSuffix(id, ".")))
	}
	return out
}

// dnsPersist01 looks for a standing TXT record binding the name to this CA
// and the account (draft-ietf-acme-dns-persist-01 §4): at
// _validation-persist.<name>, or, for a record with policy=wildcard, at
// the same label of an ancestor of at least two labels (§6: the validated
// name is then a proper suffix of the requested one); for an IP address at
// _ip-validation-persist.<reverse zone name> (persistNames). A wildcard needs
// policy=wildcard wherever its record is (§5). Every level is asked at
// once and the answers weighed nearest first, as for CAA.
func (v *Validator) dnsPersist01(ctx context.Context, r Request, until *time.Time) ([]Attempt, *acme.Problem, error) {
	issuers := IssuerDomainNames(v.cfg.CAAIdentities)
	if len(issuers) == 0 {
		return nil, problem(acme.ProblemServerInternal, "dns-persist-01 is offered but this CA names no issuer domain name (server.caa_identities is empty)"), nil
	}
	names := persistNames(r.Identifier)
	if len(names) == 0 {
		return nil, problem(acme.ProblemMalformed, "%s has no reverse zone name", r.Identifier.Value), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the farther levels are not waited for once one answers
	type answer struct {
		rrs []dns.RR
		err error
	}
	answers := make([]chan answer, len(names))
	record := make([]Attempt, len(names))
	for i, name := range names {
		record[i] = Attempt{Hostname: name}
		answers[i] = make(chan answer, 1)
		go func(name string, out chan<- answer) {
			rrs, err := v.res.lookup(ctx, name, dns.TypeTXT)
			out <- answer{rrs, err}
		}(name, answers[i])
	}
	var w persistWeighing
	for i, name := range names {
		a := <-answers[i]
		if a.err != nil {
			if err := unreachable(a.err); err != nil {
				return record, nil, err
			}
			if !isNXDOMAIN(a.err) && w.dnsProblem == nil {
				w.dnsProblem = lookupProblem(name, a.err)
			}
			continue
		}
		if rec, ok := w.weigh(v, name, a.rrs, issuers, r, i > 0, time.Now()); ok {
			*until = rec.PersistUntil
			return record[:i+1], nil, nil
		}
	}
	return record, w.problem(names[0], issuers), nil
}

// persistNames are where dns-persist-01 looks for id, nearest first: for
// a name, its own _validation-persist name and its ancestors' of at least
// two labels; for an IP address, _ip-validation-persist under its reverse
// zone name alone (an ancestor there is a network, not the address).
func persistNames(id acme.Identifier) []string {
	if id.Type == acme.IdentifierIP {
		rev, err := dns.ReverseAddr(id.Value)
		if err != nil {
			return nil
		}
		return []string{PersistIPLabel + "." + strings.TrimSuffix(rev, ".")}
	}
	labels := dns.SplitDomainName(strings.ToLower(strings.TrimSuffix(id.Value, ".")))
	var names []string
	for i := range labels {
		if i > 0 && len(labels)-i < 2 {
			break
		}
		names = append(names, PersistLabel+"."+strings.Join(labels[i:], "."))
	}
	return names
}

// persistWeighing gathers why the records seen so far do not validate.
type persistWeighing struct {
	malformed  []string // our records that do not parse
	refused    []string // our records that parse but do not apply
	dnsProblem *acme.Problem
}

// weigh returns the first TXT record among rrs, found at name (an
// ancestor's when ancestor), that validates r; otherwise it notes why each
// of this CA's records there does not. Other CAs' records are ignored
// (§4.1.2).
func (w *persistWeighing) weigh(v *Validator, name string, rrs []dns.RR, issuers []string, r Request, ancestor bool, now time.Time) (PersistRecord, bool) {
	domain := name[strings.IndexByte(name, '.')+1:] // the name the record is for, hashed in its accounturi
	for _, rr := range rrs {
		txt, ok := rr.(*dns.TXT)
		if !ok {
			continue
		}
		value := strings.Join(txt.Txt, "")
		rec, err := ParsePersistRecord(value)
		if rec.Issuer == "" || !containsFold(issuers, rec.Issuer) {
			continue
		}
		quoted := fmt.Sprintf("%s %q", name, truncate(value, 160))
		ours := false
		if err == nil {
			ours, err = v.accountMatches(rec.AccountURI, domain, r)
		}
		switch {
		case err != nil:
			w.malformed = append(w.malformed, quoted+" is malformed: "+err.Error())
		case !ours:
			w.refused = append(w.refused, quoted+" names another account (accounturi)")
		case !rec.PersistUntil.IsZero() && now.After(rec.PersistUntil):
			w.refused = append(w.refused, fmt.Sprintf("%s expired at its persistUntil, %s", quoted, rec.PersistUntil.Format(time.RFC3339)))
		case r.Wildcard && !rec.Wildcard:
			w.refused = append(w.refused, fmt.Sprintf("%s has no policy=wildcard, which *.%s needs", quoted, r.Identifier.Value))
		case ancestor && !rec.Wildcard:
			w.refused = append(w.refused, fmt.Sprintf("%s is for another name and has no policy=wildcard, which a subdomain needs", quoted))
		default:
			return rec, true
		}
	}
	return PersistRecord{}, false
}

// problem is the verdict when no record validated (§9.3.1): malformed when
// one of this CA's records does not parse, a dns problem when a level
// could not be read, unauthorized otherwise.
func (w *persistWeighing) problem(name string, issuers []string) *acme.Problem {
	switch {
	case len(w.malformed) > 0:
		return problem(acme.ProblemMalformed, "%s", joinShown(append(w.malformed, w.refused...)))
	case w.dnsProblem != nil:
		return w.dnsProblem
	case len(w.refused) > 0:
		return problem(acme.ProblemUnauthorized, "%s", joinShown(w.refused))
	}
	return problem(acme.ProblemUnauthorized, "No TXT record at %s names this CA (%s) and this account; publish \"%s; accounturi=<your account URL>\"",
		name, strings.Join(issuers, ", "), issuers[0])
}

// joinShown joins at most maxTXTShown reasons, saying how many are left out.
func joinShown(reasons []string) string {
	more := ""
	if len(reasons) > maxTXTShown {
		more = fmt.Sprintf("; and %d more", len(reasons)-maxTXTShown)
		reasons = reasons[:maxTXTShown]
	}
	return strings.Join(reasons, "; ") + more
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
