package validate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PersistRecord is one _validation-persist TXT value of dns-persist-01
// (draft-ietf-acme-dns-persist-01 §4), an RFC 8659 issue-value.
type PersistRecord struct {
	Issuer     string // the issuer-domain-name, lower-cased; "" names no CA
	AccountURI string // the accounturi parameter, compared exactly
	// Wildcard is policy=wildcard (any case): the record then also covers
	// the name's wildcard and its subdomains.
	Wildcard bool
	// PersistUntil is the persistUntil parameter (Unix seconds, UTC); zero
	// when absent. After it the record validates nothing new.
	PersistUntil time.Time
}

// ParsePersistRecord parses one TXT value (its character-strings joined).
// A parameter given twice, an accounturi missing or empty, or a
// persistUntil that is not a base-10 integer make the record malformed;
// unknown parameters are ignored, and a policy other than wildcard is as
// if absent (§4 items 1, 4, 5). A malformed record still returns the
// issuer it names, when that much parses, so that a CA can ignore another
// CA's malformed record (§4.1.2) rather than report it.
func ParsePersistRecord(s string) (PersistRecord, error) {
	head, _, _ := strings.Cut(strings.Trim(s, " \t"), ";")
	named := PersistRecord{}
	if h := strings.TrimRight(head, " \t"); isCAADomain(h) {
		named.Issuer = strings.ToLower(h)
	}
	issuer, params, err := parseIssueValue(s)
	if err != nil {
		return named, fmt.Errorf("it is not an RFC 8659 issue-value: %w", err)
	}
	rec := PersistRecord{Issuer: strings.ToLower(issuer)}
	for _, p := range params { // tags are lower-cased and unique
		switch p.tag {
		case "accounturi":
			rec.AccountURI = p.value
		case "policy":
			rec.Wildcard = strings.EqualFold(p.value, "wildcard")
		case "persistuntil":
			t, err := parseUnixSeconds(p.value)
			if err != nil {
				return named, fmt.Errorf("persistUntil %q %w", truncate(p.value, 32), err)
			}
			rec.PersistUntil = t
		}
	}
	if rec.AccountURI == "" {
		return named, errors.New("it has no accounturi parameter")
	}
	return rec, nil
}

// parseUnixSeconds reads a base-10 count of seconds since 1970: digits
// only (no sign, no space), at most 12 of them (past the year 33000).
func parseUnixSeconds(s string) (time.Time, error) {
	if s == "" || len(s) > 12 || strings.Trim(s, "0123456789") != "" {
		return time.Time{}, errors.New("is not a base-10 integer of seconds")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("is not a base-10 integer of seconds")
	}
	return time.Unix(n, 0).UTC(), nil
}
