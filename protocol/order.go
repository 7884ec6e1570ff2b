package protocol

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/store"
)

// orderAhead is the order and finalize routes' read, made while the nonce
// is consumed.
var orderAhead = lookupOf(store.LookupOrder, "id")

// orderDoc is the order object (RFC 8555 §7.1.3), with the profile of
// draft-ietf-acme-profiles.
type orderDoc struct {
	Status         acme.Status       `json:"status"`
	Expires        string            `json:"expires,omitempty"`
	Identifiers    []acme.Identifier `json:"identifiers"`
	NotBefore      string            `json:"notBefore,omitempty"`
	NotAfter       string            `json:"notAfter,omitempty"`
	Error          *acme.Problem     `json:"error,omitempty"`
	Authorizations []string          `json:"authorizations"`
	Finalize       string            `json:"finalize"`
	Certificate    string            `json:"certificate,omitempty"`
	Profile        string            `json:"profile,omitempty"`
	Replaces       string            `json:"replaces,omitempty"`
}

func (s *Server) orderDoc(o *store.Order) orderDoc {
	d := orderDoc{
		Status: o.Status, Expires: rfc3339(o.Expires), Identifiers: o.Identifiers,
		NotBefore: rfc3339p(o.NotBefore), NotAfter: rfc3339p(o.NotAfter),
		Error: o.Error, Finalize: s.finalizeURL(o.ID), Profile: o.Profile, Replaces: o.Replaces,
		Authorizations: make([]string, len(o.AuthzIDs)),
	}
	for i, id := range o.AuthzIDs {
		d.Authorizations[i] = s.authzURL(id)
	}
	if d.Identifiers == nil {
		d.Identifiers = []acme.Identifier{}
	}
	if o.Status == acme.StatusValid && o.CertSerial != "" {
		d.Certificate = s.certURL(o.CertSerial)
	}
	return d
}

// writeOrder answers with an order: Location, and Retry-After while the
// order is processing so clients poll at the pace the server asks.
func (s *Server) writeOrder(w http.ResponseWriter, status int, o *store.Order) error {
	w.Header().Set("Location", s.orderURL(o.ID))
	if o.Status == acme.StatusProcessing {
		w.Header().Set("Retry-After", retryAfter(s.retry))
	}
	return writeJSON(w, status, s.orderDoc(o))
}

// newOrderReq is the newOrder payload (RFC 8555 §7.4; profile from
// draft-ietf-acme-profiles).
type newOrderReq struct {
	Identifiers []acme.Identifier `json:"identifiers"`
	NotBefore   string            `json:"notBefore"`
	NotAfter    string            `json:"notAfter"`
	Profile     string            `json:"profile"`
	Replaces    string            `json:"replaces"`
}

