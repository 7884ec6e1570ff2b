// Package serverconf is the frontend's own sections of the configuration
// file, [server] and [limits], with their checks. They are not in package
// protocol because every binary checks the whole file, and the CLI may not
// link the HTTP frontend (tests/layering); protocol.Config holds them.
package serverconf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Server is the public ACME listener, [server].
type Server struct {
	Listen string `toml:"listen"`
	// BaseURL is the external URL clients see, e.g. behind a proxy.
	BaseURL   string `toml:"base_url"`
	TLSCert   string `toml:"tls_cert"`
	TLSKey    string `toml:"tls_key"`
	PlainHTTP bool   `toml:"plain_http"` // behind a TLS-terminating proxy
	// PublicHTTPListen serves CRLs and issuer certificates over plain
	// http (never the ACME API). Empty disables it.
	PublicHTTPListen      string `toml:"public_http_listen"`
	MaxConcurrentRequests int    `toml:"max_concurrent_requests"`
	RequestTimeoutMS      int    `toml:"request_timeout_ms"`
	MaxBodyBytes          int64  `toml:"max_body_bytes"`
	RetryAfterSeconds     int    `toml:"retry_after_seconds"`
	// VerdictWaitMS is how long a challenge POST, a finalize, or a read
	// of a challenge, authorization or order still processing waits for
	// the worker's verdict before it answers processing (with
	// Retry-After); the wait holds no admission permit and no database
	// connection. 0 answers at once.
	VerdictWaitMS           int      `toml:"verdict_wait_ms"`
	TermsOfService          string   `toml:"terms_of_service"`
	Website                 string   `toml:"website"`
	CAAIdentities           []string `toml:"caa_identities"`
	ExternalAccountRequired bool     `toml:"external_account_required"`
	NonceLifetimeSeconds    int      `toml:"nonce_lifetime_seconds"`
	OrderLifetimeHours      int      `toml:"order_lifetime_hours"`
	AuthzLifetimeHours      int      `toml:"authz_lifetime_hours"`
	// RenewalInfoRetryAfterSeconds is the Retry-After of renewalInfo
	// answers (RFC 9773 §4.3); 0 means 6 hours.
	RenewalInfoRetryAfterSeconds int `toml:"renewal_info_retry_after_seconds"`
	// PprofListen serves net/http/pprof (cmd/internal/process); empty,
	// the default, disables it.
	PprofListen string `toml:"pprof_listen"`
	// RequestIDTrustedProxies are the peers (CIDR ranges, or addresses)
	// whose X-Request-Id a request keeps, when it is well-formed; every
	// other request gets an id of the frontend's. Empty, the default,
	// trusts none.
	RequestIDTrustedProxies []string `toml:"request_id_trusted_proxies"`
}

// RequestIDProxies are request_id_trusted_proxies as prefixes (an address
// is its own /32 or /128); those that do not parse are left out, which
// Validate reports.
func (s Server) RequestIDProxies() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range s.RequestIDTrustedProxies {
		if p, err := parsePrefix(r); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// parsePrefix reads a CIDR range or a bare address, masked, IPv4-mapped
// addresses unmapped.
func parsePrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%s: write an IPv4 range as IPv4", s)
	}
	return p.Masked(), nil
}

// DefaultServer is [server] when the file sets nothing: loopback, plain http.
func DefaultServer() Server {
	return Server{
		Listen: "127.0.0.1:14000", PublicHTTPListen: "127.0.0.1:14080", MaxConcurrentRequests: 256, RequestTimeoutMS: 10000,
		MaxBodyBytes: 64 << 10, RetryAfterSeconds: 1, VerdictWaitMS: DefaultVerdictWaitMS, NonceLifetimeSeconds: 3600,
		OrderLifetimeHours: 24 * 7, AuthzLifetimeHours: 24 * 30,
		CAAIdentities: []string{"hallmark.invalid"},
	}
}

// DefaultVerdictWaitMS is verdict_wait_ms's default: well past the time a
// validation or an issuance takes when nothing is wrong
// (docs/performance.md, "Verdict waiting").
const DefaultVerdictWaitMS = 500

// VerdictWait is verdict_wait_ms as a duration.
func (s Server) VerdictWait() time.Duration {
	return time.Duration(s.VerdictWaitMS) * time.Millisecond
}

// RequestTimeout is request_timeout_ms as a duration.
func (s Server) RequestTimeout() time.Duration {
	return time.Duration(s.RequestTimeoutMS) * time.Millisecond
}

// RenewalInfoRetryAfter is renewal_info_retry_after_seconds as a duration,
// 6 hours by default.
func (s Server) RenewalInfoRetryAfter() time.Duration {
	if s.RenewalInfoRetryAfterSeconds <= 0 {
		return 6 * time.Hour
	}
	return time.Duration(s.RenewalInfoRetryAfterSeconds) * time.Second
}

