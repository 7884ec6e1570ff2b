package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testOrderReuseRefusesUnusableAuthz: an order reuses an authorization
// only while it is valid and unexpired, checked in OrderCreate's own
// transaction. AuthzsReusable chose it earlier, outside it; one that was
// deactivated, failed or expired since is refused with
// store.ErrAuthzUnusable and nothing is written (the frontend drafts the
// order again), rather than an order left pending forever on an
// authorization that can never become valid again.
func testOrderReuseRefusesUnusableAuthz(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	cases := []struct {
		name  string
		spoil func(t *testing.T, authzID string)
	}{
		{"deactivated", func(t *testing.T, id string) {
			if _, err := s.AuthzDeactivate(ctx, id); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", func(t *testing.T, id string) {
			// Valid, but past its expiry on the database clock.
			x.Exec(t, "UPDATE authorizations SET expires_at = created_at WHERE id = '"+id+"'")
		}},
		{"invalid", nil}, // a pending authorization whose validation failed
		{"pending", nil}, // not yet validated
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := c.name + ".reuse.example.com"
			var id string
			switch c.name {
			case "invalid":
				id = newOrder(t, s, a, name).AuthzIDs[0]
				validate(t, s, id, acme.StatusInvalid)
			case "pending":
				id = newOrder(t, s, a, name).AuthzIDs[0]
			default:
				id = readyOrder(t, s, a, name).AuthzIDs[0]
				c.spoil(t, id)
			}
			before, err := s.RateOrders(ctx, a.ID, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			spec := orderSpec(t, s, a, name, "fresh."+name)
			spec.Authzs[0] = &store.Authorization{ID: id}
			o, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
			if !errors.Is(err, store.ErrAuthzUnusable) {
				t.Fatalf("OrderCreate reusing a %s authorization = %+v, %v; want store.ErrAuthzUnusable", c.name, o, err)
			}
			after, err := s.RateOrders(ctx, a.ID, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if after.Count != before.Count {
				t.Errorf("a refused order was written: %d orders before, %d after", before.Count, after.Count)
			}
		})
	}
}

// testExpirePendingUnusableAuthz: housekeeping invalidates a pending or
// ready order any of whose authorizations can no longer become valid
// (expired, deactivated, invalid, revoked), as one left by an order created
// before OrderCreate refused such reuse; an order whose authorizations are
// pending or valid is left alone.
func testExpirePendingUnusableAuthz(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	type tc struct {
		authz   string // the status written on one authorization of the order
		ready   bool   // the order is ready (its other authorizations valid)
		invalid bool   // ExpirePending must invalidate it
	}
	var cases []tc
	for _, st := range []string{"expired", "deactivated", "invalid", "revoked"} {
		cases = append(cases, tc{st, false, true}, tc{st, true, true})
	}
	cases = append(cases, tc{"pending", false, false}, tc{"valid", true, false})
	orders := make([]*store.Order, len(cases))
	for i, c := range cases {
		name := c.authz + map[bool]string{false: ".pending", true: ".ready"}[c.ready] + ".example.com"
		if c.ready {
			orders[i] = readyOrder(t, s, a, name, "second."+name)
		} else {
			orders[i] = newOrder(t, s, a, name, "second."+name)
		}
		// Written directly: no store method leaves an open order on such
		// an authorization any more.
		x.Exec(t, "UPDATE authorizations SET status = '"+c.authz+"' WHERE id = '"+orders[i].AuthzIDs[0]+"'")
	}
	if _, err := s.ExpirePending(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		o := order(t, s, orders[i].ID)
		want := orders[i].Status
		if c.invalid {
			want = acme.StatusInvalid
		}
		if o.Status != want {
			t.Errorf("%s order with a %s authorization is %s after ExpirePending, want %s", orders[i].Status, c.authz, o.Status, want)
		}
		if c.invalid && (o.Error == nil || o.Error.Type != acme.ProblemUnauthorized) {
			t.Errorf("%s order with a %s authorization: error %+v, want an unauthorized problem", orders[i].Status, c.authz, o.Error)
		}
	}
}

func testOrderReusesAuthz(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	first := readyOrder(t, s, a, "reuse.example.com")
	spec := orderSpec(t, s, a, "reuse.example.com")
	spec.Authzs = []*store.Authorization{{ID: first.AuthzIDs[0]}}
	second, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != acme.StatusReady || !slices.Equal(second.AuthzIDs, first.AuthzIDs) {
		t.Fatalf("order reusing a valid authorization = %+v, want ready with %v", second, first.AuthzIDs)
	}
	// Another account cannot borrow it.
	other := newAccount(t, s)
	spec.AccountID = other.ID
	_, err = s.OrderCreate(ctx, store.SignedUse{}, spec)
	wantErr(t, "reusing another account's authorization", err, store.ErrNotFound)
}

