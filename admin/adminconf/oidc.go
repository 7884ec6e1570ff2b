package adminconf

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// CallbackPath is where the identity provider sends a browser back with
// the authorization code; admin.oidc.redirect_url must end in it.
const CallbackPath = "/login/oidc/callback"

// OIDC is [admin.oidc]: operators sign in to the panel through an OpenID
// Connect provider (authorization code flow with PKCE). It only proves who
// someone is: an identity signs in only when an operator row is bound to
// it (`hallmark operators add NAME --role R --oidc-subject SUB`), and the
// role is that row's. Empty Issuer: off.
type OIDC struct {
	// Issuer is the provider's issuer URL: discovery is read from
	// Issuer/.well-known/openid-configuration, and every ID token's iss
	// must equal it. https, or http on a loopback host only.
	Issuer   string `toml:"issuer"`
	ClientID string `toml:"client_id"`
	// ClientSecretFile holds the client secret (trimmed). Empty: a public
	// client, which PKCE alone protects.
	ClientSecretFile string `toml:"client_secret_file"`
	// RedirectURL is the callback registered at the provider, ending in
	// CallbackPath. Empty: derived from admin.listen (RedirectURL).
	RedirectURL string   `toml:"redirect_url"`
	Scopes      []string `toml:"scopes"` // default openid, email, profile
	// NameClaim names the identity for people: shown on the refusal page
	// and written in the audit rows. It never decides who signs in (the
	// subject does). Default "email", else preferred_username.
	NameClaim string `toml:"name_claim"`
	// ProviderName labels the login page's button ("Sign in with ...");
	// default the issuer's host.
	ProviderName string `toml:"provider_name"`
}

// On reports whether OIDC sign-in is configured.
func (o OIDC) On() bool { return o.Issuer != "" }

// DefaultScopes are asked for when admin.oidc.scopes is empty.
var DefaultScopes = []string{"openid", "email", "profile"}

// ScopeList is the scopes asked for: the configured ones or DefaultScopes.
func (o OIDC) ScopeList() []string {
	if len(o.Scopes) == 0 {
		return DefaultScopes
	}
	return o.Scopes
}

// Label is the provider's name for the login page's button.
func (o OIDC) Label() string {
	if o.ProviderName != "" {
		return o.ProviderName
	}
	if u, err := url.Parse(o.Issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return "OpenID Connect"
}

// RedirectURL is admin.oidc.redirect_url, or else the callback on the
// panel's own listener: https when the panel serves TLS. "" when neither
// gives an address a browser could reach (a wildcard listen address).
func (c Config) RedirectURL() string {
	if c.OIDC.RedirectURL != "" {
		return c.OIDC.RedirectURL
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return ""
	}
	scheme := "http"
	if c.TLSCertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + c.Listen + CallbackPath
}

// OIDCIdentity is how the operators table names an OpenID Connect
// identity in its credential column (store.Operator.CertSHA256): a
// certificate's SHA-256 is hex, so "oidc:..." never names a certificate,
// and a certificate's fingerprint never names an identity. The issuer is
// part of it because a subject is unique only within its issuer (OpenID
// Connect Core 1.0, section 5.7).
func OIDCIdentity(issuer, subject string) string {
	return "oidc:" + strings.TrimRight(issuer, "/") + "#" + subject
}

// validateOIDC reports [admin.oidc]'s problems, each naming its key.
func (c Config) validateOIDC() []error {
	o := c.OIDC
	if !o.On() {
		if o.ClientID != "" || o.ClientSecretFile != "" || o.RedirectURL != "" {
			return []error{errors.New("admin.oidc.issuer: set the provider's issuer URL, or remove [admin.oidc]")}
		}
		return nil
	}
	var errs []error
	if err := webURL(o.Issuer); err != nil {
		errs = append(errs, fmt.Errorf("admin.oidc.issuer: %v", err))
	}
	if o.ClientID == "" {
		errs = append(errs, errors.New("admin.oidc.client_id: set the client ID registered at the provider"))
	}
	switch r := c.RedirectURL(); {
	case r == "":
		errs = append(errs, fmt.Errorf("admin.oidc.redirect_url: admin.listen %q is no address a browser can reach: set the callback URL registered at the provider (ending in %s)", c.Listen, CallbackPath))
	case webURL(r) != nil:
		errs = append(errs, fmt.Errorf("admin.oidc.redirect_url: %v", webURL(r)))
	case !strings.HasSuffix(mustPath(r), CallbackPath):
		errs = append(errs, fmt.Errorf("admin.oidc.redirect_url: %q must end in %s, the panel's callback", r, CallbackPath))
	}
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		errs = append(errs, errors.New(`admin.oidc.scopes: must include "openid", or the provider returns no ID token`))
	}
	return errs
}

// webURL accepts an absolute https URL, or http on a loopback host (a
// provider on the same machine, or a test).
func webURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must be an absolute URL with a host, no user, query or fragment", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || net.ParseIP(h).IsLoopback() {
			return nil
		}
		return fmt.Errorf("%q must be https (plain http only on a loopback host)", s)
	}
	return fmt.Errorf("%q must be an https URL", s)
}

func mustPath(s string) string {
	u, _ := url.Parse(s)
	return u.Path
}
