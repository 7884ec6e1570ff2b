package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestOperators: `hallmark operators` creates the operators' CA once,
// issues an operator a client certificate the CA verifies for client
// authentication (key 0600), records their role and the certificate's hash
// (audited), refuses an unknown role and a second operator of one name,
// and revokes.
func TestOperators(t *testing.T) {
	t.Parallel()
	c := newCA(t, testdb.SQLite(t))
	dir := t.TempDir()
	caFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	c.configure(fmt.Sprintf("[admin]\nlisten = \"127.0.0.1:0\"\ntoken_off = true\ntls_cert_file = %q\ntls_key_file = %q\nclient_ca_file = %q\nclient_ca_key_file = %q\n",
		filepath.Join(dir, "panel.pem"), filepath.Join(dir, "panel.key"), caFile, keyFile))
	c.want(2, "operators", "add", "--role", "viewer", "--out", dir, "alice") // no CA yet
	c.want(0, "operators", "init-ca")
	c.want(4, "operators", "init-ca")
	c.want(2, "operators", "add", "--role", "root", "--out", dir, "alice")
	r := c.want(0, "operators", "add", "--role", "viewer", "--out", dir, "alice")
	if !strings.Contains(r.stdout, "openssl pkcs12") {
		t.Errorf("add does not say how to make a browser's file:\n%s", r.stdout)
	}
	if fi, err := os.Stat(filepath.Join(dir, "alice.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("alice.key: %v %v, want mode 0600", fi, err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(caFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || leaf.Subject.CommonName != "alice" {
		t.Fatalf("alice's certificate (%s) does not verify for client authentication: %v", leaf.Subject.CommonName, err)
	}
	other := t.TempDir()
	c.want(4, "operators", "add", "--role", "admin", "--out", other, "alice")
	if _, err := os.Stat(filepath.Join(other, "alice.key")); !os.IsNotExist(err) {
		t.Errorf("a refused add left its key behind: %v", err)
	}

	var ops []struct {
		Name, Role string
		CertSHA256 string `json:"cert_sha256"`
	}
	c.jsonOf(&ops, 0, "operators", "list", "--json")
	op, err := c.st().OperatorByCert(context.Background(), ops[0].CertSHA256)
	if len(ops) != 1 || ops[0].Role != "viewer" || err != nil || op.Name != "alice" {
		t.Fatalf("operators list = %+v; OperatorByCert = %+v, %v", ops, op, err)
	}
	c.want(0, "operators", "revoke", "alice")
	c.want(3, "operators", "revoke", "alice")
	evs, _, err := c.st().AuditFind(context.Background(), store.AuditFilter{Trail: new(bool)}, store.Page{})
	if err != nil || len(evs) != 2 || evs[0].Action != "operator.revoke" || evs[1].Action != "operator.add" || !strings.HasPrefix(evs[1].Actor, "cli:") {
		t.Fatalf("audit = %+v, %v; want operator.add then operator.revoke by the CLI", evs, err)
	}
}

// TestOperatorsOIDC: `hallmark operators add --oidc-subject` binds an
// operator to [admin.oidc]'s issuer and the subject, issuing no
// certificate (audited); it needs [admin.oidc], and refuses a second
// operator of the same identity.
func TestOperatorsOIDC(t *testing.T) {
	t.Parallel()
	c := newCA(t, testdb.SQLite(t))
	dir := t.TempDir()
	c.configure("[admin]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"t\"\n")
	r := c.want(2, "operators", "add", "--role", "viewer", "--oidc-subject", "248289761001", "alice")
	if !strings.Contains(r.stderr, "[admin.oidc]") {
		t.Errorf("without [admin.oidc] add says %q", r.stderr)
	}
	c.configure("[admin.oidc]\nissuer = \"https://idp.example/\"\nclient_id = \"hallmark\"\nredirect_url = \"https://ops.example/login/oidc/callback\"\n")
	c.want(0, "operators", "add", "--role", "operator", "--out", dir, "--oidc-subject", "248289761001", "alice")
	c.want(4, "operators", "add", "--role", "admin", "--oidc-subject", "248289761001", "mallory")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("an OIDC operator got files: %v", entries)
	}
	op, err := c.st().OperatorByCert(context.Background(), "oidc:https://idp.example#248289761001")
	if err != nil || op.Name != "alice" || op.Role != store.RoleOperator {
		t.Fatalf("the bound identity's operator = %+v, %v", op, err)
	}
	evs, _, err := c.st().AuditFind(context.Background(), store.AuditFilter{Action: "operator.add"}, store.Page{})
	if err != nil || len(evs) != 1 || !strings.Contains(evs[0].Detail, "OpenID Connect subject 248289761001") {
		t.Fatalf("audit = %+v, %v", evs, err)
	}
}
