package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/protocol/nonce"
	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/store"
)

// The paths the server serves, relative to server.base_url.
const (
	pathDirectory  = "/directory"
	pathNewNonce   = "/acme/new-nonce"
	pathNewAccount = "/acme/new-account"
	pathNewOrder   = "/acme/new-order"
	pathRevokeCert = "/acme/revoke-cert"
	pathKeyChange  = "/acme/key-change"
	pathAccount    = "/acme/acct/"
	pathOrder      = "/acme/order/"
	pathAuthz      = "/acme/authz/"
	pathChallenge  = "/acme/chall/"
	pathCert       = "/acme/cert/"
	pathCRL        = "/crl/"
	pathIssuer     = "/issuer/"
)

// Options are the frontend's collaborators that are not configuration.
type Options struct {
	// Logger receives request failures with their private causes. Default:
	// slog.Default().
	Logger *slog.Logger
	// Registry is where the request metrics are registered. Default: a new
	// registry of the server's own.
	Registry prometheus.Registerer
	// Gatherer is what /metrics serves. Default: Registry if it is also a
	// Gatherer, else prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
}

// Server is the ACME frontend. It is safe for concurrent use.
type Server struct {
	cfg     config.Config
	base    string // server.base_url without a trailing slash
	st      store.Store
	nonces  *nonce.Service
	keys    keyCache
	unbound memo[struct{}] // accounts without an external account binding (eab.go)
	// lastKeys: each account's stored key JSON as of its latest request, a
	// guess to verify with while the nonce is consumed (ahead.go).
	lastKeys memo[string]
	// orders: what never changes about an order (its account, identifiers
	// and profile), for finalizing it folded (fold.go).
	orders memo[orderFacts]
	// reuses: whether each account's latest ordinary newOrder found an
	// authorization to reuse; a newOrder is folded only after one that
	// found none (newOrderFolded).
	reuses memo[bool]
	// clock: the database's clock as the latest nonce answer read it, for
	// a folded newOrder's times (fold.go).
	clock   dbClock
	policy  *policy.Policy
	log     *slog.Logger
	permits chan struct{}
	timeout time.Duration
	retry   time.Duration
	outages outageLog // requests refused for a database outage (outage.go)
	gather  prometheus.Gatherer
	metrics metrics
	handler http.Handler
}

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	rejected prometheus.Counter
	inFlight prometheus.Gauge
}

// New builds the frontend for cfg on st. It loads the shared nonce key from
// the store, so the store must be migrated and reachable.
func New(cfg config.Config, st store.Store, opts Options) (*Server, error) {
	base := strings.TrimRight(cfg.Server.BaseURL, "/")
	if !strings.HasPrefix(base, "https://") && !strings.HasPrefix(base, "http://") {
		return nil, fmt.Errorf("server.base_url must be an absolute http(s) URL, got %q", cfg.Server.BaseURL)
	}
	if _, ok := cfg.Profiles[cfg.DefaultProfile]; !ok {
		return nil, fmt.Errorf("default_profile %q is not a configured profile", cfg.DefaultProfile)
	}
	s := &Server{cfg: cfg, base: base, st: st, log: opts.Logger}
	s.unbound.max = 100_000 // account IDs are small
	if s.log == nil {
		s.log = slog.Default()
	}
	s.cfg.Server.BaseURL = base
	s.timeout = cfg.RequestTimeout()
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	s.retry = time.Duration(cfg.Server.RetryAfterSeconds) * time.Second
	if s.retry <= 0 {
		s.retry = time.Second
	}
	n := cfg.Server.MaxConcurrentRequests
	if n < 1 {
		n = 1
	}
	s.permits = make(chan struct{}, n)
	if s.cfg.Server.MaxBodyBytes <= 0 {
		s.cfg.Server.MaxBodyBytes = 64 << 10
	}

	lifetime := time.Duration(cfg.Server.NonceLifetimeSeconds) * time.Second
	if lifetime <= 0 {
		lifetime = time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	ns, err := nonce.New(ctx, st, lifetime)
	if err != nil {
		return nil, fmt.Errorf("loading the nonce key: %w", err)
	}
	s.nonces = ns
	pol, err := policy.New(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("building the identifier policy: %w", err)
	}
	s.policy = pol

	reg := opts.Registry
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, s.gather = r, r
	}
	if opts.Gatherer != nil {
		s.gather = opts.Gatherer
	} else if s.gather == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			s.gather = g
		} else {
			s.gather = prometheus.DefaultGatherer
		}
	}
	s.metrics = metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hallmark_frontend_requests_total",
			Help: "ACME requests answered, by endpoint and HTTP status.",
		}, []string{"endpoint", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hallmark_frontend_request_duration_seconds",
			Help:    "Time to answer an ACME request, by endpoint.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hallmark_frontend_admission_rejected_total",
			Help: "Requests answered 503 because server.max_concurrent_requests were already in handlers.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hallmark_frontend_requests_in_flight",
			Help: "Requests holding an admission permit.",
		}),
	}
	for _, c := range []prometheus.Collector{s.metrics.requests, s.metrics.latency, s.metrics.rejected, s.metrics.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	s.handler = s.routes()
	return s, nil
}

