package admin

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/renewal"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options builds a Server.
type Options struct {
	Store store.Store
	Queue jobs.Queue
	// Revoker is the shared revocation service (protocol/revocation).
	Revoker *revocation.Service
	// Token is the operator token (LoadToken), a bootstrap that signs in
	// as admin; with TokenOff the panel accepts client certificates only.
	Token    string
	TokenOff bool
	// CRLBase is where relying parties fetch CRLs (config ca.url_base),
	// to link each issuer's served CRL.
	CRLBase string
	// SecureCookies marks cookies Secure; set it when the panel is served
	// over TLS.
	SecureCookies bool
	// RevokeWait bounds how long a revocation through a relay/custom
	// backend is waited on before the page says it is queued.
	RevokeWait time.Duration
	// Profiles ([profiles]) give a certificate's default
	// renewal window; a profile not named has the default fractions.
	Profiles map[string]profile.Profile
	Logger   *slog.Logger
	// Version is the frontend's version, shown to signed-in operators.
	Version string
	// PauseAfter and PauseMinFailures are [limits]' pausing
	// (serverconf.Limits.Pause), for the pauses page; zero: off.
	PauseAfter       time.Duration
	PauseMinFailures int
	// Worker is the hallmark-worker binary the issuers page's create form
	// runs (operator.CreateIssuer), with ConfigPath, the configuration
	// file this process read: the key is made and the root signs in that
	// child, never in the panel's process. "": the one beside this binary.
	Worker     string
	ConfigPath string
	// OIDC turns on sign-in through an OpenID Connect provider
	// (LoadOIDC); nil: off.
	OIDC *OIDCOptions
}

// Server is the admin panel.
type Server struct {
	st      stores // the store, through the part each handler uses
	q       jobs.Queue
	live    atomic.Pointer[profiled] // switched by a frontend reload
	auth    *auth
	limit   *limiter // failed token checks per client address
	crlBase string
	wait    time.Duration
	version string
	pause   store.PauseRule // Options.Pause
	log     *slog.Logger
	pages   map[string]*template.Template
	mux     *http.ServeMux
	signIns signIns            // client certificates' sign-ins recorded lately
	newIss  operator.NewIssuer // Options.Worker and ConfigPath, for issuerCreate
	oidc    *oidcLogin         // nil: no OpenID Connect sign-in
}

// stores is the store as the panel's sign-in (admin.go, login.go) and its
// pages (pages.go) see it; New fills both from Options.Store.
type stores struct {
	sessions  store.AdminSessions
	operators operatorFinder
	pages     pageStore
	pauses    pauseStore           // pauses.go
	issuers   issuerStore          // issuers.go
	keys      keyStore             // api_ops.go
	audit     operator.AuditReader // api_ops.go: the export
}

// pageStore is what the pages read, and the operator actions, the CRL
// judgement and the renewal window they share with the CLI take.
type pageStore interface {
	store.AdminViews
	store.CRLReader
	operator.Store
	renewal.Store
	AccountsList(ctx context.Context, p store.Page) ([]*store.Account, string, error)
	AuditFind(ctx context.Context, f store.AuditFilter, p store.Page) ([]store.AuditEvent, string, error)
	AuthzByID(ctx context.Context, id string) (*store.Authorization, error)
	CertificateBySerial(ctx context.Context, serial string) (*store.Certificate, error)
	CertificatesList(ctx context.Context, f store.CertFilter, p store.Page) ([]*store.Certificate, string, error)
	KeysBlocked(ctx context.Context, limit int) ([]store.BlockedKey, error)
	EABCreate(ctx context.Context, k store.EABKey, ev store.AuditEvent) (*store.EABKey, error)
	EABDelete(ctx context.Context, id string, ev store.AuditEvent) error
	EABList(ctx context.Context, p store.Page) ([]*store.EABKey, string, error)
	Now(ctx context.Context) (time.Time, error)
	OrderByID(ctx context.Context, id string) (*store.Order, error)
	OrdersList(ctx context.Context, f store.OrderFilter, p store.Page) ([]*store.Order, string, error)
	UpstreamOrdersOf(ctx context.Context, orderID string) ([]store.UpstreamOrder, error)
	PerspectiveAnswers(ctx context.Context, challengeID string) ([]store.PerspectiveAnswer, time.Time, error)                               // perspectives.go
	RenewalMove(ctx context.Context, sel store.RenewalSelector, start, end time.Time, reason string, ev store.AuditEvent) ([]string, error) // renewal.go
}

