// Package config is the one configuration file every Hallmark binary reads:
// TOML, decoded strictly (an unknown key is an error), defaults first, then
// Validate reports every problem at once naming the key. Secrets come from
// files or the environment and are never logged.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hallmark-ca/hallmark/store/redact"
)

// Config is the whole file.
type Config struct {
	Database  Database           `toml:"database"`
	Server    Server             `toml:"server"`
	Admin     Admin              `toml:"admin"`
	Worker    Worker             `toml:"worker"`
	Challenge Challenge          `toml:"challenge"`
	Policy    Policy             `toml:"policy"`
	CA        CA                 `toml:"ca"`
	Profiles  map[string]Profile `toml:"profiles"`
	Limits    Limits             `toml:"limits"` // limits.go: rate limits, 0 = unlimited
	// Backends are the named pkcs11, relay and custom signing backends.
	Backends map[string]Backend `toml:"backends"`
	// DefaultProfile is used when newOrder names none.
	DefaultProfile string `toml:"default_profile"`
}

// Database names the store. URL is "postgres://..." or "sqlite:<path>".
type Database struct {
	URL string `toml:"url"`
	// MaxConns bounds each process's PostgreSQL pool; 0, the default, is
	// four per CPU the process may use (store/postgres.DefaultConns).
	MaxConns int `toml:"max_conns"`
}

// Server is the public ACME listener.
type Server struct {
	Listen string `toml:"listen"`
	// BaseURL is the external URL clients see, e.g. behind a proxy.
	BaseURL   string `toml:"base_url"`
	TLSCert   string `toml:"tls_cert"`
	TLSKey    string `toml:"tls_key"`
	PlainHTTP bool   `toml:"plain_http"` // behind a TLS-terminating proxy
	// PublicHTTPListen serves CRLs and issuer certificates over plain
	// http (never the ACME API). Empty disables it.
	PublicHTTPListen        string   `toml:"public_http_listen"`
	MaxConcurrentRequests   int      `toml:"max_concurrent_requests"`
	RequestTimeoutMS        int      `toml:"request_timeout_ms"`
	MaxBodyBytes            int64    `toml:"max_body_bytes"`
	RetryAfterSeconds       int      `toml:"retry_after_seconds"`
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
	// PprofListen serves net/http/pprof (pprof.go); empty, the default, disables it.
	PprofListen string `toml:"pprof_listen"`
}

// Admin is the operator panel's own listener. Empty Listen disables it.
type Admin struct {
	Listen    string `toml:"listen"`
	TokenFile string `toml:"token_file"`
	TokenEnv  string `toml:"token_env"`
	// SecureCookies marks the panel's cookies Secure, so a browser sends
	// them only over HTTPS. Default false: the listener speaks plain HTTP
	// (loopback or a management network); set it when a TLS-terminating
	// proxy serves the panel.
	SecureCookies bool `toml:"secure_cookies"`
}

// Worker configures hallmark-worker.
type Worker struct {
	ID string `toml:"id"`
	// Concurrency is how many jobs of each queue run at once: signing,
	// revocation and maintenance, which are CPU- or HSM-bound.
	Concurrency int `toml:"concurrency"`
	// ValidationConcurrency is how many validations run at once. Each
	// waits on the network, up to challenge.timeout_ms for a target that
	// never answers, so it is many more than Concurrency: a handful of
	// silent targets must not hold up every other client's validation.
	ValidationConcurrency int    `toml:"validation_concurrency"`
	JobTimeoutMS          int    `toml:"job_timeout_ms"`
	RescueAfterMS         int    `toml:"rescue_after_ms"`
	HealthListen          string `toml:"health_listen"`
	CRLIntervalMinutes    int    `toml:"crl_interval_minutes"`
	// Backends lists the profiles this worker mounts; empty means all.
	Profiles []string `toml:"profiles"`
	// PprofListen serves net/http/pprof (pprof.go); empty, the default, disables it.
	PprofListen string `toml:"pprof_listen"`
}

