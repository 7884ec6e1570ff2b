package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/harness"
)

// revokedCert issues serial to a new account (issuer "issuer-1") and
// revokes it; it returns the revoked certificate.
func revokedCert(t *testing.T, st store.Store, serial string) *store.Certificate {
	t.Helper()
	issuedCert(t, st, serial, serial+".example.com", "issuer-1", "default")
	rev, err := st.Revoke(context.Background(), serial, 1, store.AuditEvent{Actor: "test", Action: "revoke", Subject: serial})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// issuedCert validates and finalizes an order for name by a new account
// and stores its certificate serial as issuer (a backend's issuer id) and
// profile record it.
func issuedCert(t *testing.T, st store.Store, serial, name, issuer, profile string) {
	t.Helper()
	ctx := context.Background()
	o := pendingOrder(t, st, serial, name)
	if err := st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: claim(t, st, o), Status: acme.StatusValid}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !ok {
		t.Fatalf("OrderFinalizeBegin: %v %v", ok, err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{Serial: serial, IssuerID: issuer, Profile: profile,
		DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"), Names: []string{name},
		NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
}

var issuerRowRE = regexp.MustCompile(`(?s)<code>issuer-1</code>.*?</tr>`)

// TestCRLPagesCompareSerials: the CRLs page and the overview call an
// issuer's CRL fresh only when it lists every revocation's serial. A CRL
// signed after a revocation that does not list it (the revocation committed
// after the worker read the list) is not fresh: comparing times said it was.
func TestCRLPagesCompareSerials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		lists  []string
		der    []byte
		status string // the row's status cell
		count  string // its "not yet listed" cell
		stale  bool   // the row is marked bad, as `hallmark crl status` exits 5
	}{
		{name: "a CRL after the revocation that does not list it", status: "1 revocation(s) not listed yet: a worker mounting this issuer signs the CRL that lists them", count: "1", stale: true},
		{name: "a CRL that lists it", lists: []string{"c01:1"}, status: "fresh", count: "0"},
		{name: "a CRL that lists it with another reason", lists: []string{"c01:4"}, status: "1 revocation(s) not listed yet: a worker mounting this issuer signs the CRL that lists them", count: "1", stale: true},
		{name: "a CRL that does not parse", der: []byte{0x30}, status: "the newest CRL does not parse", count: "1", stale: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, st := panel(t)
			ctx := context.Background()
			rev := revokedCert(t, st, "0c01")
			this := rev.RevokedAt.Add(time.Second)
			der := tc.der
			if der == nil {
				der = harness.SignedCRL(t, this, tc.lists...)
			}
			if err := st.CRLStore(ctx, store.CRL{IssuerID: "issuer-1", Number: 1, ThisUpdate: this, NextUpdate: this.Add(24 * time.Hour), DER: der}); err != nil {
				t.Fatal(err)
			}
			c := &http.Client{CheckRedirect: noRedirect}
			for _, path := range []string{"/crls", "/"} {
				resp, page := do(t, c, "GET", srv.URL+path, "Bearer "+token, nil)
				row := issuerRowRE.FindString(page)
				if resp.StatusCode != http.StatusOK || row == "" {
					t.Fatalf("GET %s: %d, no row for issuer-1\n%s", path, resp.StatusCode, page)
				}
				if !strings.Contains(row, "<td>"+tc.status+"</td>") || !strings.Contains(row, `<td class="n">`+tc.count+"</td><td>") {
					t.Errorf("GET %s: issuer-1's row says\n%s\nwant status %q and %s not yet listed", path, row, tc.status, tc.count)
				}
				if path == "/crls" && strings.Contains(page, `<tr class="bad"><td><code>issuer-1</code>`) != tc.stale {
					t.Errorf("GET %s: issuer-1's row marked stale is %v, want %v\n%s", path, !tc.stale, tc.stale, row)
				}
			}
		})
	}
}

