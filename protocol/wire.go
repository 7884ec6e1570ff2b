package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/store"
)

// The wire: how payloads are read and how resources, times and header
// values are written (RFC 8555 §6, §7.1).

// decodePayload reads a JSON object payload. A member named twice at any
// depth, or twice but for letter case, is refused (jws.UniqueMembers):
// encoding/json would keep the last, another parser the first.
func decodePayload(p *post, what string, v any) error {
	trimmed := bytes.TrimSpace(p.payload)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return acme.Malformed("the %s payload must be a JSON object", what)
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		return acme.Malformed("the %s payload is not valid: %v", what, jsonErr(err))
	}
	if err := jws.UniqueMembers(trimmed); err != nil {
		return acme.Malformed("the %s payload is not valid: %v; send each member once", what, err)
	}
	return nil
}

// jsonErr is a json error as a client may see it (no Go type names).
func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("JSON syntax error at offset %d", se.Offset)
	}
	return "invalid JSON"
}

// writeJSON answers a resource (RFC 8555 §7.1) with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return acme.Internal(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return nil
}

// retryAfter formats a duration as Retry-After seconds, at least 1.
func retryAfter(d time.Duration) string {
	sec := int(math.Ceil(d.Seconds()))
	if sec < 1 {
		sec = 1
	}
	return strconv.Itoa(sec)
}

// link is a Link header value (RFC 8288).
func link(url, rel string) string { return "<" + url + `>;rel="` + rel + `"` }

// rfc3339 is t as a resource's date-time (RFC 8555 §7.1), in UTC.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// rfc3339p is rfc3339 of a time that may be absent: "" (omitted) for nil.
func rfc3339p(t *time.Time) string {
	if t == nil {
		return ""
	}
	return rfc3339(*t)
}

// notFound is the problem for an unknown resource: malformed with 404.
func notFound(what, id string) error {
	return malformedAs(http.StatusNotFound, "there is no %s %q", what, id)
}

// malformedAs is malformed answered with status rather than 400.
func malformedAs(status int, format string, args ...any) error {
	return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed, Status: status, Detail: fmt.Sprintf(format, args...)}}
}

// challengeDoc is the challenge object (RFC 8555 §7.1.5, §8).
type challengeDoc struct {
	Type             acme.ChallengeType `json:"type"`
	URL              string             `json:"url"`
	Status           acme.Status        `json:"status"`
	Token            string             `json:"token,omitempty"`
	Validated        string             `json:"validated,omitempty"`
	Error            *acme.Problem      `json:"error,omitempty"`
	ValidationRecord json.RawMessage    `json:"validationRecord,omitempty"`
	// AccountURI and IssuerDomainNames are dns-persist-01's
	// (draft-ietf-acme-dns-persist-01 §3.1), which has no token: the
	// account the record must name, and the CA's names it may use; draft
	// -02 renamed the latter issuerDomainNames.
	AccountURI          string   `json:"accounturi,omitempty"`
	IssuerDomainNames   []string `json:"issuer-domain-names,omitempty"`
	IssuerDomainNames02 []string `json:"issuerDomainNames,omitempty"`
}

// challengeDoc is c as its account, accountID, sees it.
func (s *Server) challengeDoc(c *store.Challenge, accountID string) challengeDoc {
	d := challengeDoc{Type: c.Type, URL: s.challURL(c.ID), Status: c.Status, Token: c.Token,
		Validated: rfc3339p(c.Validated), Error: c.Error}
	if c.Type == acme.ChallengeDNSPersist01 {
		d.Token, d.AccountURI = "", s.accountURL(accountID)
		d.IssuerDomainNames = issuerDomainNames(s.cfg.Server.CAAIdentities)
		d.IssuerDomainNames02 = d.IssuerDomainNames
	}
	if len(c.ValidationRecord) > 0 && json.Valid(c.ValidationRecord) {
		d.ValidationRecord = c.ValidationRecord
	}
	return d
}

// issuerDomainNames are the CAA identities as dns-persist-01's challenge
// lists them: lower-case, no trailing dot, at most 10 (the worker accepts
// the same, validate.IssuerDomainNames).
func issuerDomainNames(caaIdentities []string) []string {
	var out []string
	for _, id := range caaIdentities {
		if len(out) == 10 {
			break
		}
		out = append(out, strings.ToLower(strings.TrimSuffix(id, ".")))
	}
	return out
}
