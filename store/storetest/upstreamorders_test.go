package storetest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testUpstreamOrders: the relay's journal of upstream orders keeps one per
// Hallmark order and backend. The first is recorded once: a second
// attempt's is ErrConflict and leaves the first. A replacement takes the
// place only of the order it names (ErrConflict otherwise), with its own
// account and a new placing time on the database clock. Backends and
// orders do not share rows; an order that does not exist is ErrNotFound.
func testUpstreamOrders(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	acct := newAccount(t, s)
	o, other := newOrder(t, s, acct, "up.example.com"), newOrder(t, s, acct, "other.example.com")
	first := store.UpstreamOrder{OrderID: o.ID, Backend: "corp", AccountURL: "https://up.example/acct/1", OrderURL: "https://up.example/order/1"}
	second := store.UpstreamOrder{OrderID: o.ID, Backend: "corp", AccountURL: "https://up.example/acct/1", OrderURL: "https://up.example/order/2"}
	byOther := store.UpstreamOrder{OrderID: o.ID, Backend: "corp", AccountURL: "https://up.example/acct/2", OrderURL: "https://up.example/order/3"}

	_, err := s.UpstreamOrderFor(ctx, o.ID, "corp")
	wantErr(t, "UpstreamOrderFor before any was recorded", err, store.ErrNotFound)
	var placed time.Time // the placing time the journal holds

	for _, step := range []struct {
		name     string
		rec      store.UpstreamOrder
		replaces string
		err      error
		want     store.UpstreamOrder // what the journal holds after
	}{
		{"the first", first, "", nil, first},
		{"a second first (another attempt's)", second, "", store.ErrConflict, first},
		{"a replacement of an order not recorded", second, "https://up.example/order/9", store.ErrConflict, first},
		{"a replacement by another account", byOther, first.OrderURL, nil, byOther},
		{"a replacement of the order replaced", second, first.OrderURL, store.ErrConflict, byOther},
	} {
		before := dbNow(t, s)
		err := s.UpstreamOrderRecord(ctx, step.rec, step.replaces)
		if !errors.Is(err, step.err) || (step.err == nil && err != nil) {
			t.Fatalf("%s: UpstreamOrderRecord = %v, want %v", step.name, err, step.err)
		}
		got, err := s.UpstreamOrderFor(ctx, o.ID, "corp")
		if err != nil {
			t.Fatalf("%s: UpstreamOrderFor: %v", step.name, err)
		}
		if got.OrderID != o.ID || got.Backend != "corp" || got.AccountURL != step.want.AccountURL || got.OrderURL != step.want.OrderURL {
			t.Errorf("%s: the journal holds %+v, want %+v", step.name, got, step.want)
		}
		switch after := dbNow(t, s); {
		case step.err != nil && !got.PlacedAt.Equal(placed):
			t.Errorf("%s: refused, yet the placing time moved from %v to %v", step.name, placed, got.PlacedAt)
		case step.err == nil && (got.PlacedAt.Before(before.Add(-time.Second)) || got.PlacedAt.After(after.Add(time.Second))):
			t.Errorf("%s: placed at %v, want the database's clock at the recording (%v)", step.name, got.PlacedAt, before)
		}
		placed = got.PlacedAt
	}

	_, err = s.UpstreamOrderFor(ctx, o.ID, "another")
	wantErr(t, "UpstreamOrderFor of another backend", err, store.ErrNotFound)
	_, err = s.UpstreamOrderFor(ctx, other.ID, "corp")
	wantErr(t, "UpstreamOrderFor of another order", err, store.ErrNotFound)
	for _, rec := range []store.UpstreamOrder{
		{OrderID: o.ID, Backend: "another", AccountURL: "https://other.example/acct/1", OrderURL: "https://other.example/order/1"},
		{OrderID: other.ID, Backend: "corp", AccountURL: first.AccountURL, OrderURL: "https://up.example/order/4"},
	} {
		if err := s.UpstreamOrderRecord(ctx, rec, ""); err != nil {
			t.Errorf("the first upstream order of backend %s for order %s: %v", rec.Backend, rec.OrderID, err)
		}
	}
	if got, err := s.UpstreamOrderFor(ctx, o.ID, "corp"); err != nil || got.OrderURL != byOther.OrderURL {
		t.Errorf("another backend's or order's row changed this one: %+v, %v", got, err)
	}
	err = s.UpstreamOrderRecord(ctx, store.UpstreamOrder{OrderID: "no-such-order", Backend: "corp", AccountURL: first.AccountURL, OrderURL: "https://up.example/order/5"}, "")
	wantErr(t, "UpstreamOrderRecord for an order that does not exist", err, store.ErrNotFound)

	upstreamOrdersListed(t, s, acct, o.ID, other.ID, byOther)
	upstreamReplacementAudited(t, s, o.ID, first, byOther)
}

