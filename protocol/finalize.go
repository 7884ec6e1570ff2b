package protocol

import (
	"crypto"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/csr"
	"github.com/hallmark-ca/hallmark/store"
)

// finalize checks the CSR against the order and its profile, then the store
// compare-and-swaps the order ready → processing, keeps the CSR and inserts
// signer_issue in one transaction (RFC 8555 §7.4). Signing happens in a
// worker, never here; the answer says processing with Retry-After unless
// the worker's verdict comes within server.verdict_wait_ms (await.go).
func (s *Server) finalize(w http.ResponseWriter, p *post) error {
	if done, err := s.finalizeAtOnce(w, p); done {
		return err
	}
	o, err := s.ownedOrder(p)
	if err != nil {
		return err
	}
	var req finalizeReq
	if err := decodePayload(p, "finalize", &req); err != nil {
		return err
	}
	if o.Status != acme.StatusReady {
		return notReady(o)
	}
	der, keyHash, err := s.checkedCSR(req, o.ID, o.Profile, o.Identifiers, p.acct.KeyJWK)
	if err != nil {
		return err
	}
	if err := s.limitCertificates(p.r.Context(), o.Identifiers); err != nil {
		return err
	}
	cur, claimed, err := s.st.orders.OrderFinalizeBegin(p.r.Context(), store.SignedUse{}, o.ID, o.Profile, der, keyHash)
	if err != nil {
		return s.storeErr(err, "queuing the order for issuance")
	}
	if !claimed {
		// Another finalize (or an expiry) moved it first. One still
		// ready was refused for its CSR's key, blocked (the claim's own
		// condition; this read is the refusal's only), or lost the swap
		// to its expiry, on the database's clock, since the nonce read
		// it.
		if cur.Status == acme.StatusReady {
			if err := s.keyBlocked(p.r.Context(), keyHash, "the CSR's public key"); err != nil {
				return err
			}
			cur = lapsed(cur)
		}
		return notReady(cur)
	}
	return s.answerOrder(w, p, cur)
}

// finalizeReq is a finalize's payload (RFC 8555 §7.4).
type finalizeReq struct {
	CSR string `json:"csr"`
}

// checkedCSR is req's CSR, DER, and its key's hash (store.KeyHash), once it
// has passed the checks for the order
// orderID of profile for ids: present, base64url, accepted by csr.Check
// under the profile's key types, and not for accountKey (the account's
// stored JWK): the certificate's key is never the account's key, as
// Boulder refuses it too. A key that signs both JWS requests and TLS
// handshakes lets either be turned against the other, and a certificate
// of the account key would let whoever holds the certificate's key manage
// the account (revoke, order, change its key).
func (s *Server) checkedCSR(req finalizeReq, orderID, profile string, ids []acme.Identifier, accountKey []byte) (der, keyHash []byte, err error) {
	if req.CSR == "" {
		return nil, nil, acme.Malformed("the finalize payload has no csr")
	}
	der, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(req.CSR, "="))
	if err != nil {
		return nil, nil, acme.Malformed("the csr is not base64url-encoded DER")
	}
	prof, ok := s.orderProfile(profile)
	if !ok {
		// Removed before this frontend started: no worker may mount it.
		return nil, nil, acme.New(acme.ProblemInvalidProfile, "order %s is for profile %q, which this server no longer offers: place a new order", orderID, profile)
	}
	cr, err := csr.Check(der, ids, prof.KeyTypes)
	if err != nil {
		return nil, nil, err
	}
	acct, err := s.keys.parse(accountKey)
	if err != nil {
		return nil, nil, acme.Internal(fmt.Errorf("reading the key of the account of order %s: %w", orderID, err))
	}
	if pub, ok := cr.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && pub.Equal(acct.Key) {
		return nil, nil, acme.New(acme.ProblemBadCSR, "the CSR's public key is the account key; the certificate's key must not be the account key: generate a new key for the certificate")
	}
	return der, store.KeyHash(cr.RawSubjectPublicKeyInfo), nil
}

// finalizeAtOnce is finalize claiming at once, for a request whose nonce
// is left for its claim (claimnow.go): the CSR is checked against what
// never changes about the order (Server.orders), and the claim checks the
// rest (the account's, ready, of that profile, the key not blocked).
// done is false, and the ordinary finalize answers (its read consumes the
// nonce), for an order this frontend has not seen, a payload or CSR it
// would refuse (the ordinary path says why, in its order), a claim that
// did not win, and, when the certificates-per-domain limit is set, every
// finalize (the limit reads before the claim).
func (s *Server) finalizeAtOnce(w http.ResponseWriter, p *post) (done bool, err error) {
	id := mux.Vars(p.r)["id"]
	f, ok := s.orders.get(id)
	if p.use == nil || p.isGet() || s.cfg.Limits.CertificatesPerDomain > 0 || !ok || f.accountID != p.acct.ID {
		return false, nil
	}
	var req finalizeReq
	if decodePayload(p, "finalize", &req) != nil {
		return false, nil
	}
	der, keyHash, err := s.checkedCSR(req, id, f.profile, f.identifiers, p.acct.KeyJWK)
	if err != nil {
		return false, nil
	}
	o, won, err := s.st.orders.OrderFinalizeBegin(p.r.Context(), *p.use, id, f.profile, der, keyHash)
	if err != nil {
		return true, s.storeErr(err, "queuing the order for issuance")
	}
	if !won {
		return false, nil
	}
	s.claimed(p)
	return true, s.answerOrder(w, p, o)
}

// notReady is orderNotReady naming the order's state (RFC 8555 §7.4: "the
// server MUST return an error with status 403 and type orderNotReady").
func notReady(o *store.Order) error {
	what := map[acme.Status]string{
		acme.StatusPending:    "its authorizations are not all valid yet",
		acme.StatusProcessing: "it is already being finalized",
		acme.StatusValid:      "it was already finalized; fetch its certificate",
		acme.StatusInvalid:    "it is invalid; create a new order",
		acme.StatusExpired:    "it expired; create a new order",
	}[o.Status]
	if o.Status == acme.StatusInvalid && o.Error != nil && o.Error.Detail != "" {
		what = o.Error.Detail + "; create a new order"
	}
	if what == "" {
		what = "only a ready order can be finalized"
	}
	return acme.New(acme.ProblemOrderNotReady, "the order is %s and cannot be finalized: %s", o.Status, what)
}
