package protocol

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

// revokeCert revokes a certificate (RFC 8555 §7.6) authorised by the
// account that ordered it, by an account holding valid authorizations for
// every name in it, or by the certificate's own key (jwk). For local CA
// backends the store records the revocation and queues the CRL in one
// transaction; relay/custom backends get a signer_revoke job, waited on
// until one second before the request deadline. The revocation itself is
// package revocation's, the one code path the CLI and admin panel share.
func (s *Server) revokeCert(w http.ResponseWriter, p *post) error {
	var req struct {
		Certificate string `json:"certificate"`
		Reason      *int   `json:"reason"`
	}
	if err := decodePayload(p, "revokeCert", &req); err != nil {
		return err
	}
	der, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(req.Certificate, "="))
	if err != nil || len(der) == 0 {
		return acme.Malformed("the certificate must be base64url-encoded DER")
	}
	x, err := x509.ParseCertificate(der)
	if err != nil {
		return acme.Malformed("the certificate cannot be parsed: it is not DER X.509")
	}
	reason := revocation.Unspecified
	if req.Reason != nil {
		reason = revocation.Reason(*req.Reason)
	}
	if err := reason.Check(); err != nil {
		return err
	}
	ctx := p.r.Context()
	c, err := s.issuedCert(ctx, x, der)
	if err != nil {
		return err
	}
	actor, owner, err := s.revocationAuthority(ctx, p, x, c)
	if err != nil {
		return err
	}
	if reason == revocation.KeyCompromise && !owner {
		// A keyCompromise revocation blocks the key and revokes every
		// certificate of it (store.BlockedKeys), other subscribers' for
		// other names included. Holding authorizations for this
		// certificate's names proves nothing about its key, so it may not
		// report one (Boulder blocks a key only on proof of it, too).
		return acme.New(acme.ProblemBadRevocationReason, "only the account that ordered this certificate, or its own key, may report its key compromised (reason 1); sign the request with the certificate's key to report a compromise, or revoke with another reason")
	}
	// A certificate revoked already is revocation.Service's to answer: a
	// report of its key compromised still blocks the key.
	//
	// A relay/custom backend's outcome is waited on until one second
	// before the request deadline; if it has not come, 503 with
	// Retry-After tells the client to ask again. Its refusal comes back as
	// an *acme.Error of the backend's problem type, rendered as it is.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.timeout)
	}
	res, err := revocation.New(s.st.certs, s.cfg.KnownProfiles()).Revoke(ctx, revocation.Request{
		Serial: c.Serial, Reason: reason, Actor: actor, Via: "ACME revokeCert",
		Wait: time.Until(deadline.Add(-time.Second)),
	})
	if err != nil {
		return s.storeErr(err, "recording the revocation")
	}
	if !res.Done {
		return acme.Unavailable(s.retry, "the revocation of %s is queued with the issuing backend, which has not answered yet; retry the request to wait for its answer", c.Serial)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// issuedCert finds the certificate in the store by serial and checks it is
// byte for byte the one presented.
func (s *Server) issuedCert(ctx context.Context, x *x509.Certificate, der []byte) (*store.Certificate, error) {
	// The store keeps serials as lower-case hex; try the minimal form and
	// the whole-bytes form, so either signer convention is found.
	candidates := []string{fmt.Sprintf("%x", x.SerialNumber), hex.EncodeToString(x.SerialNumber.Bytes())}
	for i, serial := range candidates {
		if i > 0 && serial == candidates[0] {
			continue
		}
		c, err := s.st.certs.CertificateBySerial(ctx, serial)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, s.storeErr(err, "reading the certificate")
		}
		if !bytes.Equal(c.DER, der) {
			break
		}
		return c, nil
	}
	return nil, acme.Malformed("the certificate was not issued by this CA")
}

// revocationAuthority decides whether the request may revoke c and names
// the actor for the audit log (RFC 8555 §7.6). owner is false for an
// account that holds authorizations for every name of c but did not order
// it: it may revoke c, but not report its key compromised.
func (s *Server) revocationAuthority(ctx context.Context, p *post, x *x509.Certificate, c *store.Certificate) (actor string, owner bool, err error) {
	if p.acct == nil {
		// Signed with a jwk: it must be the certificate's own key.
		pub, ok := x.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !pub.Equal(p.jwk) {
			return "", false, acme.Unauthorized("the request is signed by a key that is not the certificate's; sign with the certificate's key or with an authorised account")
		}
		return "acme:certificate-key", true, nil
	}
	actor = "acme:" + p.acct.ID
	if c.AccountID == p.acct.ID {
		return actor, true, nil
	}
	ids := certIdentifiers(x)
	if len(ids) == 0 {
		return "", false, acme.Unauthorized("the certificate was not ordered by this account")
	}
	missing, err := s.unauthorized(ctx, p.acct.ID, ids, time.Now())
	if err != nil {
		return "", false, err
	}
	if missing != nil {
		return "", false, acme.Unauthorized("the certificate was not ordered by this account, and the account holds no valid authorization for %s", missing.Value)
	}
	return actor, false, nil
}

// unauthorized is the first of ids the account holds no valid, unexpired
// authorization for, or nil when it holds one for each: for a wildcard
// name either a wildcard or a base authorization counts. One store read
// asks for all of them. Any method counts (RFC 8555 §7.6), and so does an
// authorization born valid through a pre-validating binding: it is a
// valid authorization the CA granted for the name, the operator's word
// for the account's control of it standing for a challenge's.
func (s *Server) unauthorized(ctx context.Context, acctID string, ids []acme.Identifier, now time.Time) (*acme.Identifier, error) {
	var keys []store.AuthzKey
	var of []int // the identifier each key is for
	for i, id := range ids {
		keys, of = append(keys, store.AuthzKey{Identifier: id.Base(), Wildcard: id.IsWildcard()}), append(of, i)
		if id.IsWildcard() {
			keys, of = append(keys, store.AuthzKey{Identifier: id.Base()}), append(of, i)
		}
	}
	found, err := s.st.certs.AuthzsReusable(ctx, acctID, keys, nil, now) // any method: RFC 8555 §7.6
	if err != nil {
		return nil, s.storeErr(err, "looking up the account's authorizations")
	}
	held := make([]bool, len(ids))
	for k, a := range found {
		if a != nil {
			held[of[k]] = true
		}
	}
	for i := range ids {
		if !held[i] {
			return &ids[i], nil
		}
	}
	return nil, nil
}

// certIdentifiers are the names a certificate vouches for.
func certIdentifiers(x *x509.Certificate) []acme.Identifier {
	var ids []acme.Identifier
	for _, n := range x.DNSNames {
		ids = append(ids, acme.Identifier{Type: acme.IdentifierDNS, Value: strings.ToLower(n)})
	}
	for _, ip := range x.IPAddresses {
		ids = append(ids, acme.Identifier{Type: acme.IdentifierIP, Value: canonicalIP(ip)})
	}
	return ids
}

func canonicalIP(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.String()
}
