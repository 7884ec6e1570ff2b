package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/hallmark-ca/hallmark/store"
)

// The audit actions of signing in and out; each is recorded in the
// transaction that creates or ends the session.
const (
	ActionLogin  = "admin.login"
	ActionLogout = "admin.logout"
)

// The login form trades the operator token for a session cookie, so a
// browser needs no Authorization header. Its own CSRF token is bound to a
// random cookie set when the form is shown, so a third-party page cannot
// log a browser into the panel either.

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, r, http.StatusOK, "")
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	nonce := ""
	if c, err := r.Cookie(loginCookie); err == nil && c.Value != "" && len(c.Value) < 64 {
		nonce = c.Value
	} else {
		nonce = randomID()
		http.SetCookie(w, s.auth.cookie(loginCookie, nonce, 0))
	}
	next := r.URL.Path
	if r.URL.RawQuery != "" {
		next += "?" + r.URL.RawQuery
	}
	if r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/login/") {
		next = r.URL.Query().Get("next")
	}
	data := map[string]any{"Message": msg, "Next": next, "TokenOff": s.auth.off}
	if s.oidc != nil {
		data["OIDC"] = s.oidc.o.Label()
		data["OIDCStart"] = "/login/oidc?" + string(query("next", safeNext(next)))
	}
	s.render(w, r, principal{seed: "login:" + nonce}, status, "login", data)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if s.auth.off {
		s.renderLogin(w, r, http.StatusForbidden, "The operator token is turned off here (admin.token_off): sign in with your client certificate.")
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !s.auth.csrfOK(r, "login:"+c.Value) {
		http.Error(w, "403 forbidden: the login form's CSRF token is missing or stale; reload the login page", http.StatusForbidden)
		return
	}
	user, tok := cleanUser(r.PostFormValue("user")), r.PostFormValue("token")
	ok, wait := s.tokenCheck(r, "login form", func() bool { return s.auth.tokenOK(tok) })
	if wait > 0 {
		secs := retryAfter(w, wait)
		s.renderLogin(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins from your address; try again in %d seconds.", secs))
		return
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hallmark admin"`)
		s.renderLogin(w, r, http.StatusUnauthorized, "That token is not the operator token.")
		return
	}
	cookie, id := s.auth.mintSession(user)
	signIn := store.AuditEvent{Actor: "admin:" + user, Action: ActionLogin, Subject: user, Detail: "from " + r.RemoteAddr}
	if err := s.st.sessions.AdminSessionCreate(r.Context(), sessionKey(id), user, sessionTTL, signIn); err != nil {
		s.fail(w, r, principal{}, err)
		return
	}
	http.SetCookie(w, s.auth.cookie(sessionCookie, cookie, sessionTTL))
	http.SetCookie(w, s.auth.cookie(loginCookie, "", -1))
	// Location is written as safeNext returns it: http.Redirect would clean
	// the path again, and cleaning can turn a path that looked local into
	// one a browser reads as another host's.
	w.Header().Set("Location", safeNext(r.PostFormValue("next")))
	w.WriteHeader(http.StatusSeeOther)
}

// logout ends the session in the store, so the cookie stops working on
// every replica even where a copy of it outlives this browser's.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, p principal) error {
	http.SetCookie(w, s.auth.cookie(sessionCookie, "", -1))
	if p.session != "" {
		signOut := store.AuditEvent{Actor: "admin:" + p.user, Action: ActionLogout, Subject: p.user}
		if err := s.st.sessions.AdminSessionEnd(r.Context(), sessionKey(p.session), signOut); err != nil {
			return err
		}
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// safeNext keeps a post-login redirect on this panel: it returns next as a
// cleaned absolute path (with its query, without a fragment), or "/" when
// next is anything else.
//
// The path is judged after cleaning, because that is what the browser
// follows: "/a/../\evil.example/" cleans to "/\evil.example/", and a
// browser reads "\" as "/" in an http(s) URL (WHATWG URL Standard), which
// makes it the scheme-relative "//evil.example/". So a backslash anywhere,
// a control character (browsers drop tabs and newlines), or a leading "//"
// is refused outright, and the cleaned path must not begin with "//" either.
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil {
		return "/"
	}
	p := path.Clean(u.EscapedPath())
	if strings.HasSuffix(u.EscapedPath(), "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// signInHint is the login page's line for a request without credentials:
// the ways in that this panel offers.
func (s *Server) signInHint() string {
	switch {
	case s.oidc != nil && s.auth.off:
		return "Sign in with " + s.oidc.o.Label() + "."
	case s.oidc != nil:
		return "Sign in with " + s.oidc.o.Label() + " or the operator token."
	case s.auth.off:
		return "Sign in with your client certificate."
	}
	return "Sign in with the operator token."
}
