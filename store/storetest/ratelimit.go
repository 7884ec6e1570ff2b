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