// Handler is the public listener's handler: the ACME API, /crl/{issuer},
// /healthz, /readyz and /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// PublicHandler serves only what relying parties fetch over plain http —
// CRLs and issuer certificates — for the frontend's public_http_listen.
// It never serves the ACME API.
func (s *Server) PublicHandler() http.Handler {
	r := mux.NewRouter()
	s.publicRoutes(r)
	return r
}

// publicRoutes are the CRL and issuer routes. They touch the store, so they
// take a permit too.
func (s *Server) publicRoutes(r *mux.Router) {
	methods := []string{http.MethodGet, http.MethodHead}
	r.Handle(pathCRL+"{issuer}", s.instrument("crl", true, methodsOnly(methods, s.crl)))
	r.Handle(pathIssuer+"{issuer}", s.instrument("issuer", true, methodsOnly(methods, s.issuerCert)))
}

// Ready reports whether the server can answer requests: the store answers.
func (s *Server) Ready(ctx context.Context) error {
	if err := s.st.Ping(ctx); err != nil {
		return fmt.Errorf("pinging the store: %w", err)
	}
	return nil
}

// keyMode says which key a POST must be signed with (RFC 8555 §6.2).
type keyMode int

const (
	kidOnly  keyMode = iota // the account's key, named by "kid"
	jwkOnly                 // a key in the header: newAccount
	kidOrJWK                // revokeCert: the account's, or the certificate's own
)

// post is a verified ACME POST.
type post struct {
	r       *http.Request
	url     string // the request URL as the client signed it
	jwk     any    // the header's key, for kidOrJWK requests signed by the certificate key
	payload []byte
	acct    *store.Account // set iff signed with "kid"
	rawJWK  []byte         // the header's JWK as JSON (jwk requests)
	thumb   string         // the header's key thumbprint (jwk requests)
	now     time.Time      // the database clock when the nonce was consumed
	ahead   *aheadResult   // the route's first read, made while the nonce was consumed (ahead.go)
	aheadOf store.Lookup   // what ahead read
}

// isGet reports a POST-as-GET: an empty payload (RFC 8555 §6.3).
func (p *post) isGet() bool { return len(p.payload) == 0 }