// Challenge configures validation (worker only).
type Challenge struct {
	TimeoutMS   int      `toml:"timeout_ms"`
	Resolvers   []string `toml:"resolvers"` // host:port of DNS resolvers
	HTTPPort    int      `toml:"http_port"`
	TLSALPNPort int      `toml:"tls_alpn_port"`
	HTTPSPort   int      `toml:"https_port"` // where a redirect to https:// goes
	// AllowReservedRanges lifts the built-in refusals of where validation
	// connects (link-local and cloud metadata addresses, unspecified,
	// multicast, broadcast, the CA's own listeners) for these CIDR ranges.
	// policy.deny_ip_ranges still applies. Empty, the default, lifts none.
	AllowReservedRanges []string `toml:"allow_reserved_ranges"`
}

// Policy is the identifier allow/deny list.
type Policy struct {
	AllowDomains   []string `toml:"allow_domains"` // suffixes; empty allows any
	DenyDomains    []string `toml:"deny_domains"`
	AllowIPRanges  []string `toml:"allow_ip_ranges"` // CIDRs; empty allows any
	DenyIPRanges   []string `toml:"deny_ip_ranges"`
	MaxIdentifiers int      `toml:"max_identifiers"`
}

// CA configures the local issuing CA (backend "local").
type CA struct {
	Dir string `toml:"dir"` // holds root.pem, intermediate.pem, intermediate.key
	// URLBase is where relying parties fetch CRLs and the issuer
	// certificate: plain http, as RFC 5280 and the Baseline Requirements
	// expect for CRL distribution points and AIA caIssuers. Default:
	// "http://" + server.public_http_listen.
	URLBase          string `toml:"url_base"`
	CRLValidityHours int    `toml:"crl_validity_hours"`
}

// MaxBackdate is how far before the moment of signing a certificate's
// notBefore may be: enough to absorb a relying party's slightly slow clock,
// small enough that the certificate cannot be used to claim it existed
// earlier than it did. The signer backdates a certificate by it, and the
// frontend refuses an order's requested notBefore earlier than it (RFC 8555
// §7.4: the server must not issue other contents than were requested).
const MaxBackdate = time.Minute

// Profile is a named certificate profile (draft-ietf-acme-profiles).
type Profile struct {
	Description          string   `toml:"description"`
	Backend              string   `toml:"backend"` // local, pkcs11, relay, custom
	ValidityHours        int      `toml:"validity_hours"`
	AllowValidityRequest bool     `toml:"allow_validity_request"` // honour notBefore/notAfter
	KeyTypes             []string `toml:"key_types"`              // "rsa2048","rsa3072","rsa4096","p256","p384","ed25519"
	Challenges           []string `toml:"challenges"`
	IdentifierTypes      []string `toml:"identifier_types"` // dns, ip
	AllowWildcards       bool     `toml:"allow_wildcards"`
	SetCN                bool     `toml:"set_cn"`
	KeyUsages            []string `toml:"key_usages"`
	ExtKeyUsages         []string `toml:"ext_key_usages"`
	// Signer names the [backends.<name>] of a pkcs11, relay or custom profile.
	Signer string `toml:"signer"`
	// ARI and newAuthz (ari.go): the suggested renewal window as fractions
	// of the validity period (0 and 0: the middle third), and whether
	// newAuthz may pre-authorize identifiers for this profile.
	RenewalWindowStart    float64 `toml:"renewal_window_start"`
	RenewalWindowEnd      float64 `toml:"renewal_window_end"`
	AllowPreAuthorization bool    `toml:"allow_pre_authorization"`
}

