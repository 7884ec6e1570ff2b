package admin_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// testCA signs the panel's server certificate and the operators'.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "operators CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, dir: t.TempDir()}
}

// issue signs a leaf for cn valid until notAfter.
func (ca *testCA) issue(t *testing.T, cn string, notAfter time.Time, server bool) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-2 * time.Hour),
		NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func (ca *testCA) write(t *testing.T, name string, blocks ...*pem.Block) string {
	t.Helper()
	var b []byte
	for _, bl := range blocks {
		b = append(b, pem.EncodeToMemory(bl)...)
	}
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mtlsPanel serves the panel on db over TLS, verifying client
// certificates against ca, with the token turned off; the pool trusts the
// panel's certificate.
func mtlsPanel(t *testing.T, ca *testCA, db *open.DB, opts ...func(*admin.Options)) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	var o admin.Options
	for _, f := range opts {
		f(&o)
	}
	return mtlsPanelWith(t, ca, db, o)
}

// mtlsPanelWith is mtlsPanel with o's other options (a pause rule).
func mtlsPanelWith(t *testing.T, ca *testCA, db *open.DB, o admin.Options) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srvCert := ca.issue(t, "panel", time.Now().Add(time.Hour), true)
	keyDER, _ := x509.MarshalECPrivateKey(srvCert.PrivateKey.(*ecdsa.PrivateKey))
	certFile := ca.write(t, "panel.pem", &pem.Block{Type: "CERTIFICATE", Bytes: srvCert.Certificate[0]})
	keyFile := ca.write(t, "panel.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	caFile := ca.write(t, "ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
	cfg, err := admin.ServerTLS(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	o.Store, o.Queue, o.TokenOff, o.SecureCookies = db.Store, db.Queue, true, true
	o.Revoker = revocation.New(db.Store, map[string]profile.Profile{"default": profile.Default()})
	p, err := admin.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p.Handler())
	srv.TLS = cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return srv, roots
}

// client is an HTTPS client presenting cert (none when nil).
func client(roots *x509.CertPool, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, CheckRedirect: noRedirect}
}

// TestClientCertificateRoles: on the TLS listener each operator is named
// by their certificate and held to their role. A viewer reads the
// certificate's page without its revoke form, and a forged revoke POST with
// the viewer's own CSRF token is 403; an operator revokes and the audit
// row names them. No certificate (the token turned off), a certificate no
// operator holds, a revoked operator's, and an expired one are refused.
func TestClientCertificateRoles(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Open(t, kind)
			st := db.Store
			ca := newTestCA(t)
			srv, roots := mtlsPanel(t, ca, db)
			hour := time.Now().Add(time.Hour)
			certs := map[string]tls.Certificate{}
			for _, op := range []struct{ name, role string }{{"alice", store.RoleViewer}, {"bob", store.RoleOperator}, {"carol", store.RoleOperator}} {
				c := ca.issue(t, op.name, hour, false)
				certs[op.name] = c
				if err := st.OperatorAdd(ctx, store.Operator{Name: op.name, Role: op.role, CertSHA256: admin.CertSHA256(c.Leaf), NotAfter: hour},
					store.AuditEvent{Actor: "test", Action: "operator.add", Subject: op.name}); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.OperatorRevoke(ctx, "carol", store.AuditEvent{Actor: "test", Action: "operator.revoke", Subject: "carol"}); err != nil {
				t.Fatal(err)
			}
			issuedCert(t, st, "c0ffee01", "mtls.example.com", "issuer-1", "default")
			certURL := srv.URL + "/certs/c0ffee01"

			alice, bob := certs["alice"], certs["bob"]
			resp, page := do(t, client(roots, &alice), "GET", certURL, "", nil)
			if resp.StatusCode != 200 || !strings.Contains(page, "alice (viewer)") || strings.Contains(page, "Sign out") {
				t.Fatalf("viewer GET: %d\n%s", resp.StatusCode, page)
			}
			if strings.Contains(page, `id="revoke-form"`) {
				t.Fatal("the viewer is shown the revoke form")
			}
			csrf := csrfOf(t, page) // the sign-out form's: the viewer's own token
			resp, body := do(t, client(roots, &alice), "POST", certURL+"/revoke", "", url.Values{"csrf": {csrf}, "reason": {"4"}})
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "role viewer") {
				t.Fatalf("viewer's forged revoke: %d %s; want 403 naming the role", resp.StatusCode, body)
			}
			if c, _ := st.CertificateBySerial(ctx, "c0ffee01"); c.RevokedAt != nil {
				t.Fatal("the viewer's POST revoked the certificate")
			}

			_, page = do(t, client(roots, &bob), "GET", certURL, "", nil)
			if !strings.Contains(page, `id="revoke-form"`) {
				t.Fatalf("the operator is not shown the revoke form:\n%s", page)
			}
			resp, body = do(t, client(roots, &bob), "POST", certURL+"/revoke", "", url.Values{"csrf": {csrfOf(t, page)}, "reason": {"4"}})
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("operator's revoke: %d %s", resp.StatusCode, body)
			}
			evs, _, err := st.AuditFind(ctx, store.AuditFilter{Action: "revoke"}, store.Page{})
			if err != nil || len(evs) != 1 || evs[0].Actor != "admin:bob" || evs[0].Subject != "c0ffee01" {
				t.Fatalf("revoke audit = %+v, %v; want one row by admin:bob", evs, err)
			}

			logins, _, err := st.AuditFind(ctx, store.AuditFilter{Action: admin.ActionLogin}, store.Page{})
			if got := subjectsOf(logins); err != nil || got != "bob alice" {
				t.Fatalf("sign-ins recorded: %q, %v; want one each for alice and bob, however many requests", got, err)
			}

			carol := certs["carol"]
			eve := ca.issue(t, "eve", hour, false)
			expired := ca.issue(t, "dave", time.Now().Add(-time.Minute), false)
			for _, tc := range []struct {
				name string
				cert *tls.Certificate
				want int
			}{{"no certificate", nil, 401}, {"no operator", &eve, 403}, {"revoked operator", &carol, 403}} {
				if resp, body := do(t, client(roots, tc.cert), "GET", srv.URL+"/", "", nil); resp.StatusCode != tc.want {
					t.Errorf("%s: %d, want %d\n%s", tc.name, resp.StatusCode, tc.want, body)
				}
			}
			if resp, err := client(roots, &expired).Get(srv.URL + "/"); err == nil {
				resp.Body.Close()
				t.Errorf("an expired certificate was answered %d; want the handshake refused", resp.StatusCode)
			}
			if resp, body := do(t, client(roots, nil), "GET", srv.URL+"/", "Bearer "+token, nil); resp.StatusCode != 401 {
				t.Errorf("the token, turned off: %d, want 401\n%s", resp.StatusCode, body)
			}
		})
	}
}

func subjectsOf(evs []store.AuditEvent) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Subject)
	}
	return strings.Join(out, " ")
}