// New builds the panel. It refuses a token shorter than MinTokenLength.
func New(o Options) (*Server, error) {
	if o.TokenOff {
		o.Token = randomID() + randomID() // keys the sessions' MACs; nobody holds it
	}
	if len(o.Token) < MinTokenLength {
		return nil, fmt.Errorf("the admin token is %d bytes; use at least %d", len(o.Token), MinTokenLength)
	}
	if o.Store == nil || o.Queue == nil || o.Revoker == nil {
		return nil, errors.New("admin: Store, Queue and Revoker are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := newAuth(o.Token, o.SecureCookies)
	a.off = o.TokenOff
	s := &Server{st: stores{sessions: o.Store, operators: o.Store, pages: o.Store, pauses: o.Store, issuers: o.Store, keys: o.Store, audit: o.Store}, q: o.Queue, auth: a, limit: newLimiter(func() time.Time { return a.now() }),
		crlBase: strings.TrimRight(o.CRLBase, "/"), wait: o.RevokeWait, version: o.Version, pause: store.PauseRule{After: o.PauseAfter, MinFailures: int64(o.PauseMinFailures)}, log: o.Logger, mux: http.NewServeMux()}
	s.newIss = operator.NewIssuer{Worker: o.Worker, Config: o.ConfigPath}
	if s.newIss.Worker == "" {
		// An error leaves it empty: creating then says the binary is missing.
		s.newIss.Worker, _ = operator.WorkerBeside()
	}
	s.Reload(o.Profiles, o.Revoker)
	if o.OIDC != nil {
		s.oidc = newOIDCLogin(*o.OIDC)
	}
	if err := s.parseTemplates(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// profiled is what the panel takes from [profiles]: each certificate's
// renewal window and where its revocation goes.
type profiled struct {
	profs map[string]profile.Profile
	rev   *revocation.Service
}

// Reload has the requests that start after it see profiles and rev (built
// over the same [profiles]): the frontend calls it when its own reload
// applies.
func (s *Server) Reload(profiles map[string]profile.Profile, rev *revocation.Service) {
	s.live.Store(&profiled{profs: profiles, rev: rev})
}

// Handler serves the panel. Every route but /login, /healthz and /static/
// needs credentials; every POST needs the CSRF token.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// No script runs here and nothing may frame the panel.
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		s.mux.ServeHTTP(w, r)
	})
}

func (s *Server) routes() {
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", filesOnly(static)))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	if s.oidc != nil {
		s.mux.HandleFunc("GET /login/oidc", s.oidcStart)
		s.mux.HandleFunc("GET "+adminconf.CallbackPath, s.oidcCallback)
	}
	s.mux.Handle("POST /logout", s.authed(store.RoleViewer, s.logout))
	s.mux.Handle("GET /{$}", s.authed(store.RoleViewer, s.overview))
	s.mux.Handle("GET /accounts", s.authed(store.RoleViewer, s.accounts))
	s.mux.Handle("GET /accounts/{id}", s.authed(store.RoleViewer, s.account))
	s.mux.Handle("POST /accounts/{id}/deactivate", s.authed(store.RoleOperator, s.accountDeactivate))
	s.mux.Handle("GET /orders", s.authed(store.RoleViewer, s.orders))
	s.mux.Handle("GET /orders/{id}", s.authed(store.RoleViewer, s.order))
	s.mux.Handle("GET /certs", s.authed(store.RoleViewer, s.certs))
	s.mux.Handle("GET /certs/{serial}", s.authed(store.RoleViewer, s.cert))
	s.mux.Handle("POST /certs/{serial}/revoke", s.authed(store.RoleOperator, s.revoke))
	s.mux.Handle("POST /certs/{serial}/ari-move", s.authed(store.RoleOperator, s.certARIMove))
	s.mux.Handle("GET /jobs", s.authed(store.RoleViewer, s.jobsPage))
	s.mux.Handle("GET /jobs/{id}", s.authed(store.RoleViewer, s.job))
	s.mux.Handle("POST /jobs/{id}/retry", s.authed(store.RoleOperator, s.jobRetry))
	s.mux.Handle("POST /jobs/{id}/abandon", s.authed(store.RoleOperator, s.jobAbandon))
	s.mux.Handle("GET /crls", s.authed(store.RoleViewer, s.crls))
	s.mux.Handle("GET /keys", s.authed(store.RoleViewer, s.keys))
	s.mux.Handle("GET /pauses", s.authed(store.RoleViewer, s.pauses))
	s.mux.Handle("POST /pauses/lift", s.authed(store.RoleOperator, s.pauseLift))
	s.mux.Handle("GET /issuers", s.authed(store.RoleViewer, s.issuersPage))
	// Issuer management is the admin's (issue 42's roles).
	s.mux.Handle("POST /issuers/create", s.authed(store.RoleAdmin, s.issuerCreate))
	s.mux.Handle("POST /issuers/rotate", s.authed(store.RoleAdmin, s.issuerRotate))
	s.mux.Handle("POST /issuers/{id}/retire", s.authed(store.RoleAdmin, s.issuerRetire))
	s.mux.Handle("GET /audit", s.authed(store.RoleViewer, s.audit))
	s.apiRoutes()
}