// newOrder checks the identifiers against the profile and the policy,
// reuses the account's valid authorizations, creates the rest with one
// challenge per usable type, and writes it all in one store call.
func (s *Server) newOrder(w http.ResponseWriter, p *post) error {
	var req newOrderReq
	if err := decodePayload(p, "newOrder", &req); err != nil {
		return err
	}
	if err := s.presetProfile(p.r, &req.Profile); err != nil { // profiledir.go
		return err
	}
	name, prof, ids, err := s.orderRequest(req)
	if err != nil {
		return err
	}
	if err := s.accessOrder(p, ids, name); err != nil {
		return err
	}
	if done, err := s.newOrderAtOnce(w, p, req, name, prof, ids); done {
		return err
	}
	if err := s.redeem(p, s.reusableLookup(p.acct.ID, ids, prof)); err != nil {
		return err
	}
	ctx := p.r.Context()
	bind, err := s.binding(ctx, p.acct.ID) // protocol/eab.go: the EAB's limits
	if err != nil {
		return err
	}
	if err := checkBinding(bind, ids); err != nil {
		return err
	}
	replacesSerial, err := s.replacesSerial(ctx, p.acct, req.Replaces, ids) // protocol/ari.go
	if err != nil {
		return err
	}
	now := p.now // the database clock, read with the nonce
	reusable, err := s.reusable(p, authzKeys(ids, prof), offered(prof), now.Add(s.orderLifetime()))
	if err != nil {
		return err
	}
	reusable = reusableBy(reusable, ids, prof, bind) // protocol/eab.go: born valid ones only where this order's would be
	// Whether the next newOrder of this account may claim at once
	// (newOrderAtOnce): not while it has authorizations to reuse.
	s.reuses.put(p.acct.ID, slices.ContainsFunc(reusable, func(a *store.Authorization) bool { return a != nil }))
	no, err := s.draftOrder(p.acct.ID, req, name, prof, ids, bind, now, reusable)
	if err != nil {
		return err
	}
	no.ReplacesSerial, no.Limits = replacesSerial, s.orderLimits()
	if err := s.limitNewOrder(ctx, p.acct.ID, no); err != nil {
		return err
	}
	o, err := s.st.orders.OrderCreate(ctx, store.SignedUse{}, no)
	if errors.Is(err, store.ErrAuthzUnusable) {
		// An authorization chosen for reuse was deactivated or expired
		// since: the order gets fresh authorizations instead, as it would
		// have had it come a moment later, and within the
		// pending-authorizations limit as the first draft was (its
		// transaction reserves them): this one creates more of them.
		if no, err = s.draftOrder(p.acct.ID, req, name, prof, ids, bind, now, nil); err != nil {
			return err
		}
		no.ReplacesSerial, no.Limits = replacesSerial, s.orderLimits()
		o, err = s.st.orders.OrderCreate(ctx, store.SignedUse{}, no)
	}
	if rl := reservedLimit(err, "this order"); rl != nil {
		return rl
	}
	if errors.Is(err, store.ErrPaused) {
		return s.orderPaused(ctx, p.acct.ID, ids) // pause.go
	}
	if err != nil {
		return s.orderCreateErr(err, req.Replaces)
	}
	s.auditBornValid(ctx, p.acct.ID, bind, no, o)
	s.rememberOrder(o)
	return s.writeOrder(w, http.StatusCreated, o)
}

// orderRequest is a newOrder payload's profile, checked, and its
// identifiers as the policy allows them.
func (s *Server) orderRequest(req newOrderReq) (name string, prof profile.Profile, ids []acme.Identifier, err error) {
	if len(req.Identifiers) == 0 {
		return "", prof, nil, acme.Malformed("the order has no identifiers")
	}
	name = req.Profile
	if name == "" {
		name = s.cfg.DefaultProfile
	}
	prof, ok := s.profile(name)
	if !ok {
		return "", prof, nil, acme.New(acme.ProblemInvalidProfile, "there is no profile %q; this server offers %s", name, strings.Join(s.profileNames(), ", "))
	}
	ids, err = s.policy.Check(req.Identifiers, prof)
	return name, prof, ids, err
}

// draftOrder is the order req asks of account acctID, at now on the
// database's clock: its validity, its expiry, and for each identifier the
// authorization in reusable (found[i] for ids[i], nil for none) or else a
// new one, born valid when bind pre-validates it.
func (s *Server) draftOrder(acctID string, req newOrderReq, name string, prof profile.Profile, ids []acme.Identifier,
	bind *store.EABKey, now time.Time, reusable []*store.Authorization) (store.NewOrder, error) {
	nb, na, err := validityRequest(req, prof, name, now)
	if err != nil {
		return store.NewOrder{}, err
	}
	no := store.NewOrder{
		AccountID: acctID, Identifiers: ids, Profile: name, Methods: offered(prof), Corroborated: prof.Perspectives,
		NotBefore: nb, NotAfter: na, Expires: now.Add(s.orderLifetime()),
		Replaces: req.Replaces, Pause: s.pauseRule(),
	}
	authzLife := hours(s.cfg.Server.AuthzLifetimeHours, 30*24)
	for i, id := range ids {
		var reuse *store.Authorization
		if i < len(reusable) {
			reuse = reusable[i]
		}
		a, err := authzFor(reuse, acctID, id, prof, name, now, authzLife)
		if err != nil {
			return store.NewOrder{}, err
		}
		if a.ID == "" && preValidated(bind, id) {
			bornValid(a)
		}
		// The order lives no longer than its authorizations.
		if a.Expires.Before(no.Expires) {
			no.Expires = a.Expires
		}
		no.Authzs = append(no.Authzs, a)
	}
	return no, nil
}

