package protocol

import (
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// challengeAhead is the challenge route's read, made while the nonce is
// consumed.
var challengeAhead = lookupOf(store.LookupChallenge, "id")

// challenge answers a challenge POST (RFC 8555 §7.5.1). A {} payload asks
// the server to validate: the store compare-and-swaps the challenge pending →
// processing and inserts challenge_validate in one transaction; validation
// runs in a worker, never here, and the answer says processing unless the
// worker's verdict comes within server.verdict_wait_ms (await.go).
// A repeated POST returns the current state without queuing again; an empty
// payload (POST-as-GET) reads it.
func (s *Server) challenge(w http.ResponseWriter, p *post) error {
	id := mux.Vars(p.r)["id"]
	ctx := p.r.Context()
	// The challenge and its authorization in one read: the worker's read
	// before validating is the same question.
	t, err := owned(s, p, challengeAhead, "challenge", id, s.challURL(id), func(t *store.ChallengeAuthz) string { return t.Authz.AccountID })
	if err != nil {
		return err
	}
	c, a := &t.Challenge, &t.Authz
	if !p.isGet() {
		var req map[string]any
		if err := decodePayload(p, "challenge response", &req); err != nil {
			return err
		}
		if c.Status == acme.StatusPending {
			if a.Status != acme.StatusPending {
				return acme.Malformed("the authorization is %s; its challenges can no longer be answered", a.Status)
			}
			if !a.Expires.IsZero() && time.Now().After(a.Expires) {
				return acme.Malformed("the authorization expired at %s; create a new order", rfc3339(a.Expires))
			}
			if err := s.limitFailedValidations(ctx, p.acct.ID, a.Identifier); err != nil {
				return err
			}
			cur, _, err := s.st.orders.ChallengeClaim(ctx, id)
			if err != nil {
				return s.storeErr(err, "queuing the challenge for validation")
			}
			c = cur
		}
	}
	return s.answerChallenge(w, p, c)
}

// answerChallenge writes c as a challenge POST's answer: once its verdict
// came, if it is processing and the verdict comes within
// server.verdict_wait_ms (await.go).
func (s *Server) answerChallenge(w http.ResponseWriter, p *post, c *store.Challenge) error {
	c, err := s.settledChallenge(p, c)
	if err != nil {
		return err
	}
	w.Header().Add("Link", link(s.authzURL(c.AuthzID), "up"))
	if c.Status == acme.StatusProcessing {
		w.Header().Set("Retry-After", retryAfter(s.retry))
	}
	return writeJSON(w, http.StatusOK, s.challengeDoc(c))
}

// challengeFolded is the challenge POST as a folded write (fold.go): the
// nonce, the account and the claim in one transaction. What it leaves to
// the ordinary path: a POST-as-GET (no write to fold into), a payload that
// is not a JSON object, and, when the failed-validations limit is set, every
// POST (the limit reads before the claim).
func (s *Server) challengeFolded(w http.ResponseWriter, p *post, u store.SignedUse) (bool, error) {
	if p.isGet() || s.cfg.Limits.FailedValidationsPerHour > 0 {
		return false, nil
	}
	var req map[string]any
	if decodePayload(p, "challenge response", &req) != nil {
		return false, nil
	}
	c, err := s.st.orders.ChallengeClaimSigned(p.r.Context(), u, mux.Vars(p.r)["id"])
	if errors.Is(err, store.ErrUnfolded) {
		return false, nil
	}
	if err != nil {
		return true, s.storeErr(err, "queuing the challenge for validation")
	}
	return true, s.answerChallenge(w, p, c)
}
