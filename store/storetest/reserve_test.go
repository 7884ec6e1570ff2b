package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testOrderLimitsReserved: OrderCreate takes its units of the account's
// limits in its own transaction. Eight newOrders for the last unit of
// orders per account, on two handles at once (two frontends), admit
// exactly one; the others write nothing and are *store.RateLimited with
// the count and when a unit frees up. The same holds for pending
// authorizations per account, where an order's born-valid authorization
// takes no unit, for newAuthz (AuthzCreate), and for the folded newOrder, which commits nothing over a
// limit (ErrNotClaimed: the ordinary path answers it).
func testOrderLimitsReserved(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	other := x.Open(t, nil)
	a := newAccount(t, s)
	newOrder(t, s, a, "r1.reserve.example")
	newOrder(t, s, a, "r2.reserve.example")
	limits := store.OrderLimits{Orders: 3, OrdersWindow: time.Hour}

	race := func(what string, limits store.OrderLimits, acct *store.Account) (admitted int, refused []*store.RateLimited) {
		t.Helper()
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 8; i++ {
			st := s
			if i%2 == 1 {
				st = other
			}
			o := orderSpec(t, s, acct, fmt.Sprintf("race%d.%s.reserve.example", i, what))
			o.Limits = limits
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := st.OrderCreate(ctx, store.SignedUse{}, o)
				var rl *store.RateLimited
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					admitted++
				case errors.As(err, &rl):
					refused = append(refused, rl)
				default:
					t.Errorf("%s: OrderCreate: %v, want success or *store.RateLimited", what, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		return admitted, refused
	}

	admitted, refused := race("orders", limits, a)
	if admitted != 1 || len(refused) != 7 {
		t.Fatalf("8 newOrders racing for the last of 3 orders: %d admitted, %d refused; want exactly 1 admitted", admitted, len(refused))
	}
	for _, rl := range refused {
		if rl.Limit != store.LimitOrders || rl.Max != 3 || rl.Count.Count != 3 || !rl.Opens.After(rl.Count.Now) || rl.Window != time.Hour {
			t.Errorf("a refused newOrder: %+v, want orders_per_account, 3 of 3, a unit opening within the hour", *rl)
		}
	}
	if n, err := s.RateOrders(ctx, a.ID, time.Hour); err != nil || n.Count != 3 {
		t.Errorf("the account has %d orders (%v), want 3", n.Count, err)
	}

	// Pending authorizations: b holds 2 pending; 3 is the limit.
	b := newAccount(t, s)
	newOrder(t, s, b, "p1.reserve.example", "p2.reserve.example")
	pending := store.OrderLimits{PendingAuthzs: 3}
	admitted, refused = race("pending", pending, b)
	if admitted != 1 || len(refused) != 7 {
		t.Fatalf("8 newOrders racing for the last pending authorization: %d admitted, %d refused; want exactly 1", admitted, len(refused))
	}
	for _, rl := range refused {
		if rl.Limit != store.LimitPendingAuthzs || rl.Count.Count != 3 || rl.Fresh != 1 || !rl.Opens.After(rl.Count.Now) {
			t.Errorf("a refused newOrder: %+v, want pending_authorizations_per_account, 3 held, 1 more asked", *rl)
		}
	}
	born := orderSpec(t, s, b, "born.reserve.example")
	born.Authzs[0].Status, born.Authzs[0].Challenges = acme.StatusValid, nil
	born.Limits = pending
	if _, err := s.OrderCreate(ctx, store.SignedUse{}, born); err != nil {
		t.Errorf("an order whose one authorization is born valid, at the pending limit: %v, want it written", err)
	}
	// newAuthz: a pending pre-authorization takes a unit too.
	pre := &store.Authorization{AccountID: b.ID, Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "pre.reserve.example"},
		Expires: dbNow(t, s).Add(time.Hour), Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}}}
	var rl *store.RateLimited
	if _, err := other.AuthzCreate(ctx, pre, pending); !errors.As(err, &rl) || rl.Limit != store.LimitPendingAuthzs || rl.Fresh != 1 {
		t.Errorf("a pre-authorization at the pending limit: %v, want *store.RateLimited", err)
	}
	if n, err := s.RatePendingAuthzs(ctx, b.ID); err != nil || n.Count != 3 {
		t.Errorf("the account holds %d pending authorizations (%v), want 3", n.Count, err)
	}
	pre.Status, pre.Challenges = acme.StatusValid, nil
	if _, err := other.AuthzCreate(ctx, pre, pending); err != nil {
		t.Errorf("a pre-authorization born valid, at the pending limit: %v, want it written", err)
	}

	f := newSignedOrders(t, s)
	over := f.spec(t, "fold-over.reserve.example")
	over.Limits = store.OrderLimits{Orders: 1, OrdersWindow: time.Hour} // f.a holds one order already
	before := f.orders(t)
	_, err := f.create(f.signed(rnd(16)), over, dbNow(t, s))
	wantErr(t, "a claimed newOrder over its orders limit", err, store.ErrNotClaimed)
	if n := f.orders(t) - before; n != 0 {
		t.Errorf("%d orders written by a claim over its limit", n)
	}
	within := f.spec(t, "fold-within.reserve.example")
	within.Limits = store.OrderLimits{Orders: 2, OrdersWindow: time.Hour, PendingAuthzs: 1}
	if _, err := f.create(f.signed(rnd(16)), within, dbNow(t, s)); err != nil {
		t.Errorf("a claimed newOrder within its limits: %v", err)
	}
}