// newOrderAtOnce is newOrder claiming at once, for a request whose nonce
// is left for its claim (claimnow.go): the nonce, the account and the
// order's rows in one transaction, for an order that needs nothing read
// first. That is an account this frontend knows to have no external
// account binding (whose limits and pre-validation would need it read)
// and whose last newOrder read found no authorization to reuse, with no
// rate limit set (each reads the store), no certificate replaced (ARI),
// and a recent reading of the database's clock (dbClock) for the order's
// times; the transaction checks that clock, and that no authorization
// could be reused after all (store.NewOrder.Clock). done is false, and
// newOrder reads (consuming the nonce), otherwise.
func (s *Server) newOrderAtOnce(w http.ResponseWriter, p *post, req newOrderReq, name string, prof profile.Profile, ids []acme.Identifier) (done bool, err error) {
	if p.use == nil || req.Replaces != "" || s.limitsRead() {
		return false, nil
	}
	if _, ok := s.unbound.get(p.acct.ID); !ok {
		return false, nil
	}
	if reuses, ok := s.reuses.get(p.acct.ID); !ok || reuses {
		return false, nil
	}
	now, ok := s.clock.estimate()
	if !ok {
		return false, nil
	}
	no, err := s.draftOrder(p.acct.ID, req, name, prof, ids, nil, now, nil)
	if err != nil {
		return false, nil
	}
	no.Clock = now
	o, err := s.st.orders.OrderCreate(p.r.Context(), *p.use, no)
	if errors.Is(err, store.ErrNotClaimed) {
		return false, nil
	}
	if err != nil {
		return true, s.orderCreateErr(err, "")
	}
	s.claimed(p)
	s.rememberOrder(o)
	return true, s.writeOrder(w, http.StatusCreated, o)
}

// limitsRead reports whether a newOrder reads the store for a rate limit
// (limitNewOrder).
func (s *Server) limitsRead() bool {
	l := s.cfg.Limits
	return l.OrdersPerAccount > 0 || l.PendingAuthorizationsPerAccount > 0 ||
		l.FailedValidationsPerHour > 0 || l.CertificatesPerDomain > 0
}

// orderLifetime is how long a new order lives, at most.
func (s *Server) orderLifetime() time.Duration {
	return hours(s.cfg.Server.OrderLifetimeHours, 7*24)
}

// authzKeys are the authorizations ids need under prof: corroborated by
// network perspectives if prof requires it.
func authzKeys(ids []acme.Identifier, prof profile.Profile) []store.AuthzKey {
	keys := make([]store.AuthzKey, len(ids))
	for i, id := range ids {
		keys[i] = store.AuthzKey{Identifier: id.Base(), Wildcard: id.IsWildcard(), Corroborated: prof.Perspectives}
	}
	return keys
}

// aheadSkew is how far the frontend's clock may run ahead of the
// database's before a reusable-authorization read made ahead is of no use
// (newOrderAhead).
const aheadSkew = 10 * time.Minute

// newOrderAhead is newOrder's readAhead: the account's reusable
// authorizations for the identifiers the payload names as sent, read
// with the nonce. The order's expiry is not known until the database
// clock is (it comes back with the nonce), so this asks for those that
// outlive an earlier one, aheadSkew sooner by the frontend's clock; the
// handler keeps only those that outlive the order (reusable). A payload
// that does not parse, or names nothing the policy allows, reads nothing
// ahead: the handler refuses it after verifying it.
func (s *Server) newOrderAhead(r *http.Request, msg *jws.Message, acctID string) store.Lookup {
	var req newOrderReq
	if msg == nil || json.Unmarshal(msg.UnverifiedPayload(), &req) != nil || s.presetProfile(r, &req.Profile) != nil {
		return store.Lookup{}
	}
	_, prof, ids, err := s.orderRequest(req)
	if err != nil {
		return store.Lookup{}
	}
	return s.reusableLookup(acctID, ids, prof)
}

// reusableLookup is newOrderAhead's read for ids of profile prof.
func (s *Server) reusableLookup(acctID string, ids []acme.Identifier, prof profile.Profile) store.Lookup {
	return store.Lookup{Kind: store.LookupReusable, ID: acctID, Keys: authzKeys(ids, prof), Methods: offered(prof),
		After: time.Now().Add(s.orderLifetime() - aheadSkew)}
}

// offered are the challenge types prof offers: an authorization validated
// by another is not reused for its orders (store.AuthzsReusable), or an
// order of a profile that offers only dns-01 would be ready on an http-01
// validation the profile was set up to refuse. Never nil, which would
// reuse whatever validated it.
func offered(prof profile.Profile) []acme.ChallengeType {
	out := make([]acme.ChallengeType, len(prof.Challenges))
	for i, c := range prof.Challenges {
		out[i] = acme.ChallengeType(c)
	}
	return out
}

