package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// keyFiles writes a certificate (self-signed: not one of ours, as a third
// party's report would bring), a CSR, the public key and the private key
// of a new key into dir, and returns their paths by kind and the key's
// hash.
func keyFiles(t *testing.T, dir string) (map[string]string, []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	crt, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "leaked"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}, &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "leaked"}}, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{"leaked.example"}}, k)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for kind, b := range map[string]*pem.Block{"cert": {Type: "CERTIFICATE", Bytes: crt}, "csr": {Type: "CERTIFICATE REQUEST", Bytes: csr},
		"public-key": {Type: "PUBLIC KEY", Bytes: spki}, "private": {Type: "PRIVATE KEY", Bytes: priv}} {
		files[kind] = filepath.Join(dir, kind+".pem")
		if err := os.WriteFile(files[kind], pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return files, store.KeyHash(spki)
}

// TestKeysBlock: `hallmark keys block` blocks a key given by a certificate
// that is not ours and revokes our unexpired certificates of that key with
// reason keyCompromise, CRL queued, audited as cli:<user>; another key's
// certificate is left alone. Blocking it again (by its CSR) is nothing to
// do (exit 4); `keys show` finds it by any file or its hash, and exits 3
// for a key not blocked; naming no key, two, or a private key is a usage
// error (exit 2). `keys unblock` removes the block, audited, and leaves
// what it revoked revoked.
func TestKeysBlock(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			ctx := context.Background()
			files, key := keyFiles(t, t.TempDir())
			other, _ := keyFiles(t, t.TempDir())
			a := c.account()
			for _, sr := range []string{"k1", "k2", "o1"} {
				o := c.processing(a, sr+".keys.example")
				now, _ := c.st().Now(ctx)
				h := key
				if sr == "o1" {
					h = store.KeyHash([]byte("another key"))
				}
				if err := c.st().OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
					Serial: sr, IssuerID: "issuer-1", Profile: "default", DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
					Names: []string{sr + ".keys.example"}, NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour), SPKIHash: h,
				}}); err != nil {
					t.Fatal(err)
				}
			}

			c.want(3, "keys", "show", "--public-key", files["public-key"])

			var out struct {
				SPKISHA256 string   `json:"spki_sha256"`
				Why        string   `json:"why"`
				Actor      string   `json:"actor"`
				Already    bool     `json:"already_blocked"`
				Revoked    []string `json:"revoked"`
				Queued     []string `json:"queued"`
			}
			c.jsonOf(&out, 0, "keys", "block", "--cert", files["cert"], "--source", "ticket 7", "--json")
			slices.Sort(out.Revoked)
			if out.SPKISHA256 != hex.EncodeToString(key) || out.Already || out.Actor != cliActor(t) || !strings.Contains(out.Why, "ticket 7") ||
				!slices.Equal(out.Revoked, []string{"k1", "k2"}) || len(out.Queued) != 0 {
				t.Errorf("keys block printed %+v; want key %x blocked by %s with ticket 7, k1 and k2 revoked", out, key, cliActor(t))
			}
			for _, sr := range []string{"k1", "k2"} {
				if got := c.cert(sr); got.RevokedAt == nil || got.RevocationReason != store.ReasonKeyCompromise {
					t.Errorf("certificate %s: revoked %v reason %d, want revoked with 1 (keyCompromise)", sr, got.RevokedAt, got.RevocationReason)
				}
			}
			if got := c.cert("o1"); got.RevokedAt != nil {
				t.Errorf("another key's certificate o1 was revoked")
			}
			if n := c.sqlInt("SELECT count(*) FROM river_job WHERE kind = 'crl_generate'"); n != 1 {
				t.Errorf("crl_generate jobs = %d, want 1 (issuer-1's)", n)
			}
			var audited []string
			for _, ev := range c.audit() {
				if ev.Actor == cliActor(t) && (ev.Action == store.ActionKeyBlock || ev.Action == store.ActionKeyRevoke) {
					audited = append(audited, ev.Action+" "+ev.Subject)
				}
			}
			slices.Sort(audited)
			if want := []string{store.ActionKeyBlock + " " + hex.EncodeToString(key), store.ActionKeyRevoke + " k1", store.ActionKeyRevoke + " k2"}; !slices.Equal(audited, want) {
				t.Errorf("audit events %v, want %v", audited, want)
			}

			r := c.want(4, "keys", "block", "--csr", files["csr"])
			if !strings.Contains(r.stderr, "blocked already") {
				t.Errorf("blocking again: stderr %q does not say it was blocked already", r.stderr)
			}
			for _, args := range [][]string{{"--public-key", files["public-key"]}, {"--cert", files["cert"]}, {hex.EncodeToString(key)}} {
				r := c.want(0, append([]string{"keys", "show"}, args...)...)
				if !strings.Contains(r.stdout, "ticket 7") {
					t.Errorf("keys show %v: %q does not say why", args, r.stdout)
				}
			}
			c.want(3, "keys", "show", "--cert", other["cert"])

			// The list: the blocked key, once, with why; a bad limit is
			// a usage error.
			var listed []struct {
				SPKISHA256 string `json:"spki_sha256"`
				Why        string `json:"why"`
			}
			c.jsonOf(&listed, 0, "keys", "list", "--json")
			if len(listed) != 1 || listed[0].SPKISHA256 != hex.EncodeToString(key) || !strings.Contains(listed[0].Why, "ticket 7") {
				t.Errorf("keys list --json = %+v; want key %x, once, with ticket 7", listed, key)
			}
			if r := c.want(0, "keys", "list"); !strings.Contains(r.stdout, hex.EncodeToString(key)) {
				t.Errorf("keys list does not show key %x:\n%s", key, r.stdout)
			}
			c.want(2, "keys", "list", "--limit", "-1")
			c.want(2, "keys", "block")
			c.want(2, "keys", "block", "--cert", files["cert"], "--csr", files["csr"])
			if r := c.want(2, "keys", "block", "--public-key", files["private"]); !strings.Contains(r.stderr, "private key") {
				t.Errorf("a private key: stderr %q does not say so", r.stderr)
			}

			// A block removed: the key is no longer blocked, its revoked
			// certificates stay so, audited; removing it again is exit 3.
			c.want(0, "keys", "unblock", "--reason", "wrong key typed", hex.EncodeToString(key))
			c.want(3, "keys", "show", "--cert", files["cert"])
			c.want(3, "keys", "unblock", "--cert", files["cert"])
			if got := c.cert("k1"); got.RevokedAt == nil {
				t.Errorf("unblocking the key un-revoked k1")
			}
			var unblocks []string
			for _, ev := range c.audit() {
				if ev.Action == store.ActionKeyUnblock {
					unblocks = append(unblocks, ev.Actor+" "+ev.Subject+" "+ev.Detail)
				}
			}
			if len(unblocks) != 1 || !strings.HasPrefix(unblocks[0], cliActor(t)+" "+hex.EncodeToString(key)) || !strings.Contains(unblocks[0], "wrong key typed") {
				t.Errorf("key.unblock audit events %q; want one by %s naming the key and why", unblocks, cliActor(t))
			}
		})
	}
}
