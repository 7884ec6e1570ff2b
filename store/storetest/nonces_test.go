package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

func testNonceKey(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	k1, err := s.NonceKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) < 32 {
		t.Fatalf("nonce key has %d bytes, want ≥ 32", len(k1))
	}
	k2, err := x.Open(t, nil).NonceKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(k1) != string(k2) {
		t.Fatal("two handles on one database got different nonce keys; replicas would reject each other's nonces")
	}
}

// consumeOne consumes one nonce of the current epoch, naming no account,
// and reports whether it was fresh.
func consumeOne(ctx context.Context, s store.Store, nonce string, expires time.Time) (bool, error) {
	epoch, err := s.NonceEpoch(ctx)
	if err != nil {
		return false, err
	}
	got, err := s.NonceConsume(ctx, []store.NonceUse{{Nonce: nonce, Expires: expires, Epoch: epoch}})
	if err != nil {
		return false, err
	}
	if len(got) != 1 {
		return false, fmt.Errorf("NonceConsume answered %d uses for 1", len(got))
	}
	return got[0].Fresh, nil
}

// testNonceConsumedOnce: RFC 8555 §6.5, a nonce is accepted once, even when
// 16 requests race with it through separate handles (with ProcessNonces,
// only the handle whose epoch it was minted in accepts it, once).
func testNonceConsumedOnce(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	stores := handles(t, s, x, 4)
	expires := dbNow(t, s).Add(time.Hour)
	epoch, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var fresh bool
			got, err := stores[i%len(stores)].NonceConsume(ctx, []store.NonceUse{{Nonce: "nonce-1", Expires: expires, Epoch: epoch}})
			if err == nil && len(got) == 1 {
				fresh = got[0].Fresh
			} else if err == nil {
				err = fmt.Errorf("%d answers for 1 use", len(got))
			}
			switch {
			case err != nil:
				t.Errorf("NonceConsume: %v", err)
			case fresh:
				ok.Add(1)
			default:
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || refused.Load() != 15 {
		t.Fatalf("nonce accepted %d times and refused %d times, want 1 and 15", ok.Load(), refused.Load())
	}
}

// testNonceBatch: one batch answers each use in order — fresh or replayed
// (before, or earlier in the same batch) — with the account its kid names,
// or none.
func testNonceBatch(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	expires := dbNow(t, s).Add(time.Hour)
	if fresh, err := consumeOne(ctx, s, "used-before", expires); err != nil || !fresh {
		t.Fatalf("first use of a nonce = %v, %v; want fresh", fresh, err)
	}
	e, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uses := []store.NonceUse{
		{Nonce: "n1", Expires: expires, AccountID: a.ID, Epoch: e},
		{Nonce: "used-before", Expires: expires, AccountID: a.ID, Epoch: e},
		{Nonce: "n2", Expires: expires, Epoch: e},
		{Nonce: "n1", Expires: expires, AccountID: a.ID, Epoch: e},
		{Nonce: "n3", Expires: expires, AccountID: "no-such-account", Epoch: e},
		{Nonce: "n4", Expires: expires, AccountID: a.ID, Epoch: e + 1}, // another epoch's
	}
	got, err := s.NonceConsume(ctx, uses)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		fresh bool
		acct  string
	}{{true, a.ID}, {false, a.ID}, {true, ""}, {false, ""}, {true, ""}, {false, a.ID}}
	if len(got) != len(want) {
		t.Fatalf("NonceConsume answered %d uses, want %d", len(got), len(want))
	}
	for i, w := range want {
		acct := ""
		if got[i].Account != nil {
			acct = got[i].Account.ID
		}
		// A replay's account does not matter (it is refused first), so it
		// is only checked for fresh uses.
		if got[i].Fresh != w.fresh || (w.fresh && acct != w.acct) {
			t.Errorf("use %d (%s): fresh %v account %q, want fresh %v account %q", i, uses[i].Nonce, got[i].Fresh, acct, w.fresh, w.acct)
		}
	}
	if acct := got[0].Account; acct != nil && (string(acct.KeyJWK) != string(a.KeyJWK) || acct.Thumbprint != a.Thumbprint ||
		acct.Status != a.Status || !acct.CreatedAt.Equal(a.CreatedAt) || acct.TermsAgreed != a.TermsAgreed) {
		t.Errorf("account read with a nonce = %+v, want %+v", acct, a)
	}
	now := dbNow(t, s)
	for i, u := range got {
		if d := now.Sub(u.Now); d < 0 || d > time.Minute {
			t.Errorf("use %d: Now = %s, want the database clock (%s)", i, u.Now, now)
		}
		if u.Epoch != e {
			t.Errorf("use %d: Epoch = %d, want the current epoch %d", i, u.Epoch, e)
		}
	}
	if fresh, err := consumeOne(ctx, s, "n4", expires); err != nil || !fresh {
		t.Errorf("n4, refused under another epoch, = fresh %v, %v under the current one; want fresh (it was not consumed)", fresh, err)
	}
	if got, err := s.NonceConsume(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("empty batch = %v, %v", got, err)
	}
	nonceBatchOfOne(t, s, a, e, expires, now)
}