// Validate reports every problem of [server], each naming its key.
func (s Server) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		add("server.listen", "must be host:port: %v", err)
	}
	if s.PublicHTTPListen != "" {
		if _, _, err := net.SplitHostPort(s.PublicHTTPListen); err != nil {
			add("server.public_http_listen", "must be host:port: %v", err)
		}
	}
	if s.MaxConcurrentRequests < 1 {
		add("server.max_concurrent_requests", "must be at least 1")
	}
	if s.RequestTimeoutMS < 1000 {
		add("server.request_timeout_ms", "must be at least 1000")
	}
	if s.MaxBodyBytes < 1024 {
		add("server.max_body_bytes", "must be at least 1024")
	}
	if !s.PlainHTTP && (s.TLSCert == "") != (s.TLSKey == "") {
		add("server.tls_cert", "tls_cert and tls_key go together")
	}
	if s.RetryAfterSeconds < 0 {
		add("server.retry_after_seconds", "must not be negative")
	}
	if s.VerdictWaitMS < 0 || (s.VerdictWaitMS > 0 && s.VerdictWaitMS > s.RequestTimeoutMS-1000) {
		add("server.verdict_wait_ms", "must be 0 (answer at once) up to request_timeout_ms - 1000 (%d), so the answer fits in the request's time; got %d", max(0, s.RequestTimeoutMS-1000), s.VerdictWaitMS)
	}
	if s.RenewalInfoRetryAfterSeconds < 0 {
		add("server.renewal_info_retry_after_seconds", "must not be negative")
	}
	for _, r := range s.RequestIDTrustedProxies {
		if _, err := parsePrefix(r); err != nil {
			add("server.request_id_trusted_proxies", "%q is neither a CIDR range nor an IP address", r)
		}
	}
	for _, l := range []struct {
		key string
		v   int
	}{
		{"server.nonce_lifetime_seconds", s.NonceLifetimeSeconds},
		{"server.order_lifetime_hours", s.OrderLifetimeHours},
		{"server.authz_lifetime_hours", s.AuthzLifetimeHours},
	} {
		if l.v < 1 {
			add(l.key, "must be at least 1")
		}
	}
	return errors.Join(errs...)
}

// Limits are the rate limits, `[limits]`. Every count lives in the database
// (never per process), so any number of frontends enforce one limit. 0 means
// unlimited, the default for each.
type Limits struct {
	// OrdersPerAccount bounds new orders per account per
	// OrdersWindowSeconds (default window 3 hours).
	OrdersPerAccount    int `toml:"orders_per_account"`
	OrdersWindowSeconds int `toml:"orders_window_seconds"`
	// CertificatesPerDomain bounds certificates issued per registered
	// domain (the public suffix list's eTLD+1) per
	// CertificatesWindowSeconds (default window 7 days).
	CertificatesPerDomain     int `toml:"certificates_per_domain"`
	CertificatesWindowSeconds int `toml:"certificates_window_seconds"`
	// FailedValidationsPerHour bounds failed validations per account and
	// identifier per hour.
	FailedValidationsPerHour int `toml:"failed_validations_per_hour"`
	// PendingAuthorizationsPerAccount bounds an account's pending
	// authorizations.
	PendingAuthorizationsPerAccount int `toml:"pending_authorizations_per_account"`
	// PauseAfterDays pauses an account for an identifier whose
	// validations have failed for this many days with no success between
	// (and PauseMinFailures times at least): newOrder and newAuthz for it
	// are refused with a link to unpause. Unset is DefaultPauseAfterDays;
	// 0 turns pausing off.
	PauseAfterDays   *int `toml:"pause_after_days"`
	PauseMinFailures int  `toml:"pause_min_failures"`
}

// The pausing defaults: a client that has failed every validation of a
// name for a week, at least 10 times, is not going to succeed unattended.
const (
	DefaultPauseAfterDays   = 7
	DefaultPauseMinFailures = 10
)

// Pause is when an account is paused for an identifier (PauseAfterDays,
// PauseMinFailures): zero when pausing is off.
func (l Limits) Pause() (after time.Duration, minFailures int) {
	if l.PauseAfterDays == nil || *l.PauseAfterDays <= 0 {
		return 0, 0
	}
	return time.Duration(*l.PauseAfterDays) * 24 * time.Hour, l.PauseMinFailures
}

// WithDefaults fills the windows left at 0.
func (l Limits) WithDefaults() Limits {
	if l.OrdersWindowSeconds == 0 {
		l.OrdersWindowSeconds = 3 * 3600
	}
	if l.CertificatesWindowSeconds == 0 {
		l.CertificatesWindowSeconds = 7 * 24 * 3600
	}
	if l.PauseAfterDays == nil {
		days := DefaultPauseAfterDays
		l.PauseAfterDays = &days
	}
	if l.PauseMinFailures == 0 {
		l.PauseMinFailures = DefaultPauseMinFailures
	}
	return l
}

// Validate reports every problem of [limits], each naming its key.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		key string
		v   int
	}{
		{"limits.orders_per_account", l.OrdersPerAccount},
		{"limits.certificates_per_domain", l.CertificatesPerDomain},
		{"limits.failed_validations_per_hour", l.FailedValidationsPerHour},
		{"limits.pending_authorizations_per_account", l.PendingAuthorizationsPerAccount},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must be 0 (unlimited) or more, got %d", f.key, f.v))
		}
	}
	if l.OrdersWindowSeconds < 1 {
		errs = append(errs, fmt.Errorf("limits.orders_window_seconds: must be at least 1, got %d", l.OrdersWindowSeconds))
	}
	if l.PauseAfterDays != nil && (*l.PauseAfterDays < 0 || *l.PauseAfterDays > 3650) {
		errs = append(errs, fmt.Errorf("limits.pause_after_days: must be 0 (pausing off) up to 3650, got %d", *l.PauseAfterDays))
	}
	if l.PauseMinFailures < 0 {
		errs = append(errs, fmt.Errorf("limits.pause_min_failures: must be at least 1, got %d", l.PauseMinFailures))
	}
	if l.CertificatesWindowSeconds < 1 {
		errs = append(errs, fmt.Errorf("limits.certificates_window_seconds: must be at least 1, got %d", l.CertificatesWindowSeconds))
	}
	return errors.Join(errs...)
}