// TestReportKeyCompromiseOfRevoked: a certificate revoked for another
// reason offers the report of its key compromised, through the same
// revocation path; once reported, neither form is offered.
func TestReportKeyCompromiseOfRevoked(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	issuedCert(t, st, "0c07", "0c07.example.com", "issuer-1", "default")
	first, err := st.Revoke(ctx, "0c07", 4, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "0c07"})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, page := do(t, c, "GET", srv.URL+"/certs/0c07", bearer, nil)
	if !strings.Contains(string(page), `id="key-compromise-form"`) || strings.Contains(string(page), `id="revoke-form"`) {
		t.Fatalf("the page of a certificate revoked as superseded lacks the key compromise form, or offers to revoke it again:\n%s", page)
	}
	resp, _ := do(t, c, "POST", srv.URL+"/certs/0c07/revoke", bearer, url.Values{"csrf": {csrfOf(t, page)}, "reason": {"1"}})
	if n := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.HasPrefix(n, "Key compromise recorded") {
		t.Errorf("the notice after reporting the key: %q", n)
	}
	got, err := st.CertificateBySerial(ctx, "0c07")
	if err != nil || got.RevocationReason != 1 || !got.RevokedAt.Equal(*first.RevokedAt) {
		t.Fatalf("after the report: %+v, %v; want reason 1 at %v", got, err, first.RevokedAt)
	}
	_, page = do(t, c, "GET", srv.URL+"/certs/0c07", bearer, nil)
	if strings.Contains(string(page), `id="key-compromise-form"`) || !strings.Contains(string(page), "keyCompromise") {
		t.Fatalf("the page after the report still offers it, or does not show reason keyCompromise:\n%s", page)
	}
}

// TestCRLPagesShowShards: the CRLs page has a row per CRL shard with its
// number and size; the overview sums an issuer's shards into one row,
// stale when any shard is and saying which.
func TestCRLPagesShowShards(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	rev := revokedCert(t, st, "0c01") // shard 0
	this := rev.RevokedAt.Add(time.Second)
	if err := st.CRLStore(ctx, store.CRL{IssuerID: "issuer-1", Number: 1, ThisUpdate: this, NextUpdate: this.Add(24 * time.Hour), DER: harness.SignedCRL(t, this, "c01:1")}); err != nil {
		t.Fatal(err)
	}
	// Shard 3's CRL is past its nextUpdate.
	der3 := harness.SignedCRL(t, this.Add(-48*time.Hour))
	if err := st.CRLStore(ctx, store.CRL{IssuerID: "issuer-1", Shard: 3, Number: 77, ThisUpdate: this.Add(-48 * time.Hour), NextUpdate: this.Add(-24 * time.Hour), DER: der3}); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: noRedirect}
	_, page := do(t, c, "GET", srv.URL+"/crls", "Bearer "+token, nil)
	rows := regexp.MustCompile(`(?s)<tr class="(bad)?"><td><code>issuer-1</code>.*?</tr>`).FindAllString(page, -1)
	if len(rows) != 2 {
		t.Fatalf("/crls has %d rows for issuer-1, want 2 (shards 0 and 3):\n%s", len(rows), page)
	}
	if !strings.Contains(rows[0], `<td class="n shard">0</td>`) || !strings.Contains(rows[0], "<td>fresh</td>") {
		t.Errorf("shard 0's row:\n%s", rows[0])
	}
	size := fmt.Sprintf(`<td class="n size">%d B</td>`, len(der3))
	if !strings.Contains(rows[1], `<td class="n shard">3</td>`) || !strings.Contains(rows[1], `<td class="n">77</td>`) || !strings.Contains(rows[1], size) ||
		!strings.HasPrefix(rows[1], `<tr class="bad">`) {
		t.Errorf("shard 3's row, want number 77, %s, stale:\n%s", size, rows[1])
	}
	_, page = do(t, c, "GET", srv.URL+"/", "Bearer "+token, nil)
	row := issuerRowRE.FindString(page)
	if !strings.Contains(row, "2 shards") || !strings.Contains(row, "shard 3: past nextUpdate") {
		t.Errorf("the overview's row for issuer-1, want 2 shards, stale by shard 3:\n%s", row)
	}
}
