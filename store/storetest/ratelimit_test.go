package storetest

import (
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testRateCounts: the counts behind the rate limits come from the records
// on the database clock, per account and per registered domain, and say
// when the oldest event was so the frontend can say when a slot opens.
func testRateCounts(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a, b := newAccount(t, s), newAccount(t, s)
	before := dbNow(t, s)

	check := func(what string, rc store.RateCount, err error, want int) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rc.Count != want {
			t.Fatalf("%s = %d, want %d", what, rc.Count, want)
		}
		if rc.Now.Before(before) {
			t.Fatalf("%s: Now %s is before the test started (%s)", what, rc.Now, before)
		}
		if want > 0 && (rc.Oldest.IsZero() || (rc.Oldest.After(rc.Now.Add(time.Second)) && what != "pending authorizations of a")) {
			t.Fatalf("%s: Oldest = %s with Now %s", what, rc.Oldest, rc.Now)
		}
		if want == 0 && !rc.Oldest.IsZero() {
			t.Fatalf("%s: Oldest = %s with nothing counted", what, rc.Oldest)
		}
	}

	rc, err := s.RateOrders(ctx, a.ID, time.Hour)
	check("orders of a fresh account", rc, err, 0)
	o1 := readyOrder(t, s, a, "www.rl-example.com")
	newOrder(t, s, a, "mail.rl-example.com")
	newOrder(t, s, b, "other.example.net")
	rc, err = s.RateOrders(ctx, a.ID, time.Hour)
	check("orders of account a", rc, err, 2)
	rc, err = s.RateOrders(ctx, b.ID, time.Hour)
	check("orders of account b", rc, err, 1)

	// Pending authorizations: account a has mail.rl-example.com pending
	// (www was validated).
	rc, err = s.RatePendingAuthzs(ctx, a.ID)
	check("pending authorizations of a", rc, err, 1)
	if !rc.Oldest.After(rc.Now) {
		t.Fatalf("pending authorizations: Oldest (the soonest expiry) %s is not after now %s", rc.Oldest, rc.Now)
	}

	// Certificates per registered domain count the domain and names below
	// it, not a lookalike.
	mustIssue(t, s, o1, "fa01")
	o2 := readyOrder(t, s, b, "rl-example.com", "x.y.rl-example.com")
	mustIssue(t, s, o2, "fa02")
	o3 := readyOrder(t, s, b, "notrl-example.com")
	mustIssue(t, s, o3, "fa03")
	rc, err = s.RateCertificates(ctx, "rl-example.com", time.Hour)
	check("certificates of rl-example.com", rc, err, 2)
	rc, err = s.RateCertificates(ctx, "notrl-example.com", time.Hour)
	check("certificates of notrl-example.com", rc, err, 1)
	rc, err = s.RateCertificates(ctx, "r_-example.com", time.Hour)
	check("certificates of a LIKE pattern", rc, err, 0)

	// Failed validations per account and name.
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: "fail.rl-example.com"}
	for i := 0; i < 2; i++ {
		o := newOrder(t, s, a, id.Value)
		validate(t, s, o.AuthzIDs[0], acme.StatusInvalid)
	}
	rc, err = s.RateFailedValidations(ctx, a.ID, id, time.Hour)
	check("failed validations of a for fail.rl-example.com", rc, err, 2)
	rc, err = s.RateFailedValidations(ctx, b.ID, id, time.Hour)
	check("failed validations of b for fail.rl-example.com", rc, err, 0)
	rc, err = s.RateFailedValidations(ctx, a.ID, acme.Identifier{Type: acme.IdentifierDNS, Value: "www.rl-example.com"}, time.Hour)
	check("failed validations of a for a valid name", rc, err, 0)

	// A window that ends before the events counts none of them.
	time.Sleep(20 * time.Millisecond)
	rc, err = s.RateOrders(ctx, a.ID, 10*time.Millisecond)
	check("orders of a in a window that excludes them", rc, err, 0)
}

