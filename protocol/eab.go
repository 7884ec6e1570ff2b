package protocol

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/netip"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/store"
)

// eabJWS is the externalAccountBinding member of newAccount: a flattened
// JWS (RFC 8555 §7.3.4).
type eabJWS struct {
	Protected string `json:"protected"`
	Payload   string `json:"payload"`
	Signature string `json:"signature"`
}

// eabMACs are the MAC algorithms the binding may use. RFC 8555 §7.3.4: the
// "alg" MUST indicate a MAC-based algorithm.
var eabMACs = map[string]func() hash.Hash{"HS256": sha256.New, "HS384": sha512.New384, "HS512": sha512.New}

// verifyEAB checks newAccount's external account binding (RFC 8555 §7.3.4)
// and returns the key id it names. It does not bind: the store binds the
// key and creates the account in one transaction.
func (s *Server) verifyEAB(ctx context.Context, raw json.RawMessage, p *post) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", acme.New(acme.ProblemExternalAccountRequired,
			"this server requires an external account binding (externalAccountBinding): ask the operator for a key id and MAC key (hallmark eab create)")
	}
	var j eabJWS
	if err := json.Unmarshal(raw, &j); err != nil || j.Protected == "" || j.Signature == "" {
		return "", acme.Malformed("externalAccountBinding must be a flattened JWS with protected, payload and signature")
	}
	hdrJSON, err := base64.RawURLEncoding.DecodeString(j.Protected)
	if err != nil {
		return "", acme.Malformed("externalAccountBinding: the protected header is not base64url")
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(hdrJSON, &hdr); err != nil {
		return "", acme.Malformed("externalAccountBinding: the protected header is not a JSON object")
	}
	if err := jws.UniqueMembers(hdrJSON); err != nil {
		return "", acme.Malformed("externalAccountBinding: the protected header is not valid: %v; send each member once", err)
	}
	str := func(name string) string {
		var v string
		_ = json.Unmarshal(hdr[name], &v)
		return v
	}
	alg, kid, url := str("alg"), str("kid"), str("url")
	newHash, ok := eabMACs[alg]
	if !ok {
		return "", acme.Malformed("externalAccountBinding: alg %q is not a MAC algorithm this server accepts (HS256, HS384, HS512)", alg)
	}
	// "The "nonce" field MUST NOT be present."
	if _, has := hdr["nonce"]; has {
		return "", acme.Malformed("externalAccountBinding: the protected header must not carry a nonce")
	}
	// "The "url" field MUST be set to the same value as the outer JWS."
	if url != p.url {
		return "", acme.Malformed("externalAccountBinding: url %q must equal the newAccount URL %q", url, p.url)
	}
	if kid == "" {
		return "", acme.Malformed("externalAccountBinding: the protected header has no kid (the key id the operator gave you)")
	}
	key, err := s.st.accounts.EABByID(ctx, kid)
	if errors.Is(err, store.ErrNotFound) {
		return "", acme.Unauthorized("externalAccountBinding: there is no external account key %q", kid)
	}
	if err != nil {
		return "", s.storeErr(err, "reading the external account key")
	}
	sig, err := base64.RawURLEncoding.DecodeString(j.Signature)
	if err != nil {
		return "", acme.Malformed("externalAccountBinding: the signature is not base64url")
	}
	mac := hmac.New(newHash, key.MACKey)
	mac.Write([]byte(j.Protected + "." + j.Payload))
	if !hmac.Equal(mac.Sum(nil), sig) {
		return "", acme.Unauthorized("externalAccountBinding: the MAC does not verify with key %q; check the MAC key (base64url as issued)", kid)
	}
	if key.AccountID != "" {
		return "", acme.Unauthorized("externalAccountBinding: key %q already bound an account; ask the operator for a new key", kid)
	}
	// "the payload of this JWS is the JWK of the account key" — the same
	// key that signed the outer JWS.
	payload, err := base64.RawURLEncoding.DecodeString(j.Payload)
	if err != nil {
		return "", acme.Malformed("externalAccountBinding: the payload is not base64url")
	}
	if err := jws.UniqueMembers(payload); err != nil {
		return "", acme.Malformed("externalAccountBinding: the payload is not valid: %v; send each member once", err)
	}
	inner, err := parseKey(payload)
	if err != nil {
		return "", acme.Malformed("externalAccountBinding: the payload is not the account's public JWK")
	}
	if _, thumb, err := jwkIdentity(inner); err != nil || thumb != p.thumb {
		return "", acme.Unauthorized("externalAccountBinding: the payload's key is not the key that signed this request")
	}
	return kid, nil
}

// createAccount creates the account, bound to the external account key
// keyID when it is set.
// The account's creation is on the issuance trail, in its transaction.
func (s *Server) createAccount(ctx context.Context, a *store.Account, keyID string) (*store.Account, error) {
	acct, err := s.st.accounts.AccountCreateTrailed(ctx, a, keyID, trailAccount(ctx, a, keyID))
	if keyID != "" && errors.Is(err, store.ErrConflict) && acct == nil {
		return nil, acme.Unauthorized("externalAccountBinding: key %q already bound an account; ask the operator for a new key", keyID)
	}
	return acct, err
}

