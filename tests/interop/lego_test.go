package interop

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// legoRunner drives the lego binary (Debian's lego 4.9.1) against one CA
// with one account directory.
type legoRunner struct {
	ca   *CA
	bin  string
	path string
}

func (l legoRunner) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	env := append([]string{"EXEC_PATH=" + hookPath(t), "EXEC_POLLING_INTERVAL=1", "EXEC_PROPAGATION_TIMEOUT=10",
		// The exec provider solves authorizations one at a time, 60s
		// apart by default.
		"EXEC_SEQUENCE_INTERVAL=1"}, l.ca.hookEnv()...)
	lego := harness.Lego{Bin: l.bin, Directory: l.ca.BaseURL + "/directory", Root: l.ca.Root, Email: "interop@hallmark.test", Path: l.path, Env: env}
	return lego.Run(context.Background(), args...)
}

// mustRun runs lego and fails the test on error.
func (l legoRunner) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := l.run(t, args...)
	if err != nil {
		t.Fatalf("lego %s: %v\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	return out
}

func (l legoRunner) certPath(name string) string {
	return filepath.Join(l.path, "certificates", strings.ReplaceAll(name, "*", "_")+".crt")
}

func (l legoRunner) http() []string {
	return []string{"--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", l.ca.HTTPPort)}
}

func (l legoRunner) dns() []string {
	return []string{"--dns", "exec", "--dns.resolvers", l.ca.DNS.Addr, "--dns.disable-cp"}
}

// TestLego runs lego through every scenario against every store and signing
// backend. Cells run in parallel: each has its own CA and ports.
func TestLego(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		for _, be := range backends {
			t.Run(st.Name+"/"+be.name, func(t *testing.T) {
				t.Parallel()
				bin := requireTool(t, "lego", "apt-get install lego")
				ca := startCA(t, st.URL(t), be.setup)
				legoScenarios(t, cell{"lego", st.Name, be.name}, legoRunner{ca: ca, bin: bin, path: t.TempDir()})
			})
		}
	}
}