func (s *Server) routes() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = s.instrument("not_found", false, func(w http.ResponseWriter, r *http.Request) error {
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed, Status: http.StatusNotFound,
			Detail: fmt.Sprintf("there is no ACME resource at %s; start from %s", r.URL.Path, s.base+pathDirectory)}}
	})

	get := func(path, name string, h func(http.ResponseWriter, *http.Request) error, methods ...string) {
		r.Handle(path, s.instrument(name, false, methodsOnly(methods, h)))
	}
	get(pathDirectory, "directory", s.directory, http.MethodGet, http.MethodHead)
	get(pathNewNonce, "new_nonce", s.newNonce, http.MethodGet, http.MethodHead)
	// ari.go; they read the store, so they take a permit.
	r.Handle(pathRenewalInfo+"{certid}", s.instrument("renewal_info", true, methodsOnly([]string{http.MethodGet, http.MethodHead}, s.renewalInfo)))
	r.Handle(pathRenewalExplanation+"{serial}", s.instrument("renewal_explanation", true, methodsOnly([]string{http.MethodGet, http.MethodHead}, s.renewalExplanation)))

	// ahead names the route's first read, made with the nonce (ahead.go);
	// nil for routes whose first read needs the payload.
	postRoute := func(path, name string, mode keyMode, h func(http.ResponseWriter, *post) error, ahead readAhead) {
		r.Handle(path, s.instrument(name, true, methodsOnly([]string{http.MethodPost}, s.verified(mode, h, ahead, nil))))
	}
	postRoute(pathNewAccount, "new_account", jwkOnly, s.newAccount, nil)
	postRoute(pathNewAuthz, "new_authz", kidOnly, s.newAuthz, nil) // newauthz.go
	postRoute(pathRevokeCert, "revoke_cert", kidOrJWK, s.revokeCert, nil)
	postRoute(pathKeyChange, "key_change", kidOnly, s.keyChange, nil)
	postRoute(pathAccount+"{id}", "account", kidOnly, s.account, nil)
	postRoute(pathAccount+"{id}/orders", "account_orders", kidOnly, s.accountOrders, nil)
	postRoute(pathOrder+"{id}", "order", kidOnly, s.order, orderAhead)
	postRoute(pathAuthz+"{id}", "authz", kidOnly, s.authz, authzAhead)
	// newOrder, the challenge POST and finalize are tried folded first
	// (fold.go).
	foldedRoute := func(path, name string, h func(http.ResponseWriter, *post) error, ahead readAhead, fold folded) {
		r.Handle(path, s.instrument(name, true, methodsOnly([]string{http.MethodPost}, s.verified(kidOnly, h, ahead, fold))))
	}
	foldedRoute(pathNewOrder, "new_order", s.newOrder, s.newOrderAhead, s.newOrderFolded)
	foldedRoute(pathOrder+"{id}/finalize", "finalize", s.finalize, orderAhead, s.finalizeFolded)
	foldedRoute(pathChallenge+"{id}", "challenge", s.challenge, challengeAhead, s.challengeFolded)
	postRoute(pathCert+"{serial}", "cert", kidOnly, s.cert, certAhead)

	// The CRL touches the store, so it takes a permit too.
	s.publicRoutes(r)

	r.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}))
	r.Handle("/readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.Ready(ctx); err != nil {
			s.log.Warn("not ready", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready: the store does not answer\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	r.Handle("/metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	return r
}

// methodsOnly answers 405 with Allow for any other method (RFC 8555 §6.3:
// resources other than the directory and newNonce are fetched by POST-as-GET).
func methodsOnly(methods []string, h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	allow := strings.Join(methods, ", ")
	return func(w http.ResponseWriter, r *http.Request) error {
		for _, m := range methods {
			if r.Method == m {
				return h(w, r)
			}
		}
		w.Header().Set("Allow", allow)
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed, Status: http.StatusMethodNotAllowed,
			Detail: fmt.Sprintf("method %s is not allowed here; use %s", r.Method, allow)}}
	}
}

