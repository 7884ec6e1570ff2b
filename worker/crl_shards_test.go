package worker_test

import (
	"context"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/store"
)

// TestCRLShardDropsExpiredEntry, on both stores: certificates of a
// short-lived profile are spread over two CRL shards, each named by its
// certificate's CRL distribution point and served by its own CRL whose
// issuingDistributionPoint matches. Once a revoked certificate has expired
// (its times moved back past the database's clock) and a CRL has listed
// it, the shard's next CRL leaves it out and keeps the others.
func TestCRLShardDropsExpiredEntry(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			// The rig's "default" profile is short-lived here.
			short := profile.Default()
			short.ValidityHours = 1
			// The names' http-01 targets accept and never answer, so the
			// worker's own validation cannot settle a challenge before the
			// test validates it (rig.ready).
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			silent := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) { <-req.Context().Done() }))
			silent.Listener = ln
			silent.Start()
			t.Cleanup(silent.Close)
			r := newRig(t, rigOpts{kind: kind, httpPort: ln.Addr().(*net.TCPAddr).Port, crlShards: 2, profiles: map[string]profile.Profile{"default": short}})
			t.Cleanup(silent.CloseClientConnections) // before the worker stops, which waits for them
			acct := r.account(t)
			byShard := map[int][]*store.Certificate{}
			// Three certificates: two of them share a shard.
			for i := range 3 {
				c := r.issueShort(t, acct, fmt.Sprintf("s%d.shards.worker.test", i))
				byShard[c.CRLShard] = append(byShard[c.CRLShard], c)
			}
			shard := 0
			if len(byShard[1]) >= 2 {
				shard = 1
			}
			a := byShard[shard][0]
			for s, certs := range byShard {
				for _, c := range certs {
					r.revokeWith(t, c.Serial, 4)
				}
				r.waitShardCRL(t, s, certs, nil)
			}

			// a has expired: its certificate's and its entry's not_after
			// moved two hours back, past the database's clock.
			back := `UPDATE %s SET not_after = not_after - interval '2 hours' WHERE serial = $1`
			if kind == "sqlite" {
				back = `UPDATE %s SET not_after = not_after - 7200000000 WHERE serial = $1`
			}
			for _, table := range []string{"certificates", "revocations"} {
				r.exec(t, fmt.Sprintf(back, table), a.Serial)
			}
			revs, err := r.st.Revocations(context.Background(), r.issuer.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, rv := range revs {
				if rv.Serial == a.Serial {
					t.Fatalf("expired and listed %s is still among the issuer's CRL entries", a.Serial)
				}
			}
			// The shard's next CRL, queued by a revocation on it, drops a
			// and keeps the others.
			var next *store.Certificate
			for i := 0; next == nil || next.CRLShard != shard; i++ {
				next = r.issueShort(t, acct, fmt.Sprintf("n%d.shards.worker.test", i))
			}
			r.revokeWith(t, next.Serial, 1)
			r.waitShardCRL(t, shard, append(byShard[shard][1:], next), []string{a.Serial})
		})
	}
}

// issueShort has the rig's worker sign a certificate of its (short-lived)
// "default" profile for name and returns it as stored.
func (r *rig) issueShort(t *testing.T, acct *store.Account, name string) *store.Certificate {
	t.Helper()
	c, err := r.st.CertificateBySerial(context.Background(), r.issue(t, acct, name))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := x509.ParseCertificate(c.DER)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.NotAfter.Sub(parsed.NotBefore) > 2*time.Hour {
		t.Fatalf("certificate valid %s, want the 1-hour profile's", parsed.NotAfter.Sub(parsed.NotBefore))
	}
	if want := shardURL(r, c.CRLShard); len(parsed.CRLDistributionPoints) != 1 || parsed.CRLDistributionPoints[0] != want {
		t.Fatalf("certificate on shard %d names CRL %v, want %s", c.CRLShard, parsed.CRLDistributionPoints, want)
	}
	return c
}

func shardURL(r *rig, shard int) string {
	u := r.cfg.CA.URLBase + "/crl/" + r.issuer.ID
	if shard > 0 {
		u += fmt.Sprintf("/%d", shard)
	}
	return u
}

func (r *rig) revokeWith(t *testing.T, serial string, reason int) {
	t.Helper()
	if _, err := r.st.Revoke(context.Background(), serial, reason, store.AuditEvent{Actor: "test", Action: "revoke", Subject: serial}); err != nil {
		t.Fatal(err)
	}
}

// waitShardCRL polls the shard's newest CRL until it lists exactly the
// serials of want, with their stored reasons, and none of gone; it checks
// the CRL's signature and that its issuingDistributionPoint is the
// shard's URL.
func (r *rig) waitShardCRL(t *testing.T, shard int, want []*store.Certificate, gone []string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := r.st.CRLShardLatest(context.Background(), r.issuer.ID, shard)
		if err != nil {
			last = err.Error()
			continue
		}
		crl, err := x509.ParseRevocationList(c.DER)
		if err != nil {
			t.Fatal(err)
		}
		if err := crl.CheckSignatureFrom(r.issuer.Cert); err != nil {
			t.Fatalf("shard %d's CRL signature: %v", shard, err)
		}
		if got := idpURL(t, crl); got != shardURL(r, shard) {
			t.Fatalf("shard %d's CRL has issuingDistributionPoint %q, want %q", shard, got, shardURL(r, shard))
		}
		listed := map[string]int{}
		for _, e := range crl.RevokedCertificateEntries {
			listed[e.SerialNumber.Text(16)] = e.ReasonCode
		}
		ok := len(listed) == len(want)
		for _, w := range want {
			cur, err := r.st.CertificateBySerial(context.Background(), w.Serial)
			if err != nil {
				t.Fatal(err)
			}
			reason, in := listed[strings.TrimLeft(w.Serial, "0")]
			ok = ok && in && reason == cur.RevocationReason
		}
		for _, g := range gone {
			_, in := listed[strings.TrimLeft(g, "0")]
			ok = ok && !in
		}
		if ok {
			return
		}
		last = fmt.Sprintf("CRL %d lists %v", c.Number, listed)
	}
	t.Fatalf("shard %d: no CRL listing exactly %d certificates and none of %v within 20s; last: %s", shard, len(want), gone, last)
}

// idpURL is the URI of the CRL's issuingDistributionPoint.
func idpURL(t *testing.T, crl *x509.RevocationList) string {
	t.Helper()
	for _, ext := range crl.Extensions {
		if !ext.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 28}) {
			continue
		}
		var idp struct {
			DP struct {
				FullName []asn1.RawValue `asn1:"optional,tag:0"`
			} `asn1:"optional,tag:0"`
		}
		if _, err := asn1.Unmarshal(ext.Value, &idp); err != nil || len(idp.DP.FullName) != 1 {
			t.Fatalf("issuingDistributionPoint does not parse: %v", err)
		}
		return string(idp.DP.FullName[0].Bytes)
	}
	return ""
}