// binding is the external account key of an account, nil when it has none.
// An account is bound only as it is created (AccountCreateBound), so one
// found unbound stays unbound: s.unbound remembers those, and newOrder skips
// the read for them. A bound account's key is read every time; its limits
// are the operator's to change.
func (s *Server) binding(ctx context.Context, acctID string) (*store.EABKey, error) {
	if _, ok := s.unbound.get(acctID); ok {
		return nil, nil
	}
	k, err := s.st.accounts.AccountEAB(ctx, acctID)
	if errors.Is(err, store.ErrNotFound) {
		s.unbound.put(acctID, struct{}{})
		return nil, nil
	}
	if err != nil {
		return nil, s.storeErr(err, "reading the account's external binding")
	}
	return k, nil
}

// checkBinding refuses identifiers outside a binding's limits with
// rejectedIdentifier.
func checkBinding(k *store.EABKey, ids []acme.Identifier) error {
	if k == nil || !k.Limited() {
		return nil
	}
	for _, id := range ids {
		if !bindingCovers(k, id) {
			return &acme.Error{Problem: acme.Problem{Type: acme.ProblemRejectedIdentifier, Identifier: &id,
				Detail: fmt.Sprintf("this account's external account binding (%s) does not allow %s; it allows %s",
					k.ID, id.Value, strings.Join(append(append([]string{}, k.AllowedDomains...), k.AllowedIPRanges...), ", "))}}
		}
	}
	return nil
}

// bindingCovers reports whether a limited binding allows id: a DNS name
// equal to or under an allowed suffix (a wildcard by its base), an IP in an
// allowed range.
func bindingCovers(k *store.EABKey, id acme.Identifier) bool {
	switch id.Type {
	case acme.IdentifierDNS:
		name := strings.ToLower(id.Base().Value)
		for _, d := range k.AllowedDomains {
			d = strings.ToLower(strings.TrimPrefix(d, "."))
			if name == d || strings.HasSuffix(name, "."+d) {
				return true
			}
		}
	case acme.IdentifierIP:
		addr, err := netip.ParseAddr(id.Value)
		if err != nil {
			return false
		}
		for _, r := range k.AllowedIPRanges {
			_, n, err := net.ParseCIDR(r)
			if err == nil && n.Contains(addr.AsSlice()) {
				return true
			}
		}
	}
	return false
}

// preValidated reports whether the binding vouches for id, so its new
// authorization is born valid: the operator marked the binding's names
// pre-validated, and id is inside its limits.
func preValidated(k *store.EABKey, id acme.Identifier) bool {
	return k != nil && k.PreValidated && k.Limited() && bindingCovers(k, id)
}

// reusableBy is found, the authorizations AuthzsReusable chose for ids
// (found[i] for ids[i]), without those a request of profile prof under
// binding bind may not reuse: one born valid (no challenge: a binding
// pre-validated it) is reused only where the request's own new
// authorization for the name would be born valid too. That is, the
// binding still pre-validates the name (an operator may have changed it
// since; checkBinding has refused names outside its limits), and prof
// offers a challenge type for it: authzFor refuses a name its profile
// cannot validate, pre-validated or not, so a wildcard ordered under a
// profile without dns-01 is refused whether or not another profile's
// order made its authorization born valid before. A request is answered
// as if the earlier order had never been made. An authorization a
// challenge validated needs nothing more: AuthzsReusable kept only those
// validated by a method prof offers, which can validate the name.
func reusableBy(found []*store.Authorization, ids []acme.Identifier, prof profile.Profile, bind *store.EABKey) []*store.Authorization {
	for i, a := range found {
		if a != nil && len(a.Challenges) == 0 && i < len(ids) &&
			(!preValidated(bind, ids[i]) || len(challengeTypes(ids[i], prof)) == 0) {
			found[i] = nil
		}
	}
	return found
}

// bornValid turns a new authorization into one the binding pre-validated:
// valid, with no challenge to answer.
func bornValid(a *store.Authorization) {
	a.Status = acme.StatusValid
	a.Challenges = nil
}

// auditPreValidated records authorizations born valid, for the operator.
func (s *Server) auditPreValidated(ctx context.Context, acctID string, k *store.EABKey, authzID string, id acme.Identifier) {
	err := s.st.trail.AuditRecord(ctx, store.AuditEvent{
		Actor: "acme:" + acctID, Action: "authz.prevalidated", Subject: authzID,
		Detail: fmt.Sprintf("%s %s pre-validated by external account key %s (%s)", id.Type, id.Value, k.ID, k.Label),
		Origin: origin.Of(ctx),
	})
	if err != nil {
		s.log.ErrorContext(ctx, "recording a pre-validated authorization", "authz", authzID, "err", err)
	}
}

// auditBornValid records the authorizations of a new order that the
// binding pre-validated.
func (s *Server) auditBornValid(ctx context.Context, acctID string, k *store.EABKey, no store.NewOrder, o *store.Order) {
	for i, a := range no.Authzs {
		if a.ID == "" && a.Status == acme.StatusValid && i < len(o.AuthzIDs) {
			s.auditPreValidated(ctx, acctID, k, o.AuthzIDs[i], no.Identifiers[i])
		}
	}
}