// nonceBatchOfOne: a batch of one (PostgreSQL answers it with a statement
// of its own) means the same, use by use; now is the database clock.
func nonceBatchOfOne(t *testing.T, s store.Store, a *store.Account, e int64, expires, now time.Time) {
	ctx := ctxT(t)
	for _, tc := range []struct {
		use   store.NonceUse
		fresh bool
		acct  string
	}{
		{store.NonceUse{Nonce: "one-1", Expires: expires, AccountID: a.ID, Epoch: e}, true, a.ID},
		{store.NonceUse{Nonce: "one-1", Expires: expires, AccountID: a.ID, Epoch: e}, false, ""},
		{store.NonceUse{Nonce: "one-2", Expires: expires, Epoch: e}, true, ""},
		{store.NonceUse{Nonce: "one-3", Expires: expires, AccountID: "no-such-account", Epoch: e}, true, ""},
		{store.NonceUse{Nonce: "one-4", Expires: expires, AccountID: a.ID, Epoch: e + 1}, false, ""},
	} {
		got, err := s.NonceConsume(ctx, []store.NonceUse{tc.use})
		if err != nil || len(got) != 1 {
			t.Fatalf("NonceConsume(%s alone) = %v, %v", tc.use.Nonce, got, err)
		}
		acct := ""
		if got[0].Account != nil {
			acct = got[0].Account.ID
		}
		if got[0].Fresh != tc.fresh || (tc.fresh && acct != tc.acct) || got[0].Epoch != e {
			t.Errorf("%s alone: fresh %v account %q epoch %d, want fresh %v account %q epoch %d", tc.use.Nonce, got[0].Fresh, acct, got[0].Epoch, tc.fresh, tc.acct, e)
		}
		if d := now.Sub(got[0].Now); d < -time.Minute || d > time.Minute {
			t.Errorf("%s alone: Now = %s, want the database clock (%s)", tc.use.Nonce, got[0].Now, now)
		}
		if a := got[0].Account; tc.fresh && tc.acct != "" && a != nil && (string(a.KeyJWK) == "" || a.Status == "" || a.CreatedAt.IsZero()) {
			t.Errorf("%s alone: account read incompletely: %+v", tc.use.Nonce, a)
		}
	}
}

