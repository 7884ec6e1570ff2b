package pkcs11_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/pkcs11"
)

// tokenMu serialises the tests that take the token away from the ones that
// use it (one SoftHSM2 directory per test binary).
var tokenMu sync.RWMutex

type ca struct {
	dir string
	cfg pkcs11.Config
	iss *signer.Issuer
	tok *pkcs11.Token
}

// labels numbers newCA's key labels: the token lives as long as the test
// binary, so `go test -count=2` (or a benchmark run again at a larger b.N)
// would otherwise find the first run's key under the label and refuse it.
var labels atomic.Int64

// newCA makes a local root in a temporary directory and an intermediate
// whose key is generated on the SoftHSM2 token under label (numbered).
func newCA(t testing.TB, label, keyType string) *ca {
	t.Helper()
	needHSM(t)
	label = fmt.Sprintf("%s-%d", label, labels.Add(1))
	dir := t.TempDir()
	if _, err := signer.InitLocal(dir, signer.CAOptions{Name: "PKCS11 Test", URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	cfg := pkcs11.Config{Module: hsm.module, TokenLabel: tokenLabel, PIN: userPIN, KeyLabel: label, MaxSessions: 8}
	certFile := filepath.Join(dir, "hsm.pem")
	if _, err := pkcs11.Init(cfg, keyType, "PKCS11 Test HSM Intermediate", filepath.Join(dir, signer.RootCertFile), filepath.Join(dir, signer.RootKeyFile), certFile, signer.CAOptions{URLBase: "http://ca.test"}); err != nil {
		t.Fatalf("Init: %v", err)
	}
	iss, tok, err := pkcs11.LoadIssuer(cfg, certFile)
	if err != nil {
		t.Fatalf("LoadIssuer: %v", err)
	}
	t.Cleanup(func() { _ = tok.Close() })
	return &ca{dir: dir, cfg: cfg, iss: iss, tok: tok}
}

func leafRequest(t testing.TB, iss *signer.Issuer, name string) signer.Request {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer.Request{
		Profile: profile.Profile{ValidityHours: 72, KeyTypes: []string{"p256"}, IdentifierTypes: []string{"dns"},
			KeyUsages: []string{"digitalSignature"}, ExtKeyUsages: []string{"serverAuth"}},
		ProfileName: "short",
		Names:       []acme.Identifier{{Type: acme.IdentifierDNS, Value: name}},
		PublicKey:   key.Public(),
		IssuerURL:   "http://127.0.0.1:1/issuer/" + iss.ID,
		CRLURL:      "http://127.0.0.1:1/crl/" + iss.ID,
	}
}

func verify(t testing.TB, c *ca, chainPEM []byte, name string) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	rootPEM, _ := os.ReadFile(filepath.Join(c.dir, signer.RootCertFile))
	roots.AppendCertsFromPEM(rootPEM)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(chainPEM)
	blk, _ := pem.Decode(chainPEM)
	if blk == nil {
		t.Fatal("no certificate in the chain")
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: pool}); err != nil {
		t.Fatalf("the certificate signed on the token does not verify to the root: %v", err)
	}
	return leaf
}

// TestIssueAndCRLOnToken: each supported issuing key type, generated on a
// real SoftHSM2 token, signs a certificate that verifies to the root and a
// CRL that verifies against the issuer.
func TestIssueAndCRLOnToken(t *testing.T) {
	tokenMu.RLock()
	defer tokenMu.RUnlock()
	for _, kt := range []string{"p256", "p384", "rsa2048"} {
		t.Run(kt, func(t *testing.T) {
			c := newCA(t, "issue-"+kt, kt)
			issued, err := c.iss.Issue(context.Background(), leafRequest(t, c.iss, "hsm.example.test"))
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			leaf := verify(t, c, issued.ChainPEM, "hsm.example.test")
			if got := leaf.NotAfter.Sub(leaf.NotBefore); got > 72*time.Hour {
				t.Fatalf("a 72-hour profile gave %s of validity", got)
			}
			now := time.Now()
			der, err := c.iss.SignCRL(1, now, now.Add(time.Hour), []signer.RevokedEntry{{Serial: issued.Serial, RevokedAt: now, Reason: 1}}, "http://127.0.0.1:1/crl/"+c.iss.ID)
			if err != nil {
				t.Fatalf("SignCRL: %v", err)
			}
			crl, err := x509.ParseRevocationList(der)
			if err != nil {
				t.Fatal(err)
			}
			if err := crl.CheckSignatureFrom(c.iss.Cert); err != nil {
				t.Fatalf("the CRL signed on the token does not verify: %v", err)
			}
			if len(crl.RevokedCertificateEntries) != 1 || crl.RevokedCertificateEntries[0].SerialNumber.Cmp(issued.Serial) != 0 {
				t.Fatalf("CRL entries %v", crl.RevokedCertificateEntries)
			}
		})
	}
}

