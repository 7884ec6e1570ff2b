package protocol

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/nonce"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/serverconf"
	"github.com/hallmark-ca/hallmark/store"
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
	// Verdicts wakes requests waiting for a verdict
	// (server.verdict_wait_ms). nil: every request answers at once.
	Verdicts Verdicts
	// Access is the client access policy (access.New of [access]); nil
	// checks nothing.
	Access *access.Policy
	// Version is the binary's version line, served by /healthz under its
	// "ok"; empty serves "ok" alone.
	Version string
}

// Config is what New builds the frontend from: [server], [limits],
// [policy], [profiles] and default_profile of the configuration file.
type Config struct {
	Server         serverconf.Server
	Limits         serverconf.Limits
	Policy         policy.Config
	Profiles       map[string]profile.Profile
	DefaultProfile string // used when newOrder names none
	// Retired are profiles a reload removed: no longer offered, but an
	// order placed under one before may still be finalized (the worker
	// keeps it mounted until it restarts).
	Retired map[string]profile.Profile
}

// Server is the ACME frontend. It is safe for concurrent use. A Server
// is one configuration's snapshot over the state that outlives a reload
// (core); Reload builds the next snapshot and swaps it in whole, and each
// request runs on the snapshot current when it arrived (reload.go).
type Server struct {
	*core
	cfg    Config
	base   string // server.base_url without a trailing slash
	policy *policy.Policy
	// idProxies are server.request_id_trusted_proxies (requestid.go).
	idProxies []netip.Prefix
	timeout   time.Duration
	retry     time.Duration
	access    *access.Policy
	handler   http.Handler
}

// core is what every snapshot of one frontend shares: the store, caches,
// admission, metrics and the verdict hub.
type core struct {
	st      stores // the store, through the part each handler uses
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
	clock dbClock
	// log adds each request's request_id to its lines (origin.LogHandler):
	// log with the request's context.
	log     *slog.Logger
	permits chan struct{}
	outages outageLog // requests refused for a database outage (outage.go)
	// accessOutages: requests refused because the access policy could not
	// decide (accesspolicy.go).
	accessOutages outageLog
	gather        prometheus.Gatherer
	version       string // Options.Version
	metrics       metrics
	// verdicts: what a request waiting for a verdict waits on (await.go).
	verdicts Verdicts
	// live is the snapshot new requests run on (reload.go).
	live atomic.Pointer[Server]
}

// New builds the frontend for cfg on st. It loads the shared nonce key from
// the store, so the store must be migrated and reachable.
func New(cfg Config, st store.Store, opts Options) (*Server, error) {
	c := &core{st: stores{accounts: st, orders: st, verify: st, certs: st, limits: st, trail: st, relay: st, blocked: st, ping: st, pauses: st}, log: opts.Logger, version: opts.Version, verdicts: opts.Verdicts}
	c.unbound.max = 100_000 // account IDs are small
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = origin.Logger(c.log)
	n := cfg.Server.MaxConcurrentRequests
	if n < 1 {
		n = 1
	}
	c.permits = make(chan struct{}, n)
	s, err := c.snapshot(cfg, opts.Access)
	if err != nil {
		return nil, err
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
	if err := s.registerMetrics(opts); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	s.live.Store(s)
	return s, nil
}

// snapshot is cfg's Server over c, without its routes: what a reload
// replaces. It checks what New checked of cfg.
func (c *core) snapshot(cfg Config, acc *access.Policy) (*Server, error) {
	base := strings.TrimRight(cfg.Server.BaseURL, "/")
	if !strings.HasPrefix(base, "https://") && !strings.HasPrefix(base, "http://") {
		return nil, fmt.Errorf("server.base_url must be an absolute http(s) URL, got %q", cfg.Server.BaseURL)
	}
	if _, ok := cfg.Profiles[cfg.DefaultProfile]; !ok {
		return nil, fmt.Errorf("default_profile %q is not a configured profile", cfg.DefaultProfile)
	}
	s := &Server{core: c, cfg: cfg, base: base, access: acc}
	s.idProxies = cfg.Server.RequestIDProxies()
	s.cfg.Server.BaseURL = base
	s.timeout = cfg.Server.RequestTimeout()
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	s.retry = time.Duration(cfg.Server.RetryAfterSeconds) * time.Second
	if s.retry <= 0 {
		s.retry = time.Second
	}
	if s.cfg.Server.MaxBodyBytes <= 0 {
		s.cfg.Server.MaxBodyBytes = 64 << 10
	}
	pol, err := policy.New(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("building the identifier policy: %w", err)
	}
	s.policy = pol
	return s, nil
}

// Ready reports whether the server can answer requests: the store answers.
func (s *Server) Ready(ctx context.Context) error {
	if err := s.st.ping.Ping(ctx); err != nil {
		return fmt.Errorf("pinging the store: %w", err)
	}
	return nil
}

func (s *Server) profile(name string) (profile.Profile, bool) {
	p, ok := s.cfg.Profiles[name]
	return p, ok
}

// KnownProfiles are the profiles offered and those retired: what a
// revocation routes by (a retired relay's certificates are still revoked
// through it while a worker mounts it).
func (c Config) KnownProfiles() map[string]profile.Profile {
	if len(c.Retired) == 0 {
		return c.Profiles
	}
	all := maps.Clone(c.Retired)
	maps.Copy(all, c.Profiles)
	return all
}

// orderProfile is the profile of an order already placed: one offered, or
// one retired since.
func (s *Server) orderProfile(name string) (profile.Profile, bool) {
	if p, ok := s.cfg.Profiles[name]; ok {
		return p, true
	}
	p, ok := s.cfg.Retired[name]
	return p, ok
}