// testNonceMeanwhile: the store runs work of the caller's while a
// consumption is in flight (store.NoncesMeanwhile, which the frontend uses
// to check a signature meanwhile): once, before the call returns (and, run
// with -race, on the caller's goroutine: the counter is not synchronized),
// and the answers are NonceConsume's — alone or in a batch, with a lookup
// or without.
func testNonceMeanwhile(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	ms, ok := s.(store.NoncesMeanwhile)
	if !ok {
		t.Fatalf("%T does not implement store.NoncesMeanwhile", s)
	}
	a := newAccount(t, s)
	expires := dbNow(t, s).Add(time.Hour)
	e, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	missing := store.Lookup{Kind: store.LookupOrder, ID: "no-such-order"}
	type want struct {
		fresh bool
		acct  string
	}
	for _, tc := range []struct {
		name string
		uses []store.NonceUse
		want []want
	}{
		{"alone", []store.NonceUse{{Nonce: "mw-1", Expires: expires, AccountID: a.ID, Epoch: e}}, []want{{true, a.ID}}},
		{"replayed", []store.NonceUse{{Nonce: "mw-1", Expires: expires, AccountID: a.ID, Epoch: e}}, []want{{false, ""}}},
		{"another epoch's", []store.NonceUse{{Nonce: "mw-2", Expires: expires, Epoch: e + 1}}, []want{{false, ""}}},
		{"with a lookup", []store.NonceUse{{Nonce: "mw-3", Expires: expires, AccountID: a.ID, Epoch: e, Lookup: missing}}, []want{{true, a.ID}}},
		{"batch", []store.NonceUse{
			{Nonce: "mw-4", Expires: expires, AccountID: a.ID, Epoch: e, Lookup: missing},
			{Nonce: "mw-4", Expires: expires, Epoch: e},
			{Nonce: "mw-5", Expires: expires, Epoch: e},
		}, []want{{true, a.ID}, {false, ""}, {true, ""}}},
	} {
		ran := 0
		got, err := ms.NonceConsumeMeanwhile(ctx, tc.uses, func() { ran++ })
		if err != nil || len(got) != len(tc.want) {
			t.Fatalf("%s: NonceConsumeMeanwhile = %v, %v; want %d answers", tc.name, got, err, len(tc.want))
		}
		if ran != 1 {
			t.Errorf("%s: meanwhile ran %d times, want once", tc.name, ran)
		}
		for i, w := range tc.want {
			acct := ""
			if got[i].Account != nil {
				acct = got[i].Account.ID
			}
			if got[i].Fresh != w.fresh || (w.fresh && acct != w.acct) || got[i].Epoch != e || got[i].Now.IsZero() {
				t.Errorf("%s, use %d: fresh %v account %q epoch %d now %s; want fresh %v account %q epoch %d and the clock",
					tc.name, i, got[i].Fresh, acct, got[i].Epoch, got[i].Now, w.fresh, w.acct, e)
			}
			if tc.uses[i].Lookup.Kind == store.LookupOrder && got[i].Fresh && !errors.Is(got[i].FoundErr, store.ErrNotFound) {
				t.Errorf("%s, use %d: lookup of a missing order = %v, %v; want store.ErrNotFound", tc.name, i, got[i].Found, got[i].FoundErr)
			}
		}
	}
}

// testNonceEpochReset: what a PostgreSQL crash does to the unlogged nonce
// tables (empties both), done here by hand. A nonce consumed before the
// reset must not be accepted after it, so nothing is consumed until a new
// epoch starts, and nonces of the old one never are again.
func testNonceEpochReset(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	old, err := s.NonceEpoch(ctx)
	if err != nil || old == 0 {
		t.Fatalf("NonceEpoch = %d, %v; want a non-zero epoch", old, err)
	}
	if x.ProcessNonces {
		testNonceEpochPerHandle(t, s, x, old)
		return
	}
	if again, err := x.Open(t, nil).NonceEpoch(ctx); err != nil || again != old {
		t.Fatalf("a second handle's NonceEpoch = %d, %v; want the same epoch %d", again, err, old)
	}
	expires := dbNow(t, s).Add(time.Hour)
	consume := func(nonce string, epoch int64) store.NonceUsed {
		t.Helper()
		got, err := s.NonceConsume(ctx, []store.NonceUse{{Nonce: nonce, Expires: expires, Epoch: epoch}})
		if err != nil || len(got) != 1 {
			t.Fatalf("NonceConsume(%s) = %v, %v", nonce, got, err)
		}
		return got[0]
	}
	if u := consume("before", old); !u.Fresh {
		t.Fatal("a fresh nonce of the current epoch was refused")
	}
	x.Exec(t, `DELETE FROM nonces_consumed`)
	x.Exec(t, `DELETE FROM nonce_epoch`)
	if u := consume("before", old); u.Fresh || u.Epoch != 0 {
		t.Fatalf("after the reset, the consumed nonce = fresh %v epoch %d; want refused and epoch 0 (none)", u.Fresh, u.Epoch)
	}
	next, err := s.NonceEpoch(ctx)
	if err != nil || next == 0 || next == old {
		t.Fatalf("NonceEpoch after the reset = %d, %v; want a new non-zero epoch (old %d)", next, err, old)
	}
	if u := consume("before", old); u.Fresh || u.Epoch != next {
		t.Fatalf("under the new epoch, the old nonce = fresh %v epoch %d; want refused, epoch %d", u.Fresh, u.Epoch, next)
	}
	if u := consume("after", next); !u.Fresh {
		t.Fatal("a nonce of the new epoch was refused")
	}
}