// storableRequest reports whether r's path and query values are text a
// store column can hold (valid UTF-8, no NUL).
func storableRequest(r *http.Request) bool {
	if !store.Storable(r.URL.Path) {
		return false
	}
	for _, vs := range r.URL.Query() {
		for _, v := range vs {
			if !store.Storable(v) {
				return false
			}
		}
	}
	return true
}

// handlerFunc is a page handler for an authenticated operator.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p principal) error

// authed refuses a request without valid credentials (401, with the login
// form for a browser), a client certificate no live operator holds (403),
// a bearer or basic token from an address with too many failed token
// checks (429, whether or not the token is right), a principal whose role
// does not allow need (403), and a POST without the principal's CSRF token
// (403).
func (s *Server) authed(need string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok, err := s.certPrincipal(r)
		var refused errCertRefused
		switch {
		case errors.As(err, &refused):
			s.log.Warn("admin: client certificate refused", "path", r.URL.Path, "why", refused.Error())
			http.Error(w, "403 forbidden: "+refused.Error(), http.StatusForbidden)
			return
		case err != nil:
			s.fail(w, r, principal{}, err)
			return
		case ok:
		case headerCredential(r) != "":
			var wait time.Duration
			ok, wait = s.tokenCheck(r, headerCredential(r), func() (good bool) { p, good = s.auth.authenticate(r); return good })
			if wait > 0 {
				secs := retryAfter(w, wait)
				http.Error(w, fmt.Sprintf("429 too many requests: too many failed authentications from your address; retry in %d seconds", secs), http.StatusTooManyRequests)
				return
			}
		default:
			p, ok = s.auth.authenticate(r)
		}
		if ok && p.session != "" {
			// The cookie's MAC says the panel minted it; the row says it
			// has not been signed out (on any replica) or expired.
			op, err := s.st.sessions.AdminSessionOperator(r.Context(), sessionKey(p.session))
			switch {
			case errors.Is(err, store.ErrNotFound) || (err == nil && op != p.user):
				ok = false
			case err != nil:
				s.fail(w, r, principal{}, err)
				return
			}
		}
		if ok && p.cred != "" {
			if p.role, err = s.liveRole(r, p); err != nil {
				s.fail(w, r, principal{}, err)
				return
			}
			ok = p.role != ""
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hallmark admin"`)
			s.renderLogin(w, r, http.StatusUnauthorized, s.signInHint())
			return
		}
		if !p.can(need) {
			s.log.Warn("admin: refused for the operator's role", "user", p.user, "role", p.role, "path", r.URL.Path, "needs", need)
			http.Error(w, fmt.Sprintf("403 forbidden: operator %s has role %s; this needs %s", p.user, p.role, need), http.StatusForbidden)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !s.auth.csrfOK(r, p.seed) {
				s.log.Warn("admin: form post refused: missing or wrong CSRF token", "user", p.user, "path", r.URL.Path)
				http.Error(w, "403 forbidden: the form's CSRF token is missing or does not belong to your session; reload the page and submit it again", http.StatusForbidden)
				return
			}
		}
		if !storableRequest(r) {
			// No record's ID or filter value holds a NUL or invalid UTF-8,
			// and PostgreSQL refuses such text as a parameter: answered
			// here rather than as a store failure.
			s.render(w, r, p, http.StatusBadRequest, "error", map[string]any{
				"Message": "the address holds a character no record or filter can contain", "Status": http.StatusBadRequest})
			return
		}
		if err := h(w, r, p); err != nil {
			s.fail(w, r, p, err)
		}
	})
}