// reusable is, for each key, the account's valid authorization that
// outlives expires, validated by one of methods (store.AuthzsReusable):
// from the read made with the nonce when it asked for these keys and
// methods, for this account, and for an expiry no later than expires,
// which a longest-lived authorization per key can be filtered for; else
// read now.
func (s *Server) reusable(p *post, keys []store.AuthzKey, methods []acme.ChallengeType, expires time.Time) ([]*store.Authorization, error) {
	sent := p.aheadOf
	if a := p.ahead; a != nil && sent.Kind == store.LookupReusable && sent.ID == p.acct.ID &&
		!sent.After.After(expires) && slices.Equal(sent.Keys, keys) && slices.Equal(sent.Methods, methods) {
		p.ahead = nil
		if a.err != nil {
			return nil, s.storeErr(a.err, "looking for reusable authorizations")
		}
		found, ok := a.v.([]*store.Authorization)
		if !ok || len(found) != len(keys) {
			return nil, acme.Internal(fmt.Errorf("the reusable authorizations read ahead are a %T of %d, not %d", a.v, len(found), len(keys)))
		}
		out := make([]*store.Authorization, len(found))
		for i, az := range found {
			if az != nil && az.Expires.After(expires) {
				out[i] = az
			}
		}
		return out, nil
	}
	found, err := s.st.orders.AuthzsReusable(p.r.Context(), p.acct.ID, keys, methods, expires)
	if err != nil {
		return nil, s.storeErr(err, "looking for reusable authorizations")
	}
	return found, nil
}

// authzFor is reusable, the account's valid authorization for id that
// outlives the order, or else a new pending one with its challenges.
func authzFor(reusable *store.Authorization, acctID string, id acme.Identifier, prof profile.Profile, profName string,
	now time.Time, life time.Duration) (*store.Authorization, error) {
	if reusable != nil {
		return reusable, nil
	}
	base, wildcard := id.Base(), id.IsWildcard()
	types := challengeTypes(id, prof)
	if len(types) == 0 {
		return nil, &acme.Error{Problem: acme.Problem{Type: acme.ProblemRejectedIdentifier, Identifier: &id,
			Detail: fmt.Sprintf("profile %q offers no challenge type that can validate %s", profName, id.Value)}}
	}
	a := &store.Authorization{AccountID: acctID, Identifier: base, Wildcard: wildcard, Status: acme.StatusPending, Expires: now.Add(life)}
	for _, t := range types {
		tok, err := token()
		if err != nil {
			return nil, acme.Internal(err)
		}
		a.Challenges = append(a.Challenges, store.Challenge{Type: t, Token: tok, Status: acme.StatusPending})
	}
	return a, nil
}

// challengeTypes are the profile's challenge types that can validate id:
// wildcards only through DNS (dns-01, dns-account-01, dns-persist-01: RFC
// 8555 §7.1.3), IP addresses only by http-01 and tls-alpn-01 (RFC 8738 §7)
// or dns-persist-01 in the reverse zone (BR §3.2.2.5.8).
func challengeTypes(id acme.Identifier, prof profile.Profile) []acme.ChallengeType {
	var out []acme.ChallengeType
	for _, c := range prof.Challenges {
		t := acme.ChallengeType(c)
		switch {
		case id.IsWildcard() && !t.ByDNS():
			continue
		case id.Type == acme.IdentifierIP && !t.ForIP():
			continue
		}
		out = append(out, t)
	}
	return out
}

