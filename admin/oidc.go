package admin

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/redact"
)

// OpenID Connect sign-in ([admin.oidc]): the login page's button starts
// the authorization code flow with PKCE; state, nonce and the PKCE
// verifier ride in a short-lived cookie the panel signs, so the callback
// accepts only the answer to the flow this browser began. The ID token is
// verified (signature, issuer, audience, expiry, nonce) by go-oidc, and
// its issuer and subject must name a live operator row
// (adminconf.OIDCIdentity): the provider says who someone is, the
// operators table what they may do.

// OIDCOptions is [admin.oidc] with its secret read (LoadOIDC).
type OIDCOptions struct {
	adminconf.OIDC // RedirectURL resolved (adminconf.Config.RedirectURL)
	ClientSecret   string
	// HTTPClient reaches the provider; nil: one with a 10 second timeout.
	HTTPClient *http.Client
}

// LoadOIDC reads [admin.oidc]'s client secret; nil when OIDC is off.
func LoadOIDC(c adminconf.Config) (*OIDCOptions, error) {
	if !c.OIDC.On() {
		return nil, nil
	}
	o := &OIDCOptions{OIDC: c.OIDC}
	o.RedirectURL = c.RedirectURL()
	if f := c.OIDC.ClientSecretFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading admin.oidc.client_secret_file: %w", err)
		}
		if o.ClientSecret = strings.TrimSpace(string(b)); o.ClientSecret == "" {
			return nil, fmt.Errorf("admin.oidc.client_secret_file %s is empty", f)
		}
		redact.Add(o.ClientSecret)
	}
	return o, nil
}

const (
	oidcCookie  = "hallmark_admin_oidc" // the flow's state, nonce and PKCE verifier
	oidcFlowTTL = 10 * time.Minute
	// ActionLoginRefused is an identity the provider vouched for that no
	// live operator holds.
	ActionLoginRefused = "admin.login_refused"
)

// oidcLogin is the relying party. The provider's discovery document is
// read on first use, and again after a failure, so a provider that is
// down when the frontend starts does not keep the panel from starting.
type oidcLogin struct {
	o      OIDCOptions
	client *http.Client
	mu     sync.Mutex
	prov   *oidc.Provider
}

func newOIDCLogin(o OIDCOptions) *oidcLogin {
	c := o.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	return &oidcLogin{o: o, client: c}
}

// provider discovers the issuer once. Its context is the background's:
// go-oidc fetches the signing keys later with it.
func (l *oidcLogin) provider() (*oidc.Provider, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prov != nil {
		return l.prov, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), l.client), l.o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering the OpenID provider %s: %w", l.o.Issuer, err)
	}
	l.prov = p
	return p, nil
}

func (l *oidcLogin) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: l.o.ClientID, ClientSecret: l.o.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: l.o.RedirectURL, Scopes: l.o.ScopeList()}
}

// oidcFlow is one sign-in in progress, kept in the browser (oidcCookie).
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Expires  int64  `json:"e"`
}

// sealFlow and openFlow sign the flow cookie with the panel's key: a
// browser can carry it, not forge or alter it.
func (a *auth) sealFlow(f oidcFlow) string {
	b, _ := json.Marshal(f)
	enc := base64.RawURLEncoding.EncodeToString(b)
	return enc + "." + a.mac("oidc flow", enc)
}

func (a *auth) openFlow(v string) (oidcFlow, bool) {
	var f oidcFlow
	enc, sig, ok := strings.Cut(v, ".")
	if !ok || subtle.ConstantTimeCompare([]byte(sig), []byte(a.mac("oidc flow", enc))) != 1 {
		return f, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || json.Unmarshal(b, &f) != nil || a.now().Unix() > f.Expires || f.State == "" {
		return oidcFlow{}, false
	}
	return f, true
}

// flowCookie is Lax, unlike the panel's other cookies: the provider sends
// the browser back with a cross-site navigation, on which a Strict cookie
// would not be sent. It holds no session, only this one flow's secrets.
func (a *auth) flowCookie(value string, ttl time.Duration) *http.Cookie {
	c := a.cookie(oidcCookie, value, ttl)
	c.SameSite, c.Path = http.SameSiteLaxMode, "/login/oidc"
	return c
}

// oidcIdentity is who the provider says signed in.
type oidcIdentity struct {
	Issuer, Subject string
	Name            string // the name claim's value, for people; may be ""
}

// identity verifies the token response of this flow: an ID token signed
// by the issuer's keys, for this client, not expired, carrying the flow's
// nonce (and, when it has at_hash, matching the access token).
func (l *oidcLogin) identity(ctx context.Context, tok *oauth2.Token, nonce string) (oidcIdentity, error) {
	p, err := l.provider()
	if err != nil {
		return oidcIdentity{}, err
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return oidcIdentity{}, errors.New("the token response holds no ID token (is the openid scope asked for?)")
	}
	ctx = oidc.ClientContext(ctx, l.client)
	idt, err := p.Verifier(&oidc.Config{ClientID: l.o.ClientID}).Verify(ctx, raw)
	if err != nil {
		return oidcIdentity{}, fmt.Errorf("verifying the ID token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return oidcIdentity{}, errors.New("the ID token's nonce is not this sign-in's")
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			return oidcIdentity{}, fmt.Errorf("the ID token's at_hash: %w", err)
		}
	}
	if !store.Storable(idt.Subject) || len(idt.Subject) > 255 {
		return oidcIdentity{}, errors.New("the ID token's subject is not text the operators table can hold")
	}
	id := oidcIdentity{Issuer: idt.Issuer, Subject: idt.Subject}
	var claims map[string]any
	if err := idt.Claims(&claims); err == nil {
		id.Name = l.nameOf(claims)
	}
	if id.Name == "" && tok.AccessToken != "" {
		// Many providers put profile claims only in the userinfo answer.
		if ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			if ui.Claims(&claims) == nil {
				id.Name = l.nameOf(claims)
			}
		}
	}
	return id, nil
}

// nameOf is the configured name claim's value; by default email, else
// preferred_username.
func (l *oidcLogin) nameOf(claims map[string]any) string {
	names := []string{l.o.NameClaim}
	if l.o.NameClaim == "" {
		names = []string{"email", "preferred_username"}
	}
	for _, n := range names {
		if v, ok := claims[n].(string); ok && printable(v, 128) != "" {
			return printable(v, 128)
		}
	}
	return ""
}

// printable is s as text for a page and an audit row: valid UTF-8, no
// control characters, at most max bytes.
func printable(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "")
	}
	return s
}
