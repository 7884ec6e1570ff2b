// Package ipam asks an IP address management system which DNS names an
// address carries: NetBox or phpIPAM, over their REST APIs. The access
// policy's "ipam" check (protocol/access) compares a request's
// identifiers with them. It reaches only the URL the operator configured,
// with no proxy from the environment, a deadline and a bound on what it
// reads.
package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/store/redact"
)

// Config is one IPAM source. Its owner (the access policy's check) holds it
// in its own table; Validate names the keys relative to that table.
type Config struct {
	Kind      string `toml:"kind"` // "netbox" or "phpipam"
	URL       string `toml:"url"`  // the IPAM's base URL, e.g. https://netbox.corp.example
	TokenFile string `toml:"token_file"`
	// AppID is phpIPAM's API application id (the path's <app_id>).
	AppID string `toml:"app_id"`
	// CustomField names the custom field that lists the names an address
	// (or, on NetBox, its device or virtual machine) may be certified
	// for: a list, or one string of comma-separated names.
	CustomField string `toml:"custom_field"`
	TimeoutMS   int    `toml:"timeout_ms"` // each lookup's deadline; 0 means DefaultTimeout
}

// Kinds of source.
const (
	KindNetBox  = "netbox"
	KindPHPIPAM = "phpipam"
)

// DefaultTimeout bounds a lookup when timeout_ms is 0; MaxTimeout always.
const (
	DefaultTimeout = 2 * time.Second
	MaxTimeout     = 30 * time.Second
)

// MaxResponse bounds each response read from the IPAM.
const MaxResponse = 1 << 20

// Validate reports every problem of the section, each naming its key
// (relative to the table that holds it).
func (c Config) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	switch c.Kind {
	case KindNetBox, KindPHPIPAM:
	default:
		add("kind", "must be %q or %q, got %q", KindNetBox, KindPHPIPAM, c.Kind)
	}
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		add("url", "must be the IPAM's http(s) base URL without credentials or query, e.g. https://netbox.corp.example, got %q", redact.URL(c.URL))
	}
	if c.TokenFile == "" {
		add("token_file", "must name the file that holds the API token")
	}
	if c.Kind == KindPHPIPAM && !validAppID(c.AppID) {
		add("app_id", "must be phpIPAM's API application id (letters, digits, '-' and '_'), got %q", c.AppID)
	}
	if c.Kind == KindNetBox && c.AppID != "" {
		add("app_id", "is phpIPAM's; NetBox has none")
	}
	if strings.ContainsAny(c.CustomField, "/?#%& ") {
		add("custom_field", "must be a custom field's name, got %q", c.CustomField)
	}
	if c.TimeoutMS < 0 || time.Duration(c.TimeoutMS)*time.Millisecond > MaxTimeout {
		add("timeout_ms", "must be 0 (%s) to %d, got %d", DefaultTimeout, MaxTimeout.Milliseconds(), c.TimeoutMS)
	}
	return errors.Join(errs...)
}

func validAppID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Source is an IPAM: the DNS names it says addr carries, exact, lower
// case, without a trailing dot. An address the IPAM does not know has
// none (an empty list, no error); an IPAM that cannot answer (unreachable,
// a 5xx, a timeout, an answer too large or not its API's) is an error,
// which the access policy takes for "unknown".
type Source interface {
	Names(ctx context.Context, addr netip.Addr) ([]string, error)
}

// New builds the source cfg describes, reading its token file.
func New(cfg Config) (Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("token_file: reading the %s API token: %w", cfg.Kind, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, "\r\n") {
		return nil, fmt.Errorf("token_file: %s holds no token on one line", cfg.TokenFile)
	}
	redact.Add(token) // never in a log line or an error
	timeout := time.Duration(cfg.TimeoutMS) * time.Millisecond
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	c := client{base: strings.TrimRight(cfg.URL, "/"), token: token, field: cfg.CustomField, timeout: timeout, http: httpClient()}
	if cfg.Kind == KindNetBox {
		return netbox{c}, nil
	}
	return phpipam{c, cfg.AppID}, nil
}

// httpClient reaches the IPAM directly: no proxy from the environment
// (HTTPS_PROXY would see the token) and no redirects (a token is sent to
// the configured host only). Each lookup's context bounds it (fetch).
func httpClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConnsPerHost = 4
	return &http.Client{Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
