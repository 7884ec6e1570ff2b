package admin

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/oidcop"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// oidcRig is a panel with the token off and OpenID Connect sign-in
// through a real provider (oidcop.Start), over a real store.
type oidcRig struct {
	panel, issuer string
	st            store.Store
}

const (
	otherRedirect = "http://127.0.0.1:1/callback" // another application's, never reached
	rigSecret     = "hallmark-client-secret"
)

func newOIDCRig(t *testing.T, kind string) *oidcRig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rig := &oidcRig{panel: "http://" + ln.Addr().String()}
	rig.issuer = oidcop.Start(t, "127.0.0.1", oidcop.NewUsers("alice", "bob", "mallory", "carol"), map[string][2]string{
		"hallmark":  {rigSecret, rig.panel + adminconf.CallbackPath},
		"other-app": {"other-secret", otherRedirect},
	})
	db := testdb.Open(t, kind)
	rig.st = db.Store
	s, err := New(Options{Store: db.Store, Queue: db.Queue, TokenOff: true,
		Revoker: revocation.New(db.Store, map[string]profile.Profile{"default": profile.Default()}),
		OIDC: &OIDCOptions{OIDC: adminconf.OIDC{Issuer: rig.issuer, ClientID: "hallmark", RedirectURL: rig.panel + adminconf.CallbackPath},
			ClientSecret: rigSecret}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return rig
}

func (rig *oidcRig) addOperator(t *testing.T, name, role, subject string) {
	t.Helper()
	err := rig.st.OperatorAdd(context.Background(), store.Operator{Name: name, Role: role,
		CertSHA256: adminconf.OIDCIdentity(rig.issuer, subject), NotAfter: time.Now().Add(time.Hour)},
		store.AuditEvent{Actor: "cli:test", Action: "operator.add", Subject: name})
	if err != nil {
		t.Fatal(err)
	}
}

// signIn presses the login page's button as user, lets tamper alter the
// provider's answer, and returns the browser and the callback's answer.
func (rig *oidcRig) signIn(t *testing.T, user string, tamper func(q url.Values)) (*http.Client, int, string) {
	t.Helper()
	c := browserClient(t, rig.panel)
	cb := signInAtOP(t, c, rig.issuer, rig.panel+"/login/oidc?next=/certs", user)
	if !strings.HasPrefix(cb.String(), rig.panel+adminconf.CallbackPath) {
		t.Fatalf("the provider sent the browser to %s, not the panel's callback", cb)
	}
	if tamper != nil {
		q := cb.Query()
		tamper(q)
		cb.RawQuery = q.Encode()
	}
	code, body := get(t, c, cb.String())
	return c, code, body
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func auditOf(t *testing.T, st store.Store, action string) []store.AuditEvent {
	t.Helper()
	evs, _, err := st.AuditFind(context.Background(), store.AuditFilter{Action: action}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestOIDCSignIn: on SQLite and PostgreSQL, an operator bound to their
// subject signs in through the provider with their row's role, audited
// as oidc; an identity no operator holds is refused with the command
// that would bind it, and audited; an answer whose state was altered
// starts no session; revoking the operator ends their session.
func TestOIDCSignIn(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			rig := newOIDCRig(t, kind)
			rig.addOperator(t, "alice", store.RoleViewer, "sub-alice")

			c, code, body := rig.signIn(t, "alice", nil)
			if code != http.StatusOK || !strings.Contains(body, "Signed in as alice (viewer)") || !strings.Contains(body, `url=/certs`) {
				t.Fatalf("alice's callback: %d\n%s", code, body)
			}
			if code, body := get(t, c, rig.panel+"/certs"); code != http.StatusOK || !strings.Contains(body, "alice (viewer)") {
				t.Fatalf("alice's /certs: %d\n%s", code, body)
			}
			if evs := auditOf(t, rig.st, ActionLogin); len(evs) != 1 || evs[0].Actor != "admin:alice" || !strings.Contains(evs[0].Detail, "method oidc") || !strings.Contains(evs[0].Detail, "subject sub-alice") {
				t.Fatalf("sign-in audit rows: %+v", evs)
			}

			m, code, body := rig.signIn(t, "mallory", nil)
			if code != http.StatusForbidden || !strings.Contains(body, "--oidc-subject sub-mallory") {
				t.Fatalf("mallory's callback: %d, want 403 with the binding command\n%s", code, body)
			}
			if code, _ := get(t, m, rig.panel+"/certs"); code != http.StatusUnauthorized {
				t.Fatalf("mallory's /certs after the refusal: %d, want 401", code)
			}
			if evs := auditOf(t, rig.st, ActionLoginRefused); len(evs) != 1 || evs[0].Subject != "sub-mallory" || evs[0].Actor != "oidc:mallory@ops.test" {
				t.Fatalf("refusal audit rows: %+v", evs)
			}

			rig.addOperator(t, "bob", store.RoleOperator, "sub-bob")
			b, code, _ := rig.signIn(t, "bob", func(q url.Values) { q.Set("state", q.Get("state")+"x") })
			if code != http.StatusBadRequest {
				t.Fatalf("a callback with an altered state: %d, want 400", code)
			}
			if code, _ := get(t, b, rig.panel+"/certs"); code != http.StatusUnauthorized {
				t.Fatalf("/certs after an altered state: %d, want 401", code)
			}

			// A name a session cookie cannot carry is refused, not
			// signed in to a session that then fails.
			rig.addOperator(t, "carol smith", store.RoleViewer, "sub-carol")
			if _, code, body := rig.signIn(t, "carol", nil); code != http.StatusForbidden || !strings.Contains(body, "plain name") {
				t.Fatalf("carol smith's callback: %d, want 403 asking for a plain name\n%s", code, body)
			}

			if err := rig.st.OperatorRevoke(context.Background(), "alice", store.AuditEvent{Actor: "cli:test", Action: "operator.revoke", Subject: "alice"}); err != nil {
				t.Fatal(err)
			}
			if code, _ := get(t, c, rig.panel+"/certs"); code != http.StatusUnauthorized {
				t.Fatalf("alice's /certs after her revocation: %d, want 401", code)
			}
			if rep, err := store.VerifyAudit(context.Background(), rig.st); err != nil || rep.Break != nil {
				t.Fatalf("audit verify: %+v, %v", rep, err)
			}
		})
	}
}

// tokenFor runs the code flow for clientID directly (no panel) with nonce
// and returns the provider's token response.
func tokenFor(t *testing.T, rig *oidcRig, cfg *oauth2.Config, nonce string) *oauth2.Token {
	t.Helper()
	p, err := oidc.NewProvider(context.Background(), rig.issuer)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Endpoint, cfg.Scopes = p.Endpoint(), adminconf.DefaultScopes
	v := oauth2.GenerateVerifier()
	stop, _ := url.Parse(cfg.RedirectURL)
	c := browserClient(t, stop.Scheme+"://"+stop.Host)
	cb := signInAtOP(t, c, rig.issuer, cfg.AuthCodeURL("st", oidc.Nonce(nonce), oauth2.S256ChallengeOption(v)), "alice")
	tok, err := cfg.Exchange(context.Background(), cb.Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"a\x00b\nc": "abc", "ok@ex.com": "ok@ex.com", "\xffx": "x", strings.Repeat("é", 100): strings.Repeat("é", 5)} {
		if got := printable(in, 10); got != want {
			t.Errorf("printable(%q, 10) = %q, want %q", in, got, want)
		}
	}
}

// TestOIDCTokenChecks: the relying party takes the ID token the provider
// issued to this panel with this flow's nonce, and refuses one issued to
// another application (its audience), one with another flow's nonce,
// and one whose claims were altered after signing.
func TestOIDCTokenChecks(t *testing.T) {
	rig := newOIDCRig(t, "sqlite")
	l := newOIDCLogin(OIDCOptions{OIDC: adminconf.OIDC{Issuer: rig.issuer, ClientID: "hallmark", RedirectURL: rig.panel + adminconf.CallbackPath}, ClientSecret: rigSecret})
	ctx := context.Background()

	ours := tokenFor(t, rig, &oauth2.Config{ClientID: "hallmark", ClientSecret: rigSecret, RedirectURL: rig.panel + adminconf.CallbackPath}, "nonce-1")
	id, err := l.identity(ctx, ours, "nonce-1")
	if err != nil || id.Subject != "sub-alice" || id.Issuer != rig.issuer || id.Name != "alice@ops.test" {
		t.Fatalf("the panel's own token: %+v, %v", id, err)
	}
	if _, err := l.identity(ctx, ours, "nonce-2"); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("another flow's nonce: %v, want refused for the nonce", err)
	}

	other := tokenFor(t, rig, &oauth2.Config{ClientID: "other-app", ClientSecret: "other-secret", RedirectURL: otherRedirect}, "nonce-1")
	if _, err := l.identity(ctx, other, "nonce-1"); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Fatalf("another application's token: %v, want refused for its audience", err)
	}

	raw := ours.Extra("id_token").(string)
	parts := strings.Split(raw, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(claims), "sub-alice", "sub-bob", 1)))
	forged := ours.WithExtra(map[string]any{"id_token": strings.Join(parts, ".")})
	if _, err := l.identity(ctx, forged, "nonce-1"); err == nil {
		t.Fatal("an ID token altered after signing was accepted")
	}
}