func legoScenarios(t *testing.T, c cell, l legoRunner) {
	ca := l.ca
	var ecCert, rsaCert string

	c.scenario(t, "http-01/ec256", func(t *testing.T) {
		name := "ec.lego.test"
		l.mustRun(t, append(append([]string{"--key-type", "ec256", "--domains", name}, l.http()...), "run")...)
		leaf := ca.verifyChain(t, l.certPath(name), name)
		if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok {
			t.Fatalf("--key-type ec256 gave a %T key", leaf.PublicKey)
		}
		ecCert = name
	})
	c.scenario(t, "http-01/rsa2048", func(t *testing.T) {
		name := "rsa.lego.test"
		l.mustRun(t, append(append([]string{"--key-type", "rsa2048", "--domains", name}, l.http()...), "run")...)
		leaf := ca.verifyChain(t, l.certPath(name), name)
		if k, ok := leaf.PublicKey.(*rsa.PublicKey); !ok || k.N.BitLen() != 2048 {
			t.Fatalf("--key-type rsa2048 gave %T", leaf.PublicKey)
		}
		rsaCert = name
	})
	c.scenario(t, "alternate/preferred-chain", func(t *testing.T) {
		if c.backend != "local" {
			t.Skip("only the local CA has a cross root")
		}
		name := "alt.lego.test"
		l.mustRun(t, append(append([]string{"--domains", name}, l.http()...), "run", "--preferred-chain", crossRootCN)...)
		ca.verifyAlternate(t, l.certPath(name), name)
	})
	c.scenario(t, "tls-alpn-01", func(t *testing.T) {
		name := "alpn.lego.test"
		l.mustRun(t, "--domains", name, "--tls", "--tls.port", fmt.Sprintf("127.0.0.1:%d", ca.ALPNPort), "run")
		ca.verifyChain(t, l.certPath(name), name)
	})
	c.scenario(t, "dns-01/exec", func(t *testing.T) {
		name := "dns.lego.test"
		l.mustRun(t, append(append([]string{"--domains", name}, l.dns()...), "run")...)
		ca.verifyChain(t, l.certPath(name), name)
	})
	c.scenario(t, "dns-01/wildcard", func(t *testing.T) {
		l.mustRun(t, append(append([]string{"--domains", "*.wild.lego.test", "--domains", "wild.lego.test"}, l.dns()...), "run")...)
		leaf := ca.verifyChain(t, l.certPath("*.wild.lego.test"), "any.wild.lego.test")
		if len(leaf.DNSNames) != 2 {
			t.Fatalf("wildcard certificate names %v, want *.wild.lego.test and wild.lego.test", leaf.DNSNames)
		}
	})
	c.scenario(t, "fail/ip-as-dns-name", func(t *testing.T) {
		// lego 4.9.1 predates its RFC 8738 support: it sends an address
		// given to --domains as a "dns" identifier. Hallmark must refuse
		// that with a problem that tells the user what to do instead.
		out, err := l.run(t, append(append([]string{"--domains", "127.0.0.1"}, l.http()...), "run")...)
		wantProblem(t, out, err, "malformed")
		if !strings.Contains(out, `use an identifier of type \"ip\"`) && !strings.Contains(out, `use an identifier of type "ip"`) {
			t.Fatalf("the problem does not point at the ip identifier type:\n%s", tail(out, 2000))
		}
	})
	// RFC 8738 IP identifiers need a lego newer than Debian's: the current
	// one .ci/run builds (v4.25.0, also the ARI client) sends "ip"
	// identifiers; the worker validates http-01 at the address itself and
	// tls-alpn-01 with the reverse-DNS SNI (RFC 8738 §6).
	c.scenario(t, "ip/http-01 (lego 4.25)", func(t *testing.T) {
		cur := legoRunner{ca: ca, bin: currentLego(t), path: t.TempDir()}
		cur.mustRun(t, append(append([]string{"--domains", "127.0.0.1"}, cur.http()...), "run")...)
		leaf := ca.verifyChain(t, cur.certPath("127.0.0.1"), "127.0.0.1")
		if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || len(leaf.DNSNames) != 0 {
			t.Fatalf("IP certificate names: ip %v dns %v, want exactly 127.0.0.1", leaf.IPAddresses, leaf.DNSNames)
		}
	})
	c.scenario(t, "ip/tls-alpn-01 (lego 4.25)", func(t *testing.T) {
		cur := legoRunner{ca: ca, bin: currentLego(t), path: t.TempDir()}
		cur.mustRun(t, "--domains", "127.0.0.1", "--tls", "--tls.port", fmt.Sprintf("127.0.0.1:%d", ca.ALPNPort), "run")
		ca.verifyChain(t, cur.certPath("127.0.0.1"), "127.0.0.1")
	})
	c.scenario(t, "csr", func(t *testing.T) {
		name := "csr.lego.test"
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		csrPath := csrFile(t, key, name)
		l.mustRun(t, append(append([]string{"--csr", csrPath}, l.http()...), "run")...)
		leaf := ca.verifyChain(t, l.certPath(name), name)
		if !key.PublicKey.Equal(leaf.PublicKey) {
			t.Fatal("the certificate does not carry the CSR's public key")
		}
	})
	c.scenario(t, "renew", func(t *testing.T) {
		if ecCert == "" {
			t.Fatal("nothing to renew: http-01/ec256 failed")
		}
		before := readCert(t, l.certPath(ecCert))
		// --days 1000: renew now, whatever the remaining lifetime.
		l.mustRun(t, append(append([]string{"--domains", ecCert}, l.http()...), "renew", "--days", "1000", "--no-random-sleep")...)
		after := ca.verifyChain(t, l.certPath(ecCert), ecCert)
		if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
			t.Fatal("renew left the same certificate in place")
		}
	})
	c.scenario(t, "revoke/keyCompromise", func(t *testing.T) {
		if rsaCert == "" {
			t.Fatal("nothing to revoke: http-01/rsa2048 failed")
		}
		leaf := readCert(t, l.certPath(rsaCert))
		l.mustRun(t, "--domains", rsaCert, "revoke", "--reason", "1")
		ca.waitRevoked(t, leaf, 1)
	})

	// A key reported compromised (CA/B Forum BR §6.1.1.3): once lego
	// revokes a certificate of it with reason keyCompromise, a CSR with
	// that key is refused at finalize with badPublicKey.
	c.scenario(t, "fail/blocked-key", func(t *testing.T) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		first := "blocked.lego.test"
		l.mustRun(t, append(append([]string{"--csr", csrFile(t, key, first)}, l.http()...), "run")...)
		leaf := ca.verifyChain(t, l.certPath(first), first)
		l.mustRun(t, "--domains", first, "revoke", "--reason", "1")
		ca.waitRevoked(t, leaf, 1)
		out, err := l.run(t, append(append([]string{"--csr", csrFile(t, key, "again.blocked.lego.test")}, l.http()...), "run")...)
		wantProblem(t, out, err, "badPublicKey")
	})

	// A key compromise reported after the certificate was revoked as
	// superseded (as Boulder re-revokes): lego's second revocation is
	// answered 200, the CRL lists the certificate as keyCompromise, and
	// the key is refused from then on.
	c.scenario(t, "revoke/compromise-later", func(t *testing.T) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		name := "rerevoked.lego.test"
		l.mustRun(t, append(append([]string{"--csr", csrFile(t, key, name)}, l.http()...), "run")...)
		leaf := ca.verifyChain(t, l.certPath(name), name)
		l.mustRun(t, "--domains", name, "revoke", "--keep", "--reason", "4")
		ca.waitRevoked(t, leaf, 4)
		l.mustRun(t, "--domains", name, "revoke", "--reason", "1")
		ca.waitRevoked(t, leaf, 1)
		out, err := l.run(t, append(append([]string{"--csr", csrFile(t, key, "again.rerevoked.lego.test")}, l.http()...), "run")...)
		wantProblem(t, out, err, "badPublicKey")
	})

	// Failures a user can cause, and the problem lego must show them.
	c.scenario(t, "fail/wrong-http-01", func(t *testing.T) {
		// lego's webroot mode writes the answer where we never serve it;
		// the port answers with something else.
		ca.serveWrongHTTP01(t)
		out, err := l.run(t, "--domains", "wrong.lego.test", "--http", "--http.webroot", t.TempDir(), "run")
		wantProblem(t, out, err, "unauthorized")
	})
	c.scenario(t, "fail/caa", func(t *testing.T) {
		name := "caa.lego.test"
		ca.DNS.SetCAA(name, 0, "issue", otherCA)
		out, err := l.run(t, append(append([]string{"--domains", name}, l.dns()...), "run")...)
		wantProblem(t, out, err, "caa")
	})
	c.scenario(t, "fail/policy", func(t *testing.T) {
		out, err := l.run(t, append(append([]string{"--domains", "host." + deniedDomain}, l.dns()...), "run")...)
		wantProblem(t, out, err, "rejectedIdentifier")
	})
}

// currentLego is a lego with RFC 8738 and RFC 9773 support (v4.25.0, built
// by .ci/run and named in HALLMARK_LEGO_ARI). In CI a missing one fails.
func currentLego(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HALLMARK_LEGO_ARI"); p != "" {
		return p
	}
	if harness.Required() {
		t.Fatal("HALLMARK_LEGO_ARI is not set: .ci/run builds lego v4.25.0 and sets it")
	}
	t.Skip("SKIPPING: set HALLMARK_LEGO_ARI to lego ≥ 4.17 (see .ci/run) for the IP identifier scenarios")
	return ""
}

// csrFile writes a PEM CSR for name with key and returns its path.
func csrFile(t *testing.T, key *ecdsa.PrivateKey, name string) string {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "req.csr")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
