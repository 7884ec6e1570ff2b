package protocol

import (
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// authzAhead is the authz route's read, made while the nonce is consumed.
var authzAhead = lookupOf(store.LookupAuthz, "id")

// authzDoc is the authorization object (RFC 8555 §7.1.4).
type authzDoc struct {
	Identifier acme.Identifier `json:"identifier"`
	Status     acme.Status     `json:"status"`
	Expires    string          `json:"expires,omitempty"`
	Challenges []challengeDoc  `json:"challenges"`
	Wildcard   bool            `json:"wildcard,omitempty"`
}

func (s *Server) authzDoc(a *store.Authorization) authzDoc {
	d := authzDoc{Identifier: a.Identifier, Status: a.Status, Expires: rfc3339(a.Expires), Wildcard: a.Wildcard,
		Challenges: []challengeDoc{}}
	for i := range a.Challenges {
		if listed(a, &a.Challenges[i]) {
			d.Challenges = append(d.Challenges, s.challengeDoc(&a.Challenges[i], a.AccountID))
		}
	}
	return d
}

// listed reports whether an authorization lists c (RFC 8555 §7.1.4,
// "challenges"): "For pending authorizations, the challenges that the
// client can fulfill in order to prove possession of the identifier. For
// valid authorizations, the challenge that was validated. For invalid
// authorizations, the challenge that was attempted and failed." A valid
// authorization lists its valid challenge (two, should two attempts made
// at once both succeed); an invalid one the challenge whose verdict
// failed it, which carries the error: its siblings, invalidated with it
// unattempted, carry none (a failed verdict without a problem leaves the
// invalid challenges all listed, as nothing tells them apart). Other
// states (deactivated, expired, revoked; the RFC says nothing of them)
// list every challenge, as pending does.
func listed(a *store.Authorization, c *store.Challenge) bool {
	switch a.Status {
	case acme.StatusValid:
		return c.Status == acme.StatusValid
	case acme.StatusInvalid:
		if c.Status != acme.StatusInvalid {
			return false
		}
		if c.Error != nil {
			return true
		}
		for i := range a.Challenges {
			if a.Challenges[i].Status == acme.StatusInvalid && a.Challenges[i].Error != nil {
				return false
			}
		}
		return true
	}
	return true
}

// ownedAuthz loads an authorization and checks the signer owns it.
func (s *Server) ownedAuthz(p *post, id string) (*store.Authorization, error) {
	a, err := owned(s, p, authzAhead, "authorization", id, s.authzURL(id), func(a *store.Authorization) string { return a.AccountID })
	if err != nil {
		return nil, err
	}
	return authzAsSeen(a, p.now), nil
}

// authzAsSeen is a as the client is answered at now, the database clock:
// an authorization still stored pending or valid past its expiry is
// expired (RFC 8555 §7.1.6: "pending" and "valid" both move to "expired"),
// whether or not housekeeping has moved it yet, so a client polling it
// stops, and deactivating it is refused as for any expired one. A zero now
// (no clock read) leaves a as stored. a may be shared (read ahead, or
// remembered), so the expired view is a copy.
func authzAsSeen(a *store.Authorization, now time.Time) *store.Authorization {
	if now.IsZero() || a.Expires.IsZero() || now.Before(a.Expires) ||
		(a.Status != acme.StatusPending && a.Status != acme.StatusValid) {
		return a
	}
	c := *a
	c.Status = acme.StatusExpired
	return &c
}

// authz answers POST-as-GET of an authorization, or deactivates it
// ({"status":"deactivated"}, RFC 8555 §7.5.2).
func (s *Server) authz(w http.ResponseWriter, p *post) error {
	id := mux.Vars(p.r)["id"]
	a, err := s.ownedAuthz(p, id)
	if err != nil {
		return err
	}
	if !p.isGet() {
		var req struct {
			Status acme.Status `json:"status"`
		}
		if err := decodePayload(p, "authorization update", &req); err != nil {
			return err
		}
		if req.Status != acme.StatusDeactivated {
			return acme.Malformed("an authorization's status can only be changed to \"deactivated\"")
		}
		if a.Status != acme.StatusPending && a.Status != acme.StatusValid {
			return acme.Malformed("the authorization is %s; only a pending or valid authorization can be deactivated", a.Status)
		}
		a, err = s.st.orders.AuthzDeactivate(p.r.Context(), id)
		if errors.Is(err, store.ErrConflict) {
			return acme.Malformed("the authorization changed state while this request ran; fetch it and retry")
		}
		if err != nil {
			return s.storeErr(err, "deactivating the authorization")
		}
	} else if a, err = s.settledAuthz(p, a); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.authzDoc(a))
}