// statusWriter remembers the status for the metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument wraps every ACME endpoint: metrics, the headers every response
// carries (Replay-Nonce, Link rel="index"), the admission permit and the
// deadline when admit is set, and rendering a returned error as a problem.
func (s *Server) instrument(name string, admit bool, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		defer func() {
			status := w.status
			if status == 0 {
				status = http.StatusOK
			}
			s.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
			s.metrics.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
		}()
		// RFC 8555 §6.5: every response to a POST carries a Replay-Nonce,
		// error responses too; we put one on every ACME response so a
		// client never needs an extra newNonce round trip. Issue writes
		// nothing to the database.
		if name != "crl" {
			w.Header().Set("Replay-Nonce", s.nonces.Issue())
			w.Header().Set("Cache-Control", "no-store")
			if name != "directory" {
				// RFC 8555 §7.1: "index" link on every resource but the directory.
				w.Header().Add("Link", link(s.base+pathDirectory, "index"))
			}
		}
		if admit {
			// At most max_concurrent_requests in handlers; beyond that the
			// answer is an immediate 503, never a queue that grows without
			// bound while clients time out.
			select {
			case s.permits <- struct{}{}:
				s.metrics.inFlight.Inc()
				defer func() { <-s.permits; s.metrics.inFlight.Dec() }()
			default:
				s.metrics.rejected.Inc()
				s.problem(w, r, acme.Unavailable(s.retry, "the server is busy; retry in %d seconds", int(s.retry/time.Second)))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
			defer cancel()
			r = r.WithContext(ctx)
			// The deadline covers reading the body too: a client that
			// trickles its body does not hold a permit past it.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.timeout))
		}
		if !store.Storable(r.URL.Path) {
			// No URL of ours has a NUL or invalid UTF-8 in it, and
			// PostgreSQL refuses such text as a parameter: answered here,
			// it never reaches the store as a read that fails with 500.
			s.problem(w, r, &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed, Status: http.StatusNotFound,
				Detail: fmt.Sprintf("there is no resource at %q", r.URL.Path)}})
			return
		}
		if err := h(w, r); err != nil {
			var ae *acme.Error
			if name != "crl" && errors.As(err, &ae) && ae.Problem.Type == acme.ProblemBadNonce {
				// The nonce above was minted before the refusal, which may
				// have taught the service a new epoch (protocol/nonce):
				// the retry the client makes with this one must succeed.
				w.Header().Set("Replay-Nonce", s.nonces.Issue())
			}
			s.problem(w, r, err)
		}
	})
}

// verified runs the checks every ACME POST goes through, in order: content
// type, body size, JWS shape (jws.Parse), url == the request URL (RFC 8555
// §6.4), nonce (§6.5), key by kid or jwk (§6.2), signature. Only then does
// the handler see the payload, and ahead's read if the route has one.
func (s *Server) verified(mode keyMode, h func(http.ResponseWriter, *post) error, ahead readAhead, fold folded) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || ct != "application/jose+json" {
			// RFC 8555 §6.2: the server MUST reject other media types; 415
			// says which part was wrong.
			return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed, Status: http.StatusUnsupportedMediaType,
				Detail: fmt.Sprintf("the Content-Type must be application/jose+json, got %q", r.Header.Get("Content-Type"))}}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Server.MaxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed, Status: http.StatusRequestEntityTooLarge,
					Detail: fmt.Sprintf("request body too large: the limit is %d bytes", s.cfg.Server.MaxBodyBytes)}}
			}
			return acme.Malformed("reading the request body: %v", err)
		}
		msg, err := jws.Parse(body)
		if err != nil {
			return err
		}
		want := s.base + r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			want += "?" + r.URL.RawQuery
		}
		if msg.URL != want {
			// RFC 8555 §6.4: "If the two do not match, then the server MUST
			// reject the request as unauthorized."
			return acme.Unauthorized("the JWS url %q does not match the request URL %q", msg.URL, want)
		}
		// The nonce is consumed, the kid's account read and the route's
		// first read made in one store round trip, batched with other
		// requests' (protocol/nonce). A kid that is no account URL of ours
		// consumes the nonce all the same. Meanwhile this goroutine
		// guesses the signature's key (ahead.go); nothing read is trusted
		// until the request is verified.
		acctID, kidErr := s.kidAccountID(msg.KeyID)
		var guess *guessed
		if fold != nil && acctID != "" && mode != jwkOnly && s.st.Folds() {
			var done bool
			if done, guess, err = s.tryFold(w, r, want, msg, acctID, fold); done {
				return err
			}
		}
		var first store.Lookup
		if acctID != "" && mode != jwkOnly && ahead != nil {
			if l := ahead(r, msg, acctID); aheadID(l.ID) {
				first = l
			}
		}
		var meanwhile func()
		if guess == nil && acctID != "" && mode != jwkOnly {
			meanwhile = func() { guess = s.guess(msg, acctID) }
		}
		red := s.nonces.Begin(r.Context(), msg.Nonce, acctID, first, meanwhile)
		acct, now, err := red.Wait(r.Context())
		if err != nil {
			return s.storeErr(err, "consuming the nonce")
		}
		s.clock.observe(now)
		p := &post{r: r, url: want, now: now}
		if v, err, ok := red.Found(); ok {
			p.ahead, p.aheadOf = &aheadResult{v: v, err: err}, first
		}
		switch {
		case msg.KeyID != "":
			if mode == jwkOnly {
				return acme.Malformed("this request must be signed with a \"jwk\" header naming the new account's key, not \"kid\"")
			}
			if kidErr != nil {
				return kidErr
			}
			key, err := s.accountKey(msg.KeyID, acct)
			if err != nil {
				return err
			}
			res, ok := guess.resultFor(acct.KeyJWK)
			if !ok {
				// No guess, or a stale one: remember the key for the
				// account's next request.
				s.lastKeys.put(acct.ID, string(acct.KeyJWK))
				res.payload, res.err = msg.Verify(key)
			}
			if res.err != nil {
				return res.err
			}
			p.payload = res.payload
			p.acct = acct
		default:
			if mode == kidOnly {
				return acme.Malformed("this request must be signed with the account key named by a \"kid\" header, not \"jwk\"")
			}
			if p.payload, err = msg.Verify(msg.JWK); err != nil {
				return err
			}
			p.jwk = msg.JWK.Key
			if p.rawJWK, p.thumb, err = jwkIdentity(msg.JWK); err != nil {
				return err
			}
		}
		return h(w, p)
	}
}

