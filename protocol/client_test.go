package protocol_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// TestXCryptoACMEClient drives the frontend with golang.org/x/crypto/acme, an
// ACME client written independently of Hallmark: register, roll the key
// over, order, answer a challenge, finalize — up to "processing", since no
// worker runs here (the verdict is recorded directly, as a worker would).
func TestXCryptoACMEClient(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		cl := &xacme.Client{Key: key, DirectoryURL: e.base + "/directory", HTTPClient: e.hc}

		dir, err := cl.Discover(ctx)
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		if dir.Terms != e.cfg.Server.TermsOfService || len(dir.CAA) != 1 {
			t.Errorf("directory as x/crypto/acme sees it: %+v", dir)
		}
		acct, err := cl.Register(ctx, &xacme.Account{Contact: []string{"mailto:xacme@hallmark.example"}}, xacme.AcceptTOS)
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		if acct.Status != xacme.StatusValid || acct.URI == "" {
			t.Errorf("account = %+v", acct)
		}
		if _, err := cl.Register(ctx, &xacme.Account{}, xacme.AcceptTOS); !errors.Is(err, xacme.ErrAccountAlreadyExists) {
			t.Errorf("second Register: %v, want ErrAccountAlreadyExists", err)
		}

		newKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err := cl.AccountKeyRollover(ctx, newKey); err != nil {
			t.Fatalf("AccountKeyRollover: %v", err)
		}
		if got, err := cl.GetReg(ctx, ""); err != nil || got.URI != acct.URI {
			t.Fatalf("GetReg with the new key: %+v %v", got, err)
		}

		order, err := cl.AuthorizeOrder(ctx, xacme.DomainIDs("xacme.example"))
		if err != nil {
			t.Fatalf("AuthorizeOrder: %v", err)
		}
		if order.Status != xacme.StatusPending || len(order.AuthzURLs) != 1 {
			t.Fatalf("order = %+v", order)
		}
		az, err := cl.GetAuthorization(ctx, order.AuthzURLs[0])
		if err != nil {
			t.Fatalf("GetAuthorization: %v", err)
		}
		var chal *xacme.Challenge
		for _, c := range az.Challenges {
			if c.Type == "http-01" {
				chal = c
			}
		}
		if chal == nil {
			t.Fatalf("no http-01 challenge in %+v", az.Challenges)
		}
		start := time.Now()
		got, err := cl.Accept(ctx, chal)
		if err != nil {
			t.Fatalf("Accept: %v", err)
		}
		t.Logf("%s: Accept answered in %v", e.kind, time.Since(start))
		if got.Status != xacme.StatusProcessing {
			t.Errorf("challenge after Accept: %s", got.Status)
		}

		// The worker's verdict, recorded directly.
		if err := e.st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: lastSegment(chal.URI), Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.WaitAuthorization(ctx, order.AuthzURLs[0]); err != nil {
			t.Fatalf("WaitAuthorization: %v", err)
		}
		order, err = cl.WaitOrder(ctx, order.URI)
		if err != nil || order.Status != xacme.StatusReady {
			t.Fatalf("WaitOrder: %+v %v", order, err)
		}

		certKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{"xacme.example"}}, certKey)
		// No worker signs: CreateOrderCert finalizes, then polls until its
		// context ends.
		fctx, fcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		_, _, err = cl.CreateOrderCert(fctx, order.FinalizeURL, csr, true)
		fcancel()
		if err == nil {
			t.Fatal("CreateOrderCert returned a certificate with no worker running")
		}
		order, err = cl.GetOrder(ctx, order.URI)
		if err != nil || order.Status != xacme.StatusProcessing {
			t.Fatalf("order after finalize: %+v %v", order, err)
		}
	})
}
