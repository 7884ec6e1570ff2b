package interop

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// outcome is one line of the interoperability matrix.
type outcome struct {
	client, scenario, store, backend, result string
}

var matrix struct {
	sync.Mutex
	rows []outcome
}

// cell names where a scenario runs: one client against one CA.
type cell struct {
	client, store, backend string
}

// scenario runs fn as a subtest and records its outcome in the matrix.
func (c cell) scenario(t *testing.T, name string, fn func(t *testing.T)) bool {
	t.Helper()
	start := time.Now()
	ran, skipped := false, false
	ok := t.Run(name, func(t *testing.T) {
		ran = true
		// t.Skip ends fn with runtime.Goexit, which runs this; t.Run's
		// result cannot tell a pass from a skip.
		defer func() { skipped = t.Skipped() }()
		fn(t)
	})
	if !ran {
		return ok // filtered out by -run
	}
	res := "PASS"
	switch {
	case !ok:
		res = "FAIL"
	case skipped:
		res = "SKIP"
	}
	res += fmt.Sprintf(" %5.1fs", time.Since(start).Seconds())
	matrix.Lock()
	matrix.rows = append(matrix.rows, outcome{c.client, name, c.store, c.backend, res})
	matrix.Unlock()
	return ok
}

// printMatrix writes one line per client, scenario, store and backend to
// stdout and, when HALLMARK_INTEROP_MATRIX names a file, to that file.
func printMatrix() {
	matrix.Lock()
	defer matrix.Unlock()
	if len(matrix.rows) == 0 {
		return
	}
	// Cells run in parallel; group the lines by cell, scenarios in the
	// order they ran.
	sort.SliceStable(matrix.rows, func(i, j int) bool {
		a, b := matrix.rows[i], matrix.rows[j]
		if a.client != b.client {
			return a.client < b.client
		}
		if a.store != b.store {
			return a.store > b.store // sqlite first
		}
		return a.backend < b.backend
	})
	var b strings.Builder
	fmt.Fprintln(&b, "interoperability matrix (client, scenario, store, signing backend, outcome):")
	for _, r := range matrix.rows {
		fmt.Fprintf(&b, "INTEROP %-10s %-26s %-9s %-7s %s\n", r.client, r.scenario, r.store, r.backend, r.result)
	}
	fmt.Print(b.String())
	if p := os.Getenv("HALLMARK_INTEROP_MATRIX"); p != "" {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "writing the interop matrix to %s: %v\n", p, err)
		}
	}
}

// verifyChain checks that the leaf in chainPath verifies to the CA's root
// for name (a DNS name or an IP address).
func (ca *CA) verifyChain(t *testing.T, chainPath, name string) *x509.Certificate {
	t.Helper()
	leaf := readCert(t, chainPath)
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	rootPEM, err := os.ReadFile(ca.Root)
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM(rootPEM)
	chain, _ := os.ReadFile(chainPath)
	inter.AppendCertsFromPEM(chain)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter}); err != nil {
		t.Fatalf("the certificate in %s does not verify for %s to the CA's root: %v", chainPath, name, err)
	}
	if ca.Issuer != "" {
		// The cell's backend, not another mounted issuer, signed it.
		issuer := readCert(t, ca.Issuer)
		if err := leaf.CheckSignatureFrom(issuer); err != nil {
			t.Fatalf("the certificate was not signed by the backend's issuer %s (%s): %v", ca.Issuer, issuer.Subject, err)
		}
	}
	return leaf
}

// crossRootCN is the local CA's second root (`ca init --cross-root`).
const crossRootCN = "Hallmark Development Root CA X2"

// verifyAlternate fails unless the chain in chainPath is the alternate one:
// its top certificate issued by the cross root, verifying to it.
func (ca *CA) verifyAlternate(t *testing.T, chainPath, name string) {
	t.Helper()
	harness.WantChainTo(t, chainPath, filepath.Join(ca.Dir, "ca", "root-x2.pem"), crossRootCN, name)
}

// waitRevoked polls the CRL at the certificate's distribution point until
// its serial appears with reason, as a relying party would see it.
func (ca *CA) waitRevoked(t *testing.T, cert *x509.Certificate, reason int) {
	t.Helper()
	harness.WaitRevoked(t, ca.HTTPClient(), cert, reason)
}

// serveWrongHTTP01 answers every http-01 request on the worker's http-01
// port with a key authorization that is not the client's, until the test
// ends.
func (ca *CA) serveWrongHTTP01(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort))
	if err != nil {
		t.Fatalf("listening on the http-01 port: %v", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "not-the-key-authorization.at-all")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// serveWebroot serves the files in dir as http-01 answers
// (/.well-known/acme-challenge/<token>) on the worker's http-01 port until
// the test ends: a web server with a webroot, for clients that write their
// answers to a directory (dehydrated's WELLKNOWN, uacme's hook).
func (ca *CA) serveWebroot(t *testing.T, dir string) {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort))
	if err != nil {
		t.Fatalf("listening on the http-01 port: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/.well-known/acme-challenge/", http.StripPrefix("/.well-known/acme-challenge/", http.FileServer(http.Dir(dir))))
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// wantProblem fails unless a client's failed run reports the ACME problem
// type (its short name, as clients print it, or its URN).
func wantProblem(t *testing.T, out string, err error, typ string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the client succeeded; want it to fail with %s:\n%s", typ, tail(out, 3000))
	}
	if !strings.Contains(out, "urn:ietf:params:acme:error:"+typ) && !strings.Contains(out, "Type:   "+typ) {
		t.Fatalf("the client's output does not name the %s problem:\n%s", typ, tail(out, 3000))
	}
}

// accountByKey is an ACME client (golang.org/x/crypto/acme) holding the
// account key another client keeps in the PEM file keyPath (PKCS #1, PKCS
// #8 or SEC 1), so the test can ask the CA about that client's account the
// way any client would: by its key (newAccount with onlyReturnExisting).
func (ca *CA) accountByKey(t *testing.T, keyPath string) *acme.Client {
	t.Helper()
	b, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("no PEM block in the account key %s", keyPath)
	}
	var key any
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	signer, ok := key.(crypto.Signer)
	if err != nil || !ok {
		t.Fatalf("the account key %s (%s): %v", keyPath, block.Type, err)
	}
	return &acme.Client{Key: signer, DirectoryURL: ca.BaseURL + "/directory", HTTPClient: ca.HTTPClient()}
}

// wantContact fails unless the CA holds client's account as valid with
// exactly the contact mailto:email.
func wantContact(t *testing.T, client *acme.Client, email string) {
	t.Helper()
	a, err := client.GetReg(t.Context(), "")
	if err != nil || a.Status != acme.StatusValid || len(a.Contact) != 1 || a.Contact[0] != "mailto:"+email {
		t.Fatalf("the CA's account for the client's key: %+v, %v; want it valid with contact mailto:%s", a, err, email)
	}
}

// wantDeactivated fails unless the CA refuses client's account key as a
// deactivated account's: RFC 8555 §7.3.6, 401 unauthorized.
func wantDeactivated(t *testing.T, client *acme.Client) {
	t.Helper()
	_, err := client.GetReg(t.Context(), "")
	var ae *acme.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || ae.ProblemType != "urn:ietf:params:acme:error:unauthorized" {
		t.Fatalf("the client's account after deactivation: %v; want 401 unauthorized (the CA did not deactivate the account)", err)
	}
}