// token is a challenge token: 128 bits or more of entropy, base64url (RFC
// 8555 §8.1 asks for at least 128 bits; we use 256).
func token() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading randomness for a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// validityRequest honours notBefore/notAfter only for a profile that allows
// it, and only within its validity.
func validityRequest(req newOrderReq, prof profile.Profile, name string, now time.Time) (*time.Time, *time.Time, error) {
	if req.NotBefore == "" && req.NotAfter == "" {
		return nil, nil, nil
	}
	if !prof.AllowValidityRequest {
		return nil, nil, acme.Malformed("profile %q does not accept notBefore/notAfter; leave them out", name)
	}
	parse := func(field, v string) (*time.Time, error) {
		if v == "" {
			return nil, nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, acme.Malformed("%s %q is not an RFC 3339 date-time", field, v)
		}
		return &t, nil
	}
	nb, err := parse("notBefore", req.NotBefore)
	if err != nil {
		return nil, nil, err
	}
	na, err := parse("notAfter", req.NotAfter)
	if err != nil {
		return nil, nil, err
	}
	start := now
	if nb != nil {
		start = *nb
	}
	max := time.Duration(prof.ValidityHours) * time.Hour
	switch {
	case na != nil && !na.After(start):
		return nil, nil, acme.Malformed("notAfter must be after notBefore")
	case na != nil && !na.After(now):
		return nil, nil, acme.Malformed("notAfter is in the past")
	// A notBefore already past when the order is placed asks for
	// backdating, which the CA does by profile.MaxBackdate only. The signer
	// issues the notBefore requested (RFC 8555 §7.4: "MUST NOT issue a
	// certificate with contents other than those requested"), so one it
	// will not honour is refused here, when the client can still ask
	// again, not failed at signing.
	case nb != nil && nb.Before(now.Add(-profile.MaxBackdate)):
		return nil, nil, acme.Malformed("notBefore %s is in the past: this CA backdates a certificate by at most %s when the order is placed; leave notBefore out, or ask for a time from now on", rfc3339(*nb), profile.MaxBackdate)
	case nb != nil && nb.After(now.Add(max)):
		return nil, nil, acme.Malformed("notBefore is too far in the future")
	// notAfter is inclusive (RFC 5280 §4.1.2.5), as the signer counts it:
	// a 24-hour validity ends one second before notBefore + 24h.
	case na != nil && na.Sub(start) >= max:
		return nil, nil, acme.Malformed("the requested validity is longer than profile %q allows (%d hours, counting both ends: notAfter at most notBefore + %d h - 1 s)", name, prof.ValidityHours, prof.ValidityHours)
	}
	return nb, na, nil
}

func hours(h, def int) time.Duration {
	if h <= 0 {
		h = def
	}
	return time.Duration(h) * time.Hour
}

func (s *Server) profileNames() []string {
	return slices.Sorted(maps.Keys(s.cfg.Profiles))
}

// ownedOrder loads the order in the path and checks the signer owns it.
func (s *Server) ownedOrder(p *post) (*store.Order, error) {
	id := mux.Vars(p.r)["id"]
	o, err := owned(s, p, orderAhead, "order", id, s.orderURL(id), func(o *store.Order) string { return o.AccountID })
	if err != nil {
		return nil, err
	}
	s.rememberOrder(o)
	return asSeen(o, p.now), nil
}

// asSeen is o as the client is answered at now, the database clock: an
// order still stored pending or ready past its expiry, which housekeeping
// (store.ExpirePending) has not moved yet, is invalid (RFC 8555 §7.1.6:
// "invalid: ... the order expired"). A zero now (no clock read) leaves o
// as stored.
func asSeen(o *store.Order, now time.Time) *store.Order {
	if now.IsZero() || now.Before(o.Expires) || (o.Status != acme.StatusPending && o.Status != acme.StatusReady) {
		return o
	}
	return lapsed(o)
}

// lapsed is o, pending or ready past its expiry, as invalid, with the
// problem type housekeeping stores (unauthorized) and a detail that says
// when it expired.
func lapsed(o *store.Order) *store.Order {
	c := *o
	c.Status = acme.StatusInvalid
	c.Error = &acme.Problem{Type: acme.ProblemUnauthorized, Detail: fmt.Sprintf("the order expired at %s before it was finalized", rfc3339(o.Expires))}
	return &c
}

// order answers POST-as-GET of an order.
func (s *Server) order(w http.ResponseWriter, p *post) error {
	if !p.isGet() {
		return acme.Malformed("an order is read with POST-as-GET: send an empty payload")
	}
	o, err := s.ownedOrder(p)
	if err != nil {
		return err
	}
	return s.answerOrder(w, p, o)
}

// answerOrder answers a read or finalize of o with 200: once the worker
// issued or failed it, if it is processing and that comes within
// server.verdict_wait_ms (await.go).
func (s *Server) answerOrder(w http.ResponseWriter, p *post, o *store.Order) error {
	o, err := s.settledOrder(p, o)
	if err != nil {
		return err
	}
	return s.writeOrder(w, http.StatusOK, o)
}