// Default returns a configuration that runs a local CA on loopback with SQLite.
func Default() Config {
	return Config{
		Database: Database{URL: "sqlite:hallmark-data/hallmark.db"},
		Server: Server{
			Listen: "127.0.0.1:14000", PublicHTTPListen: "127.0.0.1:14080", MaxConcurrentRequests: 256, RequestTimeoutMS: 10000,
			MaxBodyBytes: 64 << 10, RetryAfterSeconds: 1, NonceLifetimeSeconds: 3600,
			OrderLifetimeHours: 24 * 7, AuthzLifetimeHours: 24 * 30,
			CAAIdentities: []string{"hallmark.invalid"},
		},
		Worker:    Worker{Concurrency: 8, ValidationConcurrency: 100, JobTimeoutMS: 30000, RescueAfterMS: 60000, CRLIntervalMinutes: 60},
		Challenge: Challenge{TimeoutMS: 10000, HTTPPort: 80, TLSALPNPort: 443, HTTPSPort: 443},
		Policy:    Policy{MaxIdentifiers: 100},
		CA:        CA{Dir: "hallmark-data/ca", CRLValidityHours: 24 * 7},
		Profiles: map[string]Profile{
			"default": {
				Description: "90-day TLS server certificate", Backend: "local", ValidityHours: 90 * 24,
				KeyTypes:        []string{"rsa2048", "rsa3072", "rsa4096", "p256", "p384"},
				Challenges:      []string{"http-01", "dns-01", "tls-alpn-01"},
				IdentifierTypes: []string{"dns", "ip"}, AllowWildcards: true,
				KeyUsages:    []string{"digitalSignature", "keyEncipherment"},
				ExtKeyUsages: []string{"serverAuth"},
			},
		},
		DefaultProfile: "default",
	}
}

