package protocol

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	// pathRelayToken serves relay backends' http-01 answers (relaytoken.go).
	pathRelayToken = "/.well-known/acme-challenge/"
)

// URL builders. Every URL the server emits is built from server.base_url.
func (s *Server) accountURL(id string) string  { return s.base + pathAccount + id }
func (s *Server) orderURL(id string) string    { return s.base + pathOrder + id }
func (s *Server) finalizeURL(id string) string { return s.base + pathOrder + id + "/finalize" }
func (s *Server) authzURL(id string) string    { return s.base + pathAuthz + id }
func (s *Server) challURL(id string) string    { return s.base + pathChallenge + id }
func (s *Server) certURL(serial string) string { return s.base + pathCert + serial }

// Handler is the public listener's handler: the ACME API, /crl/{issuer}[/{shard}],
// /healthz, /readyz and /metrics.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveLive) }

// PublicHandler serves only what relying parties fetch over plain http —
// CRLs and issuer certificates — and the http-01 answers of relay backends
// for their upstream's validator, for the frontend's public_http_listen.
// It never serves the ACME API.
func (s *Server) PublicHandler() http.Handler {
	r := mux.NewRouter()
	s.publicRoutes(r)
	return s.withOrigin(r)
}

// publicRoutes are the CRL and issuer routes. They touch the store, so they
// take a permit too.
func (s *Server) publicRoutes(r *mux.Router) {
	methods := []string{http.MethodGet, http.MethodHead}
	r.Handle(pathCRL+"{issuer}", s.instrument("crl", true, methodsOnly(methods, s.crl)))
	r.Handle(pathCRL+"{issuer}/{shard}", s.instrument("crl", true, methodsOnly(methods, s.crl)))
	r.Handle(pathIssuer+"{issuer}", s.instrument("issuer", true, methodsOnly(methods, s.issuerCert)))
	r.Handle(pathRelayToken+"{token}", s.instrument("relay_token", true, methodsOnly(methods, s.relayToken)))
}

func (s *Server) routes() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = s.instrument("not_found", false, func(w http.ResponseWriter, r *http.Request) error {
		return malformedAs(http.StatusNotFound, "there is no ACME resource at %s; start from %s", r.URL.Path, s.base+pathDirectory)
	})

	read := []string{http.MethodGet, http.MethodHead}
	get := func(path, name string, admit bool, h func(http.ResponseWriter, *http.Request) error) {
		r.Handle(path, s.instrument(name, admit, methodsOnly(read, h)))
	}
	get(pathDirectory, "directory", false, s.directory)
	// profiledir.go: a directory per profile, for clients that cannot
	// send draft-ietf-acme-profiles' "profile" field.
	byProfile := pathProfile + "{profile}"
	r.Handle(byProfile+profileDirectory, s.knownProfile(s.instrument("directory", false, methodsOnly(read, s.profileDirectory))))
	get(pathNewNonce, "new_nonce", false, s.newNonce)
	// ari.go; they read the store, so they take a permit.
	get(pathRenewalInfo+"{certid}", "renewal_info", true, s.renewalInfo)
	get(pathRenewalExplanation+"{serial}", "renewal_explanation", true, s.renewalExplanation)

	// ahead names the route's first read, made with the nonce (ahead.go),
	// nil for routes whose first read needs the payload; claims says the
	// route's claim may consume its nonce (claimnow.go).
	postRoute := func(path, name string, mode keyMode, h func(http.ResponseWriter, *post) error, ahead readAhead, claims bool) {
		r.Handle(path, s.instrument(name, true, methodsOnly([]string{http.MethodPost}, s.verified(name, mode, h, ahead, claims))))
	}
	profiledRoute := func(path, name string, h func(http.ResponseWriter, *post) error, ahead readAhead, claims bool) {
		r.Handle(byProfile+path, s.knownProfile(s.instrument(name, true, methodsOnly([]string{http.MethodPost}, s.verified(name, kidOnly, h, ahead, claims)))))
	}
	postRoute(pathNewAccount, "new_account", jwkOnly, s.newAccount, nil, false)
	postRoute(pathNewAuthz, "new_authz", kidOnly, s.newAuthz, nil, false) // newauthz.go
	profiledRoute(profileNewAuthz, "new_authz", s.newAuthz, nil, false)
	postRoute(pathRevokeCert, "revoke_cert", kidOrJWK, s.revokeCert, nil, false)
	postRoute(pathKeyChange, "key_change", kidOnly, s.keyChange, nil, false)
	postRoute(pathAccount+"{id}", "account", kidOnly, s.account, nil, false)
	postRoute(pathAccount+"{id}/orders", "account_orders", kidOnly, s.accountOrders, nil, false)
	postRoute(pathOrder+"{id}", "order", kidOnly, s.order, orderAhead, false)
	postRoute(pathAuthz+"{id}", "authz", kidOnly, s.authz, authzAhead, false)
	// Their refusals are on the issuance trail (trail.go).
	newOrder := s.trailed(store.ActionOrderRefused, noSubject, identifiersAsked, s.newOrder)
	finalize := s.trailed(store.ActionFinalizeRefused, routeID, nothingAsked, s.finalize)
	postRoute(pathNewOrder, "new_order", kidOnly, newOrder, s.newOrderAhead, true)
	profiledRoute(profileNewOrder, "new_order", newOrder, s.newOrderAhead, true)
	postRoute(pathOrder+"{id}/finalize", "finalize", kidOnly, finalize, orderAhead, true)
	postRoute(pathChallenge+"{id}", "challenge", kidOnly, s.challenge, challengeAhead, true)
	postRoute(pathCert+"{serial}", "cert", kidOnly, s.cert, certAhead, false)
	postRoute(pathCert+"{serial}/{alt:[0-9]+}", "cert", kidOnly, s.cert, certAhead, false)

	// pause.go, unpause.go: the subscriber's unpause page, for a browser.
	r.Handle(pathUnpause, s.instrument("unpause", true, methodsOnly([]string{http.MethodGet, http.MethodHead, http.MethodPost}, s.unpause)))

	// The CRL touches the store, so it takes a permit too.
	s.publicRoutes(r)

	r.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
		if s.version != "" {
			_, _ = io.WriteString(w, s.version+"\n")
		}
	}))
	r.Handle("/readyz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.Ready(ctx); err != nil {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready: the store does not answer\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	r.Handle("/metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	return s.withOrigin(r)
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
		return malformedAs(http.StatusMethodNotAllowed, "method %s is not allowed here; use %s", r.Method, allow)
	}
}