func testAuthzReusable(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "*.wild.example.com")
	az := authz(t, s, o.AuthzIDs[0])
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: "wild.example.com"}
	got, err := reusable(ctx, s, a.ID, id, true, az.Expires.Add(-time.Minute))
	if err != nil || got.ID != az.ID || len(got.Challenges) != 2 {
		t.Fatalf("AuthzReusable = %+v, %v", got, err)
	}
	for name, call := range map[string]func() error{
		"past minExpiry": func() error {
			_, err := reusable(ctx, s, a.ID, id, true, az.Expires.Add(time.Minute))
			return err
		},
		"not wildcard": func() error { _, err := reusable(ctx, s, a.ID, id, false, time.Time{}); return err },
		"other account": func() error {
			_, err := reusable(ctx, s, newAccount(t, s).ID, id, true, time.Time{})
			return err
		},
	} {
		wantErr(t, "AuthzReusable "+name, call(), store.ErrNotFound)
	}

	// Several keys in one read: each answered in its place, a key asked
	// twice answered twice, the authorization with its challenges, and
	// more keys than one statement takes (reusableChunk) answered all
	// the same.
	o2 := readyOrder(t, s, a, "plain.example.com")
	az2 := authz(t, s, o2.AuthzIDs[0])
	plain := acme.Identifier{Type: acme.IdentifierDNS, Value: "plain.example.com"}
	keys := []store.AuthzKey{
		{Identifier: plain},
		{Identifier: id},                 // the wildcard's base name, not a wildcard: none
		{Identifier: id, Wildcard: true}, // the wildcard
		{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "nothing.example.com"}},
		{Identifier: plain},
	}
	for len(keys) < 1205 {
		keys = append(keys, store.AuthzKey{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: fmt.Sprintf("n%d.example.com", len(keys))}})
	}
	keys = append(keys, store.AuthzKey{Identifier: plain})
	found, err := s.AuthzsReusable(ctx, a.ID, keys, nil, az.Expires.Add(-time.Minute))
	if err != nil || len(found) != len(keys) {
		t.Fatalf("AuthzsReusable = %d answers, %v; want %d", len(found), err, len(keys))
	}
	want := map[int]*store.Authorization{0: az2, 2: az, 4: az2, len(keys) - 1: az2}
	for i, got := range found {
		w := want[i]
		if w == nil && got != nil || w != nil && (got == nil || got.ID != w.ID || len(got.Challenges) != len(w.Challenges)) {
			t.Errorf("AuthzsReusable key %d (%+v) = %+v, want %+v", i, keys[i], got, w)
		}
	}
	if found, err := s.AuthzsReusable(ctx, a.ID, nil, nil, time.Time{}); err != nil || len(found) != 0 {
		t.Errorf("AuthzsReusable of no keys = %v, %v", found, err)
	}
}

// testAuthzReusableByMethod: with methods, AuthzsReusable counts only an
// authorization validated by a challenge of one of them (an order's
// profile reuses only what a method it offers validated), or one born
// valid with no challenge; among those it still chooses the longest-lived.
// nil methods count any.
func testAuthzReusableByMethod(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	byHTTP := authz(t, s, readyOrder(t, s, a, "method.example.com").AuthzIDs[0]) // validate answers the first challenge, http-01
	// A later one for the same name, validated by dns-01: it lives longer.
	later := newOrder(t, s, a, "method.example.com")
	byDNS := authz(t, s, later.AuthzIDs[0])
	c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, byDNS.Challenges[1].ID)
	if err != nil || !claimed || c.Type != acme.ChallengeDNS01 {
		t.Fatalf("claiming the dns-01 challenge: %+v claimed=%v %v", c, claimed, err)
	}
	if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: c.ID, Status: acme.StatusValid}); err != nil {
		t.Fatal(err)
	}
	byDNS = authz(t, s, byDNS.ID)
	if !byDNS.Expires.After(byHTTP.Expires) {
		t.Fatalf("the dns-01 authorization expires %v, not after the http-01 one's %v", byDNS.Expires, byHTTP.Expires)
	}
	// Born valid: no challenge (a binding pre-validated it).
	spec := orderSpec(t, s, a, "born.example.com")
	spec.Authzs[0].Status, spec.Authzs[0].Challenges = acme.StatusValid, nil
	o, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	born := authz(t, s, o.AuthzIDs[0])
	// Pending, whatever the method: never reused.
	pending := authz(t, s, newOrder(t, s, a, "pending.example.com").AuthzIDs[0])

	keys := []store.AuthzKey{{Identifier: byHTTP.Identifier}, {Identifier: born.Identifier}, {Identifier: pending.Identifier}}
	for _, tc := range []struct {
		name    string
		methods []acme.ChallengeType
		want    []*store.Authorization
	}{
		{"any method", nil, []*store.Authorization{byDNS, born, nil}},
		{"http-01", []acme.ChallengeType{acme.ChallengeHTTP01}, []*store.Authorization{byHTTP, born, nil}},
		{"dns-01", []acme.ChallengeType{acme.ChallengeDNS01}, []*store.Authorization{byDNS, born, nil}},
		{"http-01 or dns-01", []acme.ChallengeType{acme.ChallengeHTTP01, acme.ChallengeDNS01}, []*store.Authorization{byDNS, born, nil}},
		{"tls-alpn-01", []acme.ChallengeType{acme.ChallengeTLSALPN01}, []*store.Authorization{nil, born, nil}},
		{"no method", []acme.ChallengeType{}, []*store.Authorization{nil, born, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := s.AuthzsReusable(ctx, a.ID, keys, tc.methods, time.Time{})
			if err != nil || len(found) != len(keys) {
				t.Fatalf("AuthzsReusable = %d answers, %v; want %d", len(found), err, len(keys))
			}
			for i, got := range found {
				w := tc.want[i]
				if w == nil && got != nil || w != nil && (got == nil || got.ID != w.ID || len(got.Challenges) != len(w.Challenges)) {
					t.Errorf("key %s: got %+v, want %+v", keys[i].Identifier.Value, got, w)
				}
			}
		})
	}
}