// TestInitRefusesToReplace: a second init never replaces the certificate
// file or a key already on the token.
func TestInitRefusesToReplace(t *testing.T) {
	tokenMu.RLock()
	defer tokenMu.RUnlock()
	c := newCA(t, "init-twice", "p256")
	root, rootKey := filepath.Join(c.dir, signer.RootCertFile), filepath.Join(c.dir, signer.RootKeyFile)
	if _, err := pkcs11.Init(c.cfg, "p256", "x", root, rootKey, filepath.Join(c.dir, "hsm.pem"), signer.CAOptions{URLBase: "http://ca.test"}); !errors.Is(err, signer.ErrExists) {
		t.Fatalf("Init over an existing certificate file: %v, want ErrExists", err)
	}
	if _, err := pkcs11.Init(c.cfg, "p256", "x", root, rootKey, filepath.Join(c.dir, "other.pem"), signer.CAOptions{URLBase: "http://ca.test"}); !errors.Is(err, signer.ErrExists) {
		t.Fatalf("Init over an existing key label: %v, want ErrExists", err)
	}
}

// TestWrongPINIsNotLogged: a bad PIN is refused at Open, and the PIN is
// not in the error an operator sees.
func TestWrongPINIsNotLogged(t *testing.T) {
	tokenMu.RLock()
	defer tokenMu.RUnlock()
	needHSM(t)
	_, err := pkcs11.Open(pkcs11.Config{Module: hsm.module, TokenLabel: tokenLabel, PIN: "999999-secret", KeyLabel: "x", MaxSessions: 2}, nil)
	if err == nil {
		t.Fatal("Open with a wrong PIN succeeded")
	}
	if strings.Contains(err.Error(), "999999-secret") {
		t.Fatalf("the error carries the PIN: %v", err)
	}
	_, err = pkcs11.Open(pkcs11.Config{Module: hsm.module, TokenLabel: tokenLabel, PIN: userPIN, KeyLabel: "no-such-key", MaxSessions: 2}, nil)
	if err == nil {
		t.Fatal("Open of a missing key succeeded")
	}
}

// TestTokenGoesAwayAndComesBack is what SoftHSM2 really does when its token
// directory disappears under a running worker: the live session's handles
// turn invalid (CKR_OBJECT_HANDLE_INVALID), re-initialising the module
// fails (CKR_GENERAL_ERROR) until the directory is back. Every failure is
// signer.ErrUnavailable (the worker retries), Ready reports it, and signing
// works again, with the same key, once the token returns.
func TestTokenGoesAwayAndComesBack(t *testing.T) {
	tokenMu.Lock()
	defer tokenMu.Unlock()
	c := newCA(t, "away", "p256")
	digest := sha256.Sum256([]byte("tbs"))
	if _, err := c.tok.Sign(rand.Reader, digest[:], crypto.SHA256); err != nil {
		t.Fatal(err)
	}
	away := hsm.tokenDir + ".away"
	if err := os.Rename(hsm.tokenDir, away); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := os.Rename(away, hsm.tokenDir); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	for i := 0; i < 3; i++ {
		_, err := c.tok.Sign(rand.Reader, digest[:], crypto.SHA256)
		if !errors.Is(err, signer.ErrUnavailable) {
			t.Fatalf("signing with the token away (try %d): %v, want signer.ErrUnavailable", i, err)
		}
	}
	if err := c.tok.Ready(context.Background()); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("Ready with the token away: %v, want signer.ErrUnavailable", err)
	}
	_, err := c.iss.Issue(context.Background(), leafRequest(t, c.iss, "away.example.test"))
	if !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("Issue with the token away: %v, want an error wrapping signer.ErrUnavailable", err)
	}
	var ae *acme.Error
	if errors.As(err, &ae) && ae.Problem.Type != acme.ProblemServerInternal {
		t.Fatalf("Issue with the token away gave client problem %s: the order would fail", ae.Problem.Type)
	}
	restore()
	if err := c.tok.Ready(context.Background()); err != nil {
		t.Fatalf("Ready after the token came back: %v", err)
	}
	issued, err := c.iss.Issue(context.Background(), leafRequest(t, c.iss, "back.example.test"))
	if err != nil {
		t.Fatalf("Issue after the token came back: %v", err)
	}
	verify(t, c, issued.ChainPEM, "back.example.test")
}

// TestConcurrentSigning: more signers than sessions share the pool.
func TestConcurrentSigning(t *testing.T) {
	tokenMu.RLock()
	defer tokenMu.RUnlock()
	c := newCA(t, "concurrent", "p256")
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := sha256.Sum256(big.NewInt(int64(i)).Bytes())
			sig, err := c.tok.Sign(rand.Reader, d[:], crypto.SHA256)
			if err == nil && !ecdsa.VerifyASN1(c.tok.Public().(*ecdsa.PublicKey), d[:], sig) {
				err = errors.New("signature does not verify")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