// kidAccountID is the account id a "kid" names (RFC 8555 §6.2: kid is the
// account URL); "" and accountDoesNotExist when it is no account URL of
// this server, or there is no kid.
func (s *Server) kidAccountID(kid string) (string, error) {
	if kid == "" {
		return "", nil
	}
	prefix := s.base + pathAccount
	id, ok := strings.CutPrefix(kid, prefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", acme.New(acme.ProblemAccountDoesNotExist, "the kid %q is not an account URL of this server (%s<id>)", kid, prefix)
	}
	return id, nil
}

// accountKey checks that acct, the account kid names (nil if none), may
// sign requests, and returns its key.
func (s *Server) accountKey(kid string, acct *store.Account) (*publicKey, error) {
	if acct == nil {
		return nil, acme.New(acme.ProblemAccountDoesNotExist, "there is no account %s", kid)
	}
	if acct.Status != acme.StatusValid {
		// RFC 8555 §7.3.6: requests signed by a deactivated account's key
		// MUST be rejected with 401 unauthorized.
		return nil, acme.Deactivated("the account %s is %s and can no longer make requests", kid, acct.Status)
	}
	key, err := s.keys.parse(acct.KeyJWK)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("account %s has an unreadable key: %w", acct.ID, err))
	}
	return key, nil
}

// storeErr names what a failed store call was doing, for the log. The
// renderer decides what the client sees (problem): a database outage or a
// deadline that ran out is a 503 to retry, anything else a logged
// serverInternal.
func (s *Server) storeErr(err error, doing string) error {
	var ae *acme.Error
	if errors.As(err, &ae) {
		return err
	}
	return acme.Internal(fmt.Errorf("%s: %w", doing, err))
}

// URL builders. Every URL the server emits is built from server.base_url.
func (s *Server) accountURL(id string) string  { return s.base + pathAccount + id }
func (s *Server) orderURL(id string) string    { return s.base + pathOrder + id }
func (s *Server) finalizeURL(id string) string { return s.base + pathOrder + id + "/finalize" }
func (s *Server) authzURL(id string) string    { return s.base + pathAuthz + id }
func (s *Server) challURL(id string) string    { return s.base + pathChallenge + id }
func (s *Server) certURL(serial string) string { return s.base + pathCert + serial }

func (s *Server) profile(name string) (config.Profile, bool) {
	p, ok := s.cfg.Profiles[name]
	return p, ok
}
