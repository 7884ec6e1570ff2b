package protocol

import (
	"net/http"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// pathNewAuthz is pre-authorization (RFC 8555 §7.4.1), offered only when
// the default profile allows it.
const pathNewAuthz = "/acme/new-authz"

// newAuthzReq is the newAuthz payload; "profile" is Hallmark's extension
// naming the profile whose challenges and policy apply (default: the
// default profile).
type newAuthzReq struct {
	Identifier acme.Identifier `json:"identifier"`
	Profile    string          `json:"profile"`
}

// newAuthzURL is the directory's newAuthz, "" when the default profile
// does not allow pre-authorization.
func (s *Server) newAuthzURL() string {
	if p, ok := s.profile(s.cfg.DefaultProfile); ok && p.AllowPreAuthorization {
		return s.base + pathNewAuthz
	}
	return ""
}

// newAuthz creates an authorization outside any order (RFC 8555 §7.4.1),
// or answers with a valid one the account already holds. A later order's
// authorization for the identifier reuses it.
func (s *Server) newAuthz(w http.ResponseWriter, p *post) error {
	var req newAuthzReq
	if err := decodePayload(p, "newAuthz", &req); err != nil {
		return err
	}
	if err := s.presetProfile(p.r, &req.Profile); err != nil { // profiledir.go
		return err
	}
	name := req.Profile
	if name == "" {
		name = s.cfg.DefaultProfile
	}
	prof, ok := s.profile(name)
	if !ok {
		return acme.New(acme.ProblemInvalidProfile, "there is no profile %q; this server offers %s", name, strings.Join(s.profileNames(), ", "))
	}
	if !prof.AllowPreAuthorization {
		return acme.Unauthorized("profile %q does not allow pre-authorization (newAuthz); create an order instead", name)
	}
	// "pre-authorization cannot be used to authorize issuance of
	// certificates containing wildcard domain names" (§7.4.1).
	if req.Identifier.IsWildcard() {
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemRejectedIdentifier, Identifier: &req.Identifier,
			Detail: "a wildcard cannot be pre-authorized (RFC 8555 §7.4.1); order it and answer its dns-01 challenge"}}
	}
	ids, err := s.policy.Check([]acme.Identifier{req.Identifier}, prof)
	if err != nil {
		return err
	}
	if err := s.accessOrder(p, ids, name); err != nil {
		return err
	}
	id := ids[0]
	ctx := p.r.Context()
	bind, err := s.binding(ctx, p.acct.ID)
	if err != nil {
		return err
	}
	if err := checkBinding(bind, ids); err != nil {
		return err
	}
	now := p.now // the database clock, read with the nonce
	life := hours(s.cfg.Server.AuthzLifetimeHours, 30*24)
	reusable, err := s.st.orders.AuthzsReusable(ctx, p.acct.ID, authzKeys([]acme.Identifier{id}, prof), offered(prof), now)
	if err != nil {
		return s.storeErr(err, "looking for a reusable authorization")
	}
	reusable = reusableBy(reusable, ids, prof, bind)
	a, err := authzFor(reusable[0], p.acct.ID, id, prof, name, now, life)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if a.ID == "" {
		fresh := preValidated(bind, id)
		if fresh {
			bornValid(a)
		} else if err := s.pausedFor(ctx, p.acct.ID, ids); err != nil { // pause.go: one read, rare route
			return err
		} else if err := s.limitFailedValidations(ctx, p.acct.ID, id); err != nil {
			return err
		}
		// Pending authorizations per account is reserved in AuthzCreate's
		// transaction (orderLimits), so newAuthz is no way around it.
		if a, err = s.st.orders.AuthzCreate(ctx, a, s.orderLimits()); err != nil {
			if rl := reservedLimit(err, "this pre-authorization"); rl != nil {
				return rl
			}
			return s.storeErr(err, "creating the authorization")
		}
		if fresh {
			s.auditPreValidated(ctx, p.acct.ID, bind, a.ID, id)
		}
		status = http.StatusCreated
	}
	w.Header().Set("Location", s.authzURL(a.ID))
	return writeJSON(w, status, s.authzDoc(a))
}