// Load reads path over the defaults. Unknown keys are errors.
func Load(path string) (Config, error) {
	c := Default()
	if path == "" {
		c.databaseFromEnv()
		c.derive()
		return c, c.Validate()
	}
	md, err := toml.DecodeFile(path, &c)
	if err != nil {
		return c, fmt.Errorf("reading config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return c, fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	c.databaseFromEnv()
	// Relative paths in the file are relative to the file.
	base := filepath.Dir(path)
	c.CA.Dir = rel(base, c.CA.Dir)
	c.Server.TLSCert = rel(base, c.Server.TLSCert)
	c.Server.TLSKey = rel(base, c.Server.TLSKey)
	c.Admin.TokenFile = rel(base, c.Admin.TokenFile)
	c.backendPaths(base)
	if strings.HasPrefix(c.Database.URL, "sqlite:") {
		c.Database.URL = "sqlite:" + rel(base, strings.TrimPrefix(c.Database.URL, "sqlite:"))
	}
	c.derive()
	return c, c.Validate()
}

// derive fills the values whose defaults depend on others.
func (c *Config) derive() {
	if c.Server.BaseURL == "" {
		scheme := "https"
		if c.Server.PlainHTTP || c.Server.TLSCert == "" {
			scheme = "http"
		}
		c.Server.BaseURL = scheme + "://" + c.Server.Listen
	}
	c.Server.BaseURL = strings.TrimRight(c.Server.BaseURL, "/")
	if c.CA.URLBase == "" && c.Server.PublicHTTPListen != "" {
		c.CA.URLBase = "http://" + c.Server.PublicHTTPListen
	}
	c.CA.URLBase = strings.TrimRight(c.CA.URLBase, "/")
	c.backendDefaults()
	c.profileDefaults()
	c.limitDefaults()
	if c.Worker.ID == "" {
		host, _ := os.Hostname()
		c.Worker.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
}

// profileDefaults gives a profile that names no key usages the built-in
// profile's: a [profiles.x] table is decoded whole, not merged with the
// built-in default, and a TLS leaf without keyUsage or extKeyUsage breaks
// the CA/Browser Forum profile (BR §7.1.2.7.10, §7.1.2.7.11), which zlint
// refuses only for the second.
func (c *Config) profileDefaults() {
	for name, p := range c.Profiles {
		if len(p.KeyUsages) == 0 {
			p.KeyUsages = []string{"digitalSignature", "keyEncipherment"}
		}
		if len(p.ExtKeyUsages) == 0 {
			p.ExtKeyUsages = []string{"serverAuth"}
		}
		c.Profiles[name] = p
	}
}

// databaseFromEnv applies HALLMARK_DATABASE_URL over database.url, with a
// configuration file or without one: a container that sets only the
// variable must not fall back to the embedded SQLite file. The URL's
// password is registered with redact, so no output of the process shows it.
func (c *Config) databaseFromEnv() {
	if env := os.Getenv("HALLMARK_DATABASE_URL"); env != "" {
		c.Database.URL = env
	}
	redact.AddURL(c.Database.URL)
}

func rel(base, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

var knownKeyTypes = map[string]bool{"rsa2048": true, "rsa3072": true, "rsa4096": true, "p256": true, "p384": true, "ed25519": true}
var knownChallenges = map[string]bool{"http-01": true, "dns-01": true, "tls-alpn-01": true}
var knownBackends = map[string]bool{"local": true, "pkcs11": true, "relay": true, "custom": true}

// profileNameRE and maxProfileName are what a profile may be named. The
// name is also the River queue of its signing and revoking jobs
// (jobs.ProfileQueue: "profile_" + name), and River refuses a queue name
// that is not lowercase letters and digits separated by single '_' or '-'
// (its own pattern also allows '|'), or that is over 64 characters: a
// worker mounting such a profile would not start, and finalize would fail
// to queue its job.
var profileNameRE = regexp.MustCompile(`^[a-z0-9]+(?:[_-][a-z0-9]+)*$`)

const maxProfileName = 64 - len("profile_")

// Validate reports every problem at once, each naming its key.
func (c Config) Validate() error {
	var errs []string
	add := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	switch {
	case strings.HasPrefix(c.Database.URL, "postgres://"), strings.HasPrefix(c.Database.URL, "postgresql://"):
	case strings.HasPrefix(c.Database.URL, "sqlite:") && len(c.Database.URL) > len("sqlite:"):
	default:
		add("database.url", "must be postgres://... or sqlite:<path>, got %q", redact.URL(c.Database.URL))
	}
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		add("server.listen", "must be host:port: %v", err)
	}
	if c.Server.PublicHTTPListen != "" {
		if _, _, err := net.SplitHostPort(c.Server.PublicHTTPListen); err != nil {
			add("server.public_http_listen", "must be host:port: %v", err)
		}
	}
	if !strings.HasPrefix(c.CA.URLBase, "http://") {
		add("ca.url_base", "must be an http:// URL (CRLs and AIA are fetched over plain http), got %q; set it or server.public_http_listen", c.CA.URLBase)
	}
	if c.Server.MaxConcurrentRequests < 1 {
		add("server.max_concurrent_requests", "must be at least 1")
	}
	if c.Server.RequestTimeoutMS < 1000 {
		add("server.request_timeout_ms", "must be at least 1000")
	}
	if c.Server.MaxBodyBytes < 1024 {
		add("server.max_body_bytes", "must be at least 1024")
	}
	if !c.Server.PlainHTTP && (c.Server.TLSCert == "") != (c.Server.TLSKey == "") {
		add("server.tls_cert", "tls_cert and tls_key go together")
	}
	if c.Server.RetryAfterSeconds < 0 {
		add("server.retry_after_seconds", "must not be negative")
	}
	for _, l := range []struct {
		key string
		v   int
	}{
		{"server.nonce_lifetime_seconds", c.Server.NonceLifetimeSeconds},
		{"server.order_lifetime_hours", c.Server.OrderLifetimeHours},
		{"server.authz_lifetime_hours", c.Server.AuthzLifetimeHours},
	} {
		if l.v < 1 {
			add(l.key, "must be at least 1")
		}
	}
	if c.Database.MaxConns < 0 {
		add("database.max_conns", "must not be negative (0 picks the driver's default)")
	}
	for _, port := range []struct {
		key string
		v   int
	}{
		{"challenge.http_port", c.Challenge.HTTPPort},
		{"challenge.tls_alpn_port", c.Challenge.TLSALPNPort},
		{"challenge.https_port", c.Challenge.HTTPSPort},
	} {
		if port.v < 1 || port.v > 65535 {
			add(port.key, "must be a port, 1 to 65535; got %d", port.v)
		}
	}
	// A CRL is signed again once half its validity has passed, at the first
	// scheduled run after that: a run interval of half the validity or more
	// lets a CRL expire before its successor is signed (RFC 5280 §5.1.2.5:
	// nextUpdate is when the next CRL will be issued).
	switch {
	case c.CA.CRLValidityHours < 1:
		add("ca.crl_validity_hours", "must be at least 1")
	case c.Worker.CRLIntervalMinutes < 1:
		add("worker.crl_interval_minutes", "must be at least 1")
	case 2*c.Worker.CRLIntervalMinutes >= 60*c.CA.CRLValidityHours:
		add("worker.crl_interval_minutes", "must be less than half of ca.crl_validity_hours (%d h), or a CRL can expire before the run that signs its successor", c.CA.CRLValidityHours)
	}
	if c.Challenge.TimeoutMS < 100 {
		add("challenge.timeout_ms", "must be at least 100")
	}
	if c.Worker.Concurrency < 1 {
		add("worker.concurrency", "must be at least 1")
	}
	if c.Worker.ValidationConcurrency < 1 {
		add("worker.validation_concurrency", "must be at least 1")
	}
	if c.Worker.JobTimeoutMS >= c.Worker.RescueAfterMS {
		add("worker.job_timeout_ms", "must be shorter than worker.rescue_after_ms (%d), or a live job is rescued", c.Worker.RescueAfterMS)
	}
	if c.Challenge.TimeoutMS >= c.Worker.JobTimeoutMS {
		add("challenge.timeout_ms", "must be shorter than worker.job_timeout_ms (%d)", c.Worker.JobTimeoutMS)
	}
	c.validateIPRanges(add)
	if len(c.Profiles) == 0 {
		add("profiles", "at least one profile is needed")
	}
	if _, ok := c.Profiles[c.DefaultProfile]; !ok {
		add("default_profile", "%q is not a configured profile", c.DefaultProfile)
	}
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := c.Profiles[n]
		key := "profiles." + n
		if !profileNameRE.MatchString(n) || len(n) > maxProfileName {
			add(key, "the name must be lowercase letters and digits, separated by single '_' or '-', at most %d characters: it names the River queue of the profile's signing jobs, which takes no other name", maxProfileName)
		}
		if !knownBackends[p.Backend] {
			add(key+".backend", "must be one of local, pkcs11, relay, custom; got %q", p.Backend)
		}
		if p.ValidityHours < 1 {
			add(key+".validity_hours", "must be at least 1")
		}
		for _, k := range p.KeyTypes {
			if !knownKeyTypes[k] {
				add(key+".key_types", "unknown key type %q", k)
			}
		}
		if len(p.Challenges) == 0 {
			add(key+".challenges", "at least one challenge type is needed")
		}
		for _, ch := range p.Challenges {
			if !knownChallenges[ch] {
				add(key+".challenges", "unknown challenge type %q", ch)
			}
		}
		for _, it := range p.IdentifierTypes {
			if it != "dns" && it != "ip" {
				add(key+".identifier_types", "unknown identifier type %q", it)
			}
		}
		// What the profile allows must be something its challenges can
		// validate, or every such order is refused (rejectedIdentifier),
		// even for names a pre-validating EAB binding vouches for.
		if p.AllowWildcards && !slices.Contains(p.Challenges, "dns-01") {
			add(key+".allow_wildcards", "a wildcard is validated only by dns-01 (RFC 8555 §7.1.3); add \"dns-01\" to challenges or set allow_wildcards = false")
		}
		if slices.Contains(p.IdentifierTypes, "ip") && !slices.Contains(p.Challenges, "http-01") && !slices.Contains(p.Challenges, "tls-alpn-01") {
			add(key+".identifier_types", "an IP address is validated only by http-01 or tls-alpn-01 (RFC 8738 §7); add one to challenges or remove \"ip\"")
		}
	}
	c.validateBackends(add)
	c.validateLimits(add)
	c.validateRenewal(add)
	c.validateAdmin(add)
	c.validatePprof(add)
	if len(errs) > 0 {
		return errors.New("invalid configuration:\n  " + strings.Join(errs, "\n  "))
	}
	return nil
}

// RequestTimeout is server.request_timeout_ms as a duration.
func (c Config) RequestTimeout() time.Duration {
	return time.Duration(c.Server.RequestTimeoutMS) * time.Millisecond
}