// upstreamOrdersListed: the operator's view of an order lists each
// backend's row, by name.
func upstreamOrdersListed(t *testing.T, s store.Store, acct *store.Account, oID, otherID string, byOther store.UpstreamOrder) {
	ctx := ctxT(t)
	for _, c := range []struct {
		orderID string
		want    []string // backend order URL
	}{
		{oID, []string{"another https://other.example/order/1", "corp " + byOther.OrderURL}},
		{otherID, []string{"corp https://up.example/order/4"}},
		{newOrder(t, s, acct, "never-relayed.example.com").ID, nil},
	} {
		list, err := s.UpstreamOrdersOf(ctx, c.orderID)
		if err != nil {
			t.Fatalf("UpstreamOrdersOf(%s): %v", c.orderID, err)
		}
		var got []string
		for _, u := range list {
			if u.OrderID != c.orderID || u.AccountURL == "" || u.PlacedAt.IsZero() {
				t.Errorf("UpstreamOrdersOf(%s) row %+v lacks its order, account or placing time", c.orderID, u)
			}
			got = append(got, u.Backend+" "+u.OrderURL)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("UpstreamOrdersOf(%s) = %q, want %q", c.orderID, got, c.want)
		}
	}
}

// upstreamReplacementAudited: the one replacement that happened is in the
// audit log with the order and account it replaced (the refused ones are
// not).
func upstreamReplacementAudited(t *testing.T, s store.Store, oID string, first, byOther store.UpstreamOrder) {
	ctx := ctxT(t)
	events, _, err := s.AuditList(ctx, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var replaced []store.AuditEvent
	for _, ev := range events {
		if ev.Action == "upstream_order.replaced" && ev.Subject == oID {
			replaced = append(replaced, ev)
		}
	}
	if len(replaced) != 1 || !strings.Contains(replaced[0].Detail, first.OrderURL) || !strings.Contains(replaced[0].Detail, first.AccountURL) ||
		!strings.Contains(replaced[0].Detail, byOther.OrderURL) || replaced[0].Actor != "relay:corp" {
		t.Errorf("upstream_order.replaced events for order %s: %+v; want one, by relay:corp, naming %s (%s) and %s", oID, replaced, first.OrderURL, first.AccountURL, byOther.OrderURL)
	}
}

// testUpstreamOrdersConcurrent: attempts on two handles (two workers)
// recording the first upstream order of one Hallmark order at once: exactly
// one is recorded, every other is ErrConflict, and the journal holds the
// one recorded.
func testUpstreamOrdersConcurrent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	o := newOrder(t, s, newAccount(t, s), "race.example.com")
	handles := []store.Store{s, x.Open(t, nil)}
	const attempts = 8
	errs, urls := make([]error, attempts), make([]string, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		urls[i] = "https://up.example/order/" + rnd(6)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = handles[i%2].UpstreamOrderRecord(ctx, store.UpstreamOrder{OrderID: o.ID, Backend: "corp",
				AccountURL: "https://up.example/acct/1", OrderURL: urls[i]}, "")
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("attempts %d and %d both recorded their upstream order", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("attempt %d: %v, want store.ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no attempt recorded its upstream order")
	}
	if got, err := s.UpstreamOrderFor(ctx, o.ID, "corp"); err != nil || got.OrderURL != urls[won] {
		t.Errorf("UpstreamOrderFor after the race: %+v, %v; want the recorded %s", got, err, urls[won])
	}
}