// errNotFound renders 404 with its message.
type errNotFound string

func (e errNotFound) Error() string { return string(e) }

// errBadRequest renders 400 with its message: a filter the operator typed
// that cannot be read.
type errBadRequest string

func (e errBadRequest) Error() string { return string(e) }

func (s *Server) fail(w http.ResponseWriter, r *http.Request, p principal, err error) {
	status, msg := http.StatusInternalServerError, "the panel could not read the store; see the frontend's log"
	var nf errNotFound
	var br errBadRequest
	switch {
	case errors.As(err, &nf):
		status, msg = http.StatusNotFound, nf.Error()
	case errors.As(err, &br):
		status, msg = http.StatusBadRequest, br.Error()
	case errors.Is(err, store.ErrNotFound), errors.Is(err, jobs.ErrJobNotFound):
		status, msg = http.StatusNotFound, "no such record: "+r.URL.Path
	case errors.Is(err, context.Canceled):
		return
	default:
		s.log.Error("admin: page failed", "path", r.URL.Path, "user", p.user, "err", err)
	}
	s.render(w, r, p, status, "error", map[string]any{"Message": msg, "Status": status})
}

// view is what every page template gets.
type view struct {
	Title   string
	Version string // the frontend's; the layout shows it to signed-in operators
	Nav     string
	User    string
	Role    string // the operator's; Can hides what it does not allow
	ByCert  bool   // signed in by client certificate: nothing to sign out of
	CSRF    string
	Flash   string
	Now     time.Time
	Data    any
}

// Can reports whether the signed-in operator's role allows need: the
// templates show a form only to those who may submit it.
func (v view) Can(need string) bool { return store.RoleAllows(v.Role, need) }

func (s *Server) render(w http.ResponseWriter, r *http.Request, p principal, status int, page string, data any) {
	t, ok := s.pages[page]
	if !ok {
		http.Error(w, "no template "+page, http.StatusInternalServerError)
		return
	}
	v := view{Title: page, Version: s.version, Nav: page, User: p.user, Role: p.role, ByCert: strings.HasPrefix(p.seed, "cert:"), Now: time.Now(), Data: data}
	if p.seed != "" {
		v.CSRF = s.auth.csrfToken(p.seed)
	}
	// The notice comes from a cookie the redirecting form handler signed
	// (redirectNotice), never from the address: a link cannot make the
	// panel say anything. It is shown once.
	if c, err := r.Cookie(flashCookie); err == nil {
		if p.seed != "" {
			v.Flash, _ = s.auth.parseFlash(p.seed, c.Value)
		}
		http.SetCookie(w, s.auth.cookie(flashCookie, "", -1))
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		s.log.Error("admin: rendering", "page", page, "err", err)
		http.Error(w, "500 the page could not be rendered; see the frontend's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// redirectNotice answers a form post with 303 to path, and msg in the
// notice box of the page the browser lands on (a signed, short-lived
// cookie bound to p's session; see newFlash).
func (s *Server) redirectNotice(w http.ResponseWriter, r *http.Request, p principal, path, msg string) {
	http.SetCookie(w, s.auth.cookie(flashCookie, s.auth.newFlash(p.seed, msg), flashTTL))
	http.Redirect(w, r, path, http.StatusSeeOther)
}