// issueNames stores a certificate with serial for names exactly as given
// (case, trailing dot, addresses), through an order of acct.
func issueNames(t *testing.T, s store.Store, acct *store.Account, serial string, names ...string) {
	t.Helper()
	ctx := ctxT(t)
	o := readyOrder(t, s, acct, "rc-"+serial+".example.net")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
	}
	now := dbNow(t, s)
	if err := s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: serial, IssuerID: "issuer-1", DER: []byte{0x30, 0x01}, ChainPEM: []byte("pem"),
		Names: names, NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour),
	}}); err != nil {
		t.Fatalf("OrderIssued %s: %v", serial, err)
	}
}

// testRateCertificatesByDomain: a certificate counts under each of its
// names and every parent domain of them down to two labels, compared
// without case, and the same on both dialects; a sibling that only ends
// with the same letters does not count, nor a bare top-level domain, and an
// IP address counts only as itself. Migration 0005's backfill of
// certificates issued before it gives the same counts as issuance does.
func testRateCertificatesByDomain(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	issueNames(t, s, a, "d001", "WWW.Example.COM")
	issueNames(t, s, a, "d002", "a.b.example.com", "b.example.com")
	issueNames(t, s, a, "d003", "notexample.com")
	issueNames(t, s, a, "d004", "192.0.2.1", "2001:db8::1")
	issueNames(t, s, a, "d005", "Host.Example.ORG.")
	issueNames(t, s, a, "d006", "*.wild.example.org")

	cases := []struct {
		domain string
		want   int
		why    string
	}{
		{"example.com", 2, "WWW.Example.COM (case) and a.b.example.com two levels below; not notexample.com"},
		{"EXAMPLE.com", 2, "the domain asked about is compared without case too"},
		{"www.example.com", 1, "a name counts under itself"},
		{"b.example.com", 1, "one certificate naming b.example.com and a name below it counts once"},
		{"notexample.com", 1, "the sibling counts under itself only"},
		{"xample.com", 0, "a suffix that is not at a label boundary"},
		{"com", 0, "a bare top-level domain holds nothing"},
		{"192.0.2.1", 1, "an IP address counts as itself"},
		{"0.2.1", 0, "an IP address has no parent domains"},
		{"2001:db8::1", 1, "an IPv6 address counts as itself"},
		{"example.org", 2, "a trailing dot is not part of the name; a wildcard counts under its base domain"},
		{"wild.example.org", 1, "a wildcard's base domain"},
		{"example.net", 0, "the order's names are not the certificate's"},
		{"r_-example.com", 0, "LIKE's wildcards are plain characters"},
	}
	check := func(when string) {
		t.Helper()
		for _, c := range cases {
			rc, err := s.RateCertificates(ctx, c.domain, time.Hour)
			if err != nil {
				t.Fatalf("%s: RateCertificates(%s): %v", when, c.domain, err)
			}
			if rc.Count != c.want {
				t.Errorf("%s: RateCertificates(%s) = %d, want %d: %s", when, c.domain, rc.Count, c.want, c.why)
			}
			if c.want > 0 && (rc.Oldest.IsZero() || rc.Oldest.After(rc.Now)) {
				t.Errorf("%s: RateCertificates(%s): Oldest %s with Now %s", when, c.domain, rc.Oldest, rc.Now)
			}
		}
	}
	check("issued")
	if rc, err := s.RateCertificates(ctx, "example.com", time.Microsecond); err != nil || rc.Count != 0 {
		t.Errorf("RateCertificates(example.com) in a window after the issuance = %+v, %v; want 0", rc, err)
	}

	// The certificates above as if issued before migration 0005: its
	// backfill, from certificate_names, must give the same counts.
	rows := x.Int(t, "SELECT count(*) FROM certificate_domains")
	x.Exec(t, "DROP TABLE certificate_domains")
	x.Exec(t, "DELETE FROM schema_migrations WHERE version = 5")
	if applied, err := x.Migrate(ctx); err != nil || len(applied) != 1 || applied[0] != 5 {
		t.Fatalf("re-applying migration 5: %v, %v", applied, err)
	}
	if got := x.Int(t, "SELECT count(*) FROM certificate_domains"); got != rows {
		t.Errorf("the backfill wrote %d rows; issuance wrote %d", got, rows)
	}
	check("backfilled")
}
