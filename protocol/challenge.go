package protocol

import (
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
//
// A POST whose nonce is left for its claim (claimnow.go) claims at once:
// the checks below are the claim's own conditions. The failed-validations
// limit, when set, reads first.
func (s *Server) challenge(w http.ResponseWriter, p *post) error {
	id := mux.Vars(p.r)["id"]
	ctx := p.r.Context()
	if p.use != nil && !p.isGet() && s.cfg.Limits.FailedValidationsPerHour == 0 && decodePayload(p, "challenge response", &map[string]any{}) == nil {
		c, won, err := s.st.orders.ChallengeClaim(ctx, *p.use, id)
		if err != nil {
			return s.storeErr(err, "queuing the challenge for validation")
		}
		if won {
			s.claimed(p)
			return s.answerChallenge(w, p, c)
		}
	}
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
			cur, _, err := s.st.orders.ChallengeClaim(ctx, store.SignedUse{}, id)
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
	return writeJSON(w, http.StatusOK, s.challengeDoc(c, p.acct.ID))
}
