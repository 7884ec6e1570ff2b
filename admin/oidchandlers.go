package admin

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
	"github.com/hallmark-ca/hallmark/store"
)

// oidcStart begins a sign-in: a fresh state, nonce and PKCE verifier in
// the flow cookie, and the browser sent to the provider. It is a GET (a
// link on the login page) because the panel's form-action policy would
// stop a form's redirect to another origin; it changes nothing until the
// callback, which only the flow's own browser can complete.
func (s *Server) oidcStart(w http.ResponseWriter, r *http.Request) {
	p, err := s.oidc.provider()
	if err != nil {
		s.log.Error("admin: OpenID provider unreachable", "err", err)
		s.renderLogin(w, r, http.StatusBadGateway, "The identity provider could not be reached; try again, or see the frontend's log.")
		return
	}
	f := oidcFlow{State: randomID(), Nonce: randomID(), Verifier: oauth2.GenerateVerifier(),
		Next: safeNext(r.URL.Query().Get("next")), Expires: s.auth.now().Add(oidcFlowTTL).Unix()}
	http.SetCookie(w, s.auth.flowCookie(s.auth.sealFlow(f), oidcFlowTTL))
	u := s.oidc.oauth(p).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	http.Redirect(w, r, u, http.StatusFound)
}

// oidcCallback completes a sign-in: the flow cookie must be this panel's,
// unexpired, and its state the one the provider returned; the code is
// exchanged with the PKCE verifier and the ID token verified; then the
// identity must be a live operator's.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, s.auth.flowCookie("", -1)) // one use, whatever happens
	c, err := r.Cookie(oidcCookie)
	var f oidcFlow
	ok := err == nil
	if ok {
		f, ok = s.auth.openFlow(c.Value)
	}
	q := r.URL.Query()
	switch {
	case !ok:
		s.renderLogin(w, r, http.StatusBadRequest, "This sign-in expired or was begun in another browser; sign in again.")
		return
	case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1:
		s.log.Warn("admin: OpenID callback refused: its state is not this browser's sign-in", "from", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusBadRequest, "The identity provider's answer is not for the sign-in this browser began; sign in again.")
		return
	case q.Get("error") != "":
		s.renderLogin(w, r, http.StatusUnauthorized, fmt.Sprintf("The identity provider refused the sign-in: %s %s", cleanUser(q.Get("error")), printable(q.Get("error_description"), 200)))
		return
	}
	id, err := s.oidcExchange(r, q.Get("code"), f)
	if err != nil {
		s.log.Warn("admin: OpenID sign-in refused", "err", err, "from", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, "The identity provider's answer could not be verified; see the frontend's log.")
		return
	}
	s.oidcSignIn(w, r, id, f.Next)
}

func (s *Server) oidcExchange(r *http.Request, code string, f oidcFlow) (oidcIdentity, error) {
	p, err := s.oidc.provider()
	if err != nil {
		return oidcIdentity{}, err
	}
	ctx := oidc.ClientContext(r.Context(), s.oidc.client)
	tok, err := s.oidc.oauth(p).Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return oidcIdentity{}, fmt.Errorf("exchanging the code: %w", err)
	}
	return s.oidc.identity(r.Context(), tok, f.Nonce)
}

// oidcSignIn starts the session of the operator bound to id, or refuses an
// identity no live operator holds, with a page saying what an admin can do
// and an audit row.
func (s *Server) oidcSignIn(w http.ResponseWriter, r *http.Request, id oidcIdentity, next string) {
	cred := adminconf.OIDCIdentity(id.Issuer, id.Subject)
	op, err := s.st.operators.OperatorByCert(r.Context(), cred)
	why := ""
	switch {
	case errors.Is(err, store.ErrNotFound):
		why = "no operator holds this identity"
	case err != nil:
		s.fail(w, r, principal{}, err)
		return
	case op.RevokedAt != nil:
		why = "operator " + op.Name + " is revoked"
	case s.auth.now().After(op.NotAfter):
		why = "operator " + op.Name + "'s sign-in expired"
	case cleanUser(op.Name) != op.Name:
		// A session's cookie carries the name cleaned (cleanUser), and
		// the session must name the row's operator exactly.
		why = fmt.Sprintf("operator name %q has spaces or characters a session cannot carry; an admin can add the identity again under a plain name", op.Name)
	}
	detail := fmt.Sprintf("method oidc, issuer %s, subject %s, name %q, from %s", id.Issuer, id.Subject, id.Name, r.RemoteAddr)
	if why != "" {
		s.oidcRefuse(w, r, id, why, detail)
		return
	}
	cookie, sid := s.auth.mintSessionFor(op.Name, cred)
	signIn := store.AuditEvent{Actor: "admin:" + op.Name, Action: ActionLogin, Subject: op.Name, Detail: detail}
	if err := s.st.sessions.AdminSessionCreate(r.Context(), sessionKey(sid), op.Name, sessionTTL, signIn); err != nil {
		s.fail(w, r, principal{}, err)
		return
	}
	http.SetCookie(w, s.auth.cookie(sessionCookie, cookie, sessionTTL))
	// A page, not a redirect: the browser came here from the provider, and
	// a redirect would carry on that cross-site navigation, on which the
	// Strict session cookie is not sent. This page's own navigation is
	// the panel's.
	s.render(w, r, principal{}, http.StatusOK, "signedin", map[string]any{"Next": next, "Name": op.Name, "Role": op.Role})
}

func (s *Server) oidcRefuse(w http.ResponseWriter, r *http.Request, id oidcIdentity, why, detail string) {
	s.log.Warn("admin: OpenID sign-in refused", "why", why, "issuer", id.Issuer, "subject", id.Subject, "name", id.Name)
	ev := store.AuditEvent{Actor: "oidc:" + cleanUser(id.Name), Action: ActionLoginRefused, Subject: id.Subject, Detail: why + "; " + detail}
	if err := s.st.operators.AuditRecord(r.Context(), ev); err != nil {
		s.fail(w, r, principal{}, err)
		return
	}
	who := id.Subject
	if id.Name != "" {
		who = id.Name + " (subject " + id.Subject + ")"
	}
	s.renderLogin(w, r, http.StatusForbidden, fmt.Sprintf("%s cannot sign in here: %s. An admin can bind it to an operator with `hallmark operators add NAME --role viewer --oidc-subject %s`.", who, why, id.Subject))
}

// liveRole is the role of an OpenID Connect session's operator as their
// row says now: "" (signed out) when the row is gone, revoked, expired or
// names someone else, so revoking an operator ends their sessions too.
func (s *Server) liveRole(r *http.Request, p principal) (string, error) {
	op, err := s.st.operators.OperatorByCert(r.Context(), p.cred)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case op.Name != p.user || op.RevokedAt != nil || s.auth.now().After(op.NotAfter):
		return "", nil
	}
	return op.Role, nil
}