// testNonceEpochPerHandle is testNonceEpochReset where the consumed set
// lives in each handle (ProcessNonces): another handle, as another process
// or this one restarted, has an epoch of its own and refuses this one's
// nonces, reporting its epoch so the caller mints under it; this handle
// still accepts them, once.
func testNonceEpochPerHandle(t *testing.T, s store.Store, x Extras, mine int64) {
	ctx := ctxT(t)
	other := x.Open(t, nil)
	theirs, err := other.NonceEpoch(ctx)
	if err != nil || theirs == 0 || theirs == mine {
		t.Fatalf("another handle's NonceEpoch = %d, %v; want a non-zero epoch of its own (this one's is %d)", theirs, err, mine)
	}
	expires := dbNow(t, s).Add(time.Hour)
	consume := func(at store.Store, nonce string, epoch int64) store.NonceUsed {
		t.Helper()
		got, err := at.NonceConsume(ctx, []store.NonceUse{{Nonce: nonce, Expires: expires, Epoch: epoch}})
		if err != nil || len(got) != 1 {
			t.Fatalf("NonceConsume(%s) = %v, %v", nonce, got, err)
		}
		return got[0]
	}
	if u := consume(other, "minted-here", mine); u.Fresh || u.Epoch != theirs {
		t.Fatalf("another handle consuming this one's nonce = fresh %v epoch %d; want refused, epoch %d", u.Fresh, u.Epoch, theirs)
	}
	if u := consume(s, "minted-here", mine); !u.Fresh || u.Epoch != mine {
		t.Fatalf("this handle consuming its own nonce = fresh %v epoch %d; want fresh, epoch %d", u.Fresh, u.Epoch, mine)
	}
	if u := consume(s, "minted-here", mine); u.Fresh {
		t.Fatal("this handle accepted its nonce twice")
	}
	if u := consume(other, "minted-there", theirs); !u.Fresh {
		t.Fatal("another handle refused a nonce of its own epoch")
	}
}

func testNonceGC(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	now := dbNow(t, s)
	for _, n := range []struct {
		nonce   string
		expires time.Time
	}{{"old", now.Add(-2 * time.Minute)}, {"just expired", now.Add(-10 * time.Second)}, {"live", now.Add(time.Hour)}} {
		if fresh, err := consumeOne(ctx, s, n.nonce, n.expires); err != nil || !fresh {
			t.Fatalf("consuming %s = %v, %v", n.nonce, fresh, err)
		}
	}
	n, err := s.NonceGC(ctx)
	if err != nil || n != 1 {
		t.Fatalf("NonceGC = %d, %v; want 1", n, err)
	}
	// The live nonce is still remembered; the collected one may be used
	// again only because its timestamp is rejected before the store. One
	// just expired is remembered too: a frontend whose clock runs behind
	// the database's (by up to nonce.Skew) still takes it for fresh.
	for _, n := range []struct {
		nonce   string
		expires time.Time
	}{{"live", now.Add(time.Hour)}, {"just expired", now.Add(-10 * time.Second)}} {
		if fresh, err := consumeOne(ctx, s, n.nonce, n.expires); err != nil || fresh {
			t.Fatalf("reusing nonce %q after NonceGC = fresh %v, %v; want refused", n.nonce, fresh, err)
		}
	}
}
