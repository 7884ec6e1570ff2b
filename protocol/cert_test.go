package protocol_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func TestCertificate(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		b := e.register(t)
		c := e.issue(t, a, "", "cert.example")
		if c.certURL != e.base+"/acme/cert/"+c.serial {
			t.Errorf("certificate URL = %q", c.certURL)
		}
		r := e.post(t, a, c.certURL, nil)
		wantStatus(t, r, http.StatusOK)
		if ct := r.header.Get("Content-Type"); ct != "application/pem-certificate-chain" {
			t.Errorf("Content-Type = %q", ct)
		}
		if n := strings.Count(string(r.body), "-----BEGIN CERTIFICATE-----"); n != 2 {
			t.Errorf("chain has %d certificates, want 2", n)
		}
		if r.header.Get("Replay-Nonce") == "" {
			t.Error("certificate response has no Replay-Nonce")
		}
		wantProblem(t, e, e.post(t, b, c.certURL, nil), acme.ProblemUnauthorized, 403)
		wantProblem(t, e, e.post(t, a, c.certURL, map[string]any{}), acme.ProblemMalformed, 400)
		r = e.get(t, http.MethodGet, strings.TrimPrefix(c.certURL, e.base))
		wantProblem(t, e, r, acme.ProblemMalformed, http.StatusMethodNotAllowed)
		wantProblem(t, e, e.post(t, a, e.base+"/acme/cert/abcdef", nil), acme.ProblemMalformed, http.StatusNotFound)
	})
}

func revokePayload(der []byte, reason int) map[string]any {
	return map[string]any{"certificate": b64(der), "reason": reason}
}

func TestRevokeCert(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		url := e.base + "/acme/revoke-cert"
		a := e.register(t)
		b := e.register(t)

		t.Run("by the ordering account", func(t *testing.T) {
			c := e.issue(t, a, "", "rev1.example")
			for _, reason := range []int{2, 6, 7, 8, 10, 11, -1} {
				wantProblem(t, e, e.post(t, a, url, revokePayload(c.der, reason)), acme.ProblemBadRevocationReason, 400)
			}
			wantProblem(t, e, e.post(t, b, url, revokePayload(c.der, 0)), acme.ProblemUnauthorized, 403)
			r := e.post(t, a, url, revokePayload(c.der, 4))
			wantStatus(t, r, http.StatusOK)
			if r.header.Get("Replay-Nonce") == "" {
				t.Error("revoke response has no Replay-Nonce")
			}
			got, err := e.st.CertificateBySerial(context.Background(), c.serial)
			if err != nil || got.RevokedAt == nil || got.RevocationReason != 4 {
				t.Fatalf("certificate after revoke: %+v %v", got, err)
			}
			if n := e.jobCount(t, "crl_generate"); n < 1 {
				t.Errorf("no crl_generate job after a revocation")
			}
			wantProblem(t, e, e.post(t, a, url, revokePayload(c.der, 4)), acme.ProblemAlreadyRevoked, 400)
		})

		t.Run("by the certificate key", func(t *testing.T) {
			c := e.issue(t, a, "", "rev2.example")
			certKey := &account{key: c.key, alg: jose.ES256}
			stranger := newKey(t)
			wantProblem(t, e, e.post(t, stranger, url, revokePayload(c.der, 1)), acme.ProblemUnauthorized, 403)
			wantStatus(t, e.post(t, certKey, url, revokePayload(c.der, 1)), http.StatusOK)
		})

		t.Run("key compromise reported after another reason", func(t *testing.T) {
			// CA/B Forum BR §4.9.1.1, §6.1.1.3: the report is of the key,
			// revoked certificate or not. The reason becomes keyCompromise
			// (its time kept) and the key is blocked; before, the answer
			// was alreadyRevoked and the key stayed usable.
			c := e.issue(t, a, "", "rev6.example")
			wantStatus(t, e.post(t, a, url, revokePayload(c.der, 4)), http.StatusOK)
			first, err := e.st.CertificateBySerial(context.Background(), c.serial)
			if err != nil {
				t.Fatal(err)
			}
			certKey := &account{key: c.key, alg: jose.ES256}
			wantStatus(t, e.post(t, certKey, url, revokePayload(c.der, 1)), http.StatusOK)
			got, err := e.st.CertificateBySerial(context.Background(), c.serial)
			if err != nil || got.RevocationReason != 1 || got.RevokedAt == nil || !got.RevokedAt.Equal(*first.RevokedAt) {
				t.Fatalf("certificate after the key compromise report = %+v, %v; want reason 1, revoked at %v still", got, err, first.RevokedAt)
			}
			h, err := store.CertKeyHash(c.der)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.st.KeyBlockedBy(context.Background(), h); err != nil {
				t.Fatalf("the key after the key compromise report: %v, want blocked", err)
			}
			wantProblem(t, e, e.post(t, certKey, url, revokePayload(c.der, 1)), acme.ProblemAlreadyRevoked, 400)
			wantProblem(t, e, e.post(t, a, url, revokePayload(c.der, 0)), acme.ProblemAlreadyRevoked, 400)
		})

		t.Run("by an account holding authorizations for every name", func(t *testing.T) {
			c := e.issue(t, a, "", "rev3.example")
			o, _ := e.newOrder(t, b, dnsIDs("rev3.example"))
			e.validate(t, b, o)
			// It may not report the key compromised: that would block the
			// key and revoke its other certificates, other names'
			// included, on no proof of it. Nothing is revoked or blocked.
			wantProblem(t, e, e.post(t, b, url, revokePayload(c.der, 1)), acme.ProblemBadRevocationReason, 400)
			got, err := e.st.CertificateBySerial(context.Background(), c.serial)
			if err != nil || got.RevokedAt != nil {
				t.Fatalf("certificate after a refused keyCompromise revocation = %+v, %v; want not revoked", got, err)
			}
			if h, err := store.CertKeyHash(c.der); err != nil {
				t.Fatal(err)
			} else if _, err := e.st.KeyBlockedBy(context.Background(), h); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the key after a refused keyCompromise revocation: %v, want not blocked", err)
			}
			wantStatus(t, e.post(t, b, url, revokePayload(c.der, 0)), http.StatusOK)
		})

		t.Run("a certificate naming nothing, by another account", func(t *testing.T) {
			// A backend may return a certificate without subjectAltNames.
			// Holding authorizations for "every one" of no names is no
			// authority: only its account or its key may revoke it.
			c := e.issueAs(t, a, "", func(c *x509.Certificate) { c.DNSNames = nil }, "rev5.example")
			o, _ := e.newOrder(t, b, dnsIDs("rev5.example"))
			e.validate(t, b, o)
			wantProblem(t, e, e.post(t, b, url, revokePayload(c.der, 0)), acme.ProblemUnauthorized, 403)
			if got, err := e.st.CertificateBySerial(context.Background(), c.serial); err != nil || got.RevokedAt != nil {
				t.Fatalf("certificate after a refused revocation = %+v, %v; want not revoked", got, err)
			}
			wantStatus(t, e.post(t, a, url, revokePayload(c.der, 0)), http.StatusOK)
		})

		t.Run("not issued here", func(t *testing.T) {
			k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(4242), DNSNames: []string{"rev1.example"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
			der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
			wantProblem(t, e, e.post(t, a, url, revokePayload(der, 0)), acme.ProblemMalformed, 400)
			wantProblem(t, e, e.post(t, a, url, map[string]any{"certificate": b64([]byte("junk"))}), acme.ProblemMalformed, 400)
		})
	})
}

