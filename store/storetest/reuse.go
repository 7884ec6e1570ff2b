package storetest

import (
	"errors"
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
			o, err := s.OrderCreate(ctx, spec)
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
