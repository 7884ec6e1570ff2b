package admin

import (
	"net/http"
	"net/url"
	"strings"
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
	if r.URL.Path == "/login" {
		next = r.URL.Query().Get("next")
	}
	s.render(w, r, principal{seed: "login:" + nonce}, status, "login", map[string]any{"Message": msg, "Next": next})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	c, err := r.Cookie(loginCookie)
	if err != nil || !s.auth.csrfOK(r, "login:"+c.Value) {
		http.Error(w, "403 forbidden: the login form's CSRF token is missing or stale; reload the login page", http.StatusForbidden)
		return
	}
	user := cleanUser(r.PostFormValue("user"))
	if !s.auth.tokenOK(r.PostFormValue("token")) {
		s.log.Warn("admin: login refused: wrong token", "user", user, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="hallmark admin"`)
		s.renderLogin(w, r, http.StatusUnauthorized, "That token is not the operator token.")
		return
	}
	http.SetCookie(w, s.auth.cookie(sessionCookie, s.auth.newSession(user), sessionTTL))
	http.SetCookie(w, s.auth.cookie(loginCookie, "", -1))
	s.record(r.Context(), principal{user: user}, "admin.login", user, "from "+r.RemoteAddr)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, p principal) error {
	http.SetCookie(w, s.auth.cookie(sessionCookie, "", -1))
	s.record(r.Context(), p, "admin.logout", p.user, "")
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// safeNext keeps a post-login redirect on this panel.
func safeNext(n string) string {
	u, err := url.Parse(n)
	if n == "" || err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(n, "/") || strings.HasPrefix(n, "//") || strings.HasPrefix(n, "/\\") {
		return "/"
	}
	return n
}