func TestRevokeCertRelay(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		url := e.base + "/acme/revoke-cert"
		a := e.register(t)

		// No worker: the request waits request_timeout − 1 s, then 503.
		c := e.issue(t, a, "relay", "relay1.example")
		start := time.Now()
		r := e.post(t, a, url, revokePayload(c.der, 5))
		t.Logf("%s: unconfirmed relay revocation answered after %v", e.kind, time.Since(start))
		wantProblem(t, e, r, acme.ProblemServerInternal, http.StatusServiceUnavailable)
		if r.header.Get("Retry-After") != "2" {
			t.Errorf("Retry-After = %q", r.header.Get("Retry-After"))
		}
		if n := e.jobCount(t, "signer_revoke"); n != 1 {
			t.Errorf("%d signer_revoke jobs, want 1", n)
		}

		// A stand-in worker confirms while the request waits: 200.
		c2 := e.issue(t, a, "relay", "relay2.example")
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(300 * time.Millisecond)
			if err := e.st.RevokeRecorded(context.Background(), c2.serial, 5, store.AuditEvent{Actor: "worker:test", Action: "revoke.backend", Subject: c2.serial}); err != nil {
				t.Errorf("stand-in worker: %v", err)
			}
		}()
		r = e.post(t, a, url, revokePayload(c2.der, 5))
		wg.Wait()
		wantStatus(t, r, http.StatusOK)

		// Its key reported compromised after: the backend keeps its reason
		// (ACME cannot change it), but the key is blocked here, and the
		// answer says both.
		r = e.post(t, a, url, revokePayload(c2.der, 1))
		if p := wantProblem(t, e, r, acme.ProblemAlreadyRevoked, 400); !strings.Contains(p.Detail, "key is now blocked") {
			t.Errorf("detail %q does not say the key was blocked", p.Detail)
		}
		if got, err := e.st.CertificateBySerial(context.Background(), c2.serial); err != nil || got.RevocationReason != 5 {
			t.Errorf("the relay's certificate after the report: %+v, %v; want reason 5, its backend's", got, err)
		}
		if h, err := store.CertKeyHash(c2.der); err != nil {
			t.Fatal(err)
		} else if _, err := e.st.KeyBlockedBy(context.Background(), h); err != nil {
			t.Errorf("the relay certificate's key after the report: %v, want blocked", err)
		}
	})
}

func TestCRL(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		wantStatus(t, e.get(t, http.MethodGet, "/crl/"+issuerID), http.StatusNotFound)
		now := time.Now().Truncate(time.Second)
		der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour)}, e.caCert, e.caKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.st.CRLStore(context.Background(), store.CRL{IssuerID: issuerID, Number: 1, ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour), DER: der}); err != nil {
			t.Fatal(err)
		}
		r := e.get(t, http.MethodGet, "/crl/"+issuerID)
		wantStatus(t, r, http.StatusOK)
		if ct := r.header.Get("Content-Type"); ct != "application/pkix-crl" {
			t.Errorf("Content-Type = %q", ct)
		}
		if string(r.body) != string(der) {
			t.Errorf("CRL body differs from the stored DER")
		}
		if _, err := x509.ParseRevocationList(r.body); err != nil {
			t.Errorf("served CRL does not parse: %v", err)
		}
		// Shard 3 is its own CRL at its own URL; shard 0 is only the
		// unsharded URL, and a shard is written one way.
		wantStatus(t, e.get(t, http.MethodGet, "/crl/"+issuerID+"/3"), http.StatusNotFound)
		der3, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour),
			RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: big.NewInt(0x3333), RevocationTime: now}}}, e.caCert, e.caKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.st.CRLStore(context.Background(), store.CRL{IssuerID: issuerID, Shard: 3, Number: 1, ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour), DER: der3}); err != nil {
			t.Fatal(err)
		}
		r = e.get(t, http.MethodGet, "/crl/"+issuerID+"/3")
		wantStatus(t, r, http.StatusOK)
		if string(r.body) != string(der3) {
			t.Errorf("shard 3's body differs from its stored DER")
		}
		if r := e.get(t, http.MethodGet, "/crl/"+issuerID); string(r.body) != string(der) {
			t.Errorf("the unsharded URL no longer serves shard 0's CRL")
		}
		for _, bad := range []string{"0", "03", "-3", "x", "99999999999999999999"} {
			wantStatus(t, e.get(t, http.MethodGet, "/crl/"+issuerID+"/"+bad), http.StatusNotFound)
		}
	})
}

// TestCertificateAlternates: an issuer's alternate chain is linked from
// the certificate URL (RFC 8555 §7.4.2: Link rel="alternate") and served
// at <url>/1 after the same leaf, linking back; no other number is one.
func TestCertificateAlternates(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		c := e.issue(t, a, "", "alt.example")
		r := e.post(t, a, c.certURL, nil)
		wantStatus(t, r, http.StatusOK)
		if links := r.header.Values("Link"); strings.Contains(strings.Join(links, ","), "alternate") {
			t.Fatalf("a certificate of an issuer without alternate chains links %v", links)
		}
		row, err := e.st.CertificateBySerial(context.Background(), c.serial)
		if err != nil {
			t.Fatal(err)
		}
		alt := "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"
		if err := e.st.IssuerRecordPut(context.Background(), store.IssuerRecord{ID: row.IssuerID, Name: "I", KeyType: "p256",
			NotAfter: time.Now().Add(time.Hour), Chains: [][]byte{[]byte(alt)}}, []byte{0x30, 0x00}, nil); err != nil {
			t.Fatal(err)
		}
		r = e.post(t, a, c.certURL, nil)
		wantStatus(t, r, http.StatusOK)
		if links := strings.Join(r.header.Values("Link"), ","); !strings.Contains(links, "<"+c.certURL+`/1>;rel="alternate"`) {
			t.Fatalf("Link = %s; want the alternate chain at %s/1", links, c.certURL)
		}
		r = e.post(t, a, c.certURL+"/1", nil)
		wantStatus(t, r, http.StatusOK)
		if !strings.HasSuffix(string(r.body), alt) || strings.Count(string(r.body), "-----BEGIN CERTIFICATE-----") != 2 {
			t.Fatalf("the alternate chain is not the leaf then the issuer's chain:\n%s", r.body)
		}
		if links := strings.Join(r.header.Values("Link"), ","); !strings.Contains(links, "<"+c.certURL+`>;rel="alternate"`) {
			t.Fatalf("the alternate's Link = %s; want the default chain", links)
		}
		for _, n := range []string{"0", "2", "99999999999999999999"} {
			wantProblem(t, e, e.post(t, a, c.certURL+"/"+n, nil), acme.ProblemMalformed, http.StatusNotFound)
		}
	})
}
