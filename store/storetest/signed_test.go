package storetest

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testSignedOrders: a newOrder with its nonce, drafted without a read,
// writes the order and consumes the nonce together, or, when the nonce,
// the account, the clock it was drafted by or an authorization a read
// would have reused does not allow it, commits nothing (ErrNotClaimed).
func testSignedOrders(t *testing.T, s store.Store, _ Extras) {
	f := newSignedOrders(t, s)
	f.refused(t)
	f.applied(t)
	f.appliedOtherMethod(t)
}

// signedOrders is testSignedOrders' account, nonce epoch and clock, with
// an order that expires before the account's valid authorization for
// reused.example.com, which the ordinary path would reuse.
type signedOrders struct {
	s       store.Store
	ctx     context.Context
	epoch   int64
	now     time.Time
	expires time.Time
	a       *store.Account
	reused  *store.Order
}

func newSignedOrders(t *testing.T, s store.Store) signedOrders {
	ctx := ctxT(t)
	epoch, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := dbNow(t, s)
	a := newAccount(t, s)
	return signedOrders{s: s, ctx: ctx, epoch: epoch, now: now, expires: now.Add(time.Hour), a: a, reused: readyOrder(t, s, a, "reused.example.com")}
}

func (f signedOrders) signed(nonce string) store.SignedUse {
	return store.SignedUse{Nonce: store.NonceUse{Nonce: nonce, Expires: f.expires, Epoch: f.epoch}, AccountID: f.a.ID, KeyJWK: f.a.KeyJWK}
}

// create is OrderCreate of o with u, drafted without a read at clock.
func (f signedOrders) create(u store.SignedUse, o store.NewOrder, clock time.Time) (*store.Order, error) {
	o.Clock = clock
	return f.s.OrderCreate(f.ctx, u, o)
}

// orders counts the account's orders.
func (f signedOrders) orders(t *testing.T) int {
	t.Helper()
	ids, _, err := f.s.OrdersByAccount(f.ctx, f.a.ID, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// spec is a new order of the account's for names, expiring before its
// authorization for reused.example.com.
func (f signedOrders) spec(t *testing.T, names ...string) store.NewOrder {
	o := orderSpec(t, f.s, f.a, names...)
	o.Expires = f.now.Add(30 * time.Minute)
	return o
}

// refused: what does not allow the fold commits nothing, the nonce
// included.
func (f signedOrders) refused(t *testing.T) {
	s, ctx := f.s, f.ctx
	used := rnd(16)
	if fresh, err := consumeOne(ctx, s, used, f.expires); err != nil || !fresh {
		t.Fatalf("consuming a nonce: fresh %v, %v", fresh, err)
	}
	for _, tc := range []struct {
		name  string
		use   func() store.SignedUse
		order func() store.NewOrder
		clock func() time.Time
	}{
		{"a nonce used before", func() store.SignedUse { return f.signed(used) }, nil, nil},
		{"a nonce of another epoch", func() store.SignedUse { u := f.signed(rnd(16)); u.Nonce.Epoch++; return u }, nil, nil},
		{"a key the account no longer has", func() store.SignedUse {
			u := f.signed(rnd(16))
			u.KeyJWK = []byte(`{"kty":"OKP","crv":"Ed25519","x":"old"}`)
			return u
		}, nil, nil},
		{"another account's order", nil, func() store.NewOrder {
			o := f.spec(t, "other.example.com")
			o.AccountID = newAccount(t, s).ID
			return o
		}, nil},
		{"a clock a minute fast", nil, nil, func() time.Time { return dbNow(t, s).Add(time.Minute) }},
		{"a clock a minute slow", nil, nil, func() time.Time { return dbNow(t, s).Add(-time.Minute) }},
		{"an authorization to reuse", nil, func() store.NewOrder { return f.spec(t, "new.example.com", "reused.example.com") }, nil},
		{"an authorization reused", nil, func() store.NewOrder {
			o := f.spec(t, "reused.example.com")
			o.Authzs[0] = authz(t, s, f.reused.AuthzIDs[0])
			return o
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, o, clock := f.signed(rnd(16)), f.spec(t, "folded-not.example.com"), dbNow(t, s)
			if tc.use != nil {
				u = tc.use()
			}
			if tc.order != nil {
				o = tc.order()
			}
			if tc.clock != nil {
				clock = tc.clock()
			}
			before := f.orders(t)
			_, err := f.create(u, o, clock)
			wantErr(t, "the newOrder with its nonce", err, store.ErrNotClaimed)
			if n := f.orders(t) - before; n != 0 {
				t.Errorf("%d orders written by a fold that did not apply", n)
			}
			if u.Nonce.Nonce != used && u.Nonce.Epoch == f.epoch {
				// Nothing committed: the nonce is still unused.
				if fresh, err := consumeOne(ctx, s, u.Nonce.Nonce, f.expires); err != nil || !fresh {
					t.Errorf("the nonce was consumed by a fold that did not apply (fresh %v, %v)", fresh, err)
				}
			}
		})
	}
}

// applied: the fold that applies writes the order as OrderCreate writes
// it, and consumes its nonce.
func (f signedOrders) applied(t *testing.T) {
	s, ctx := f.s, f.ctx
	n := rnd(16)
	before := f.orders(t)
	o, err := f.create(f.signed(n), f.spec(t, "folded.example.com", "*.folded.example.com"), dbNow(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.orders(t) - before; got != 1 {
		t.Fatalf("%d orders written by the fold, want 1", got)
	}
	back := order(t, s, o.ID)
	if back.Status != acme.StatusPending || o.Status != acme.StatusPending || !slices.Equal(back.AuthzIDs, o.AuthzIDs) || len(o.AuthzIDs) != 2 {
		t.Errorf("the folded order reads back %s with authorizations %v; it was returned %s with %v; want pending with 2", back.Status, back.AuthzIDs, o.Status, o.AuthzIDs)
	}
	if !back.CreatedAt.Equal(o.CreatedAt) || !slices.Equal(back.Identifiers, o.Identifiers) {
		t.Errorf("the folded order reads back created %v with %v; it was returned created %v with %v", back.CreatedAt, back.Identifiers, o.CreatedAt, o.Identifiers)
	}
	if az := authz(t, s, o.AuthzIDs[1]); !az.Wildcard || az.Identifier.Value != "folded.example.com" || len(az.Challenges) != 2 || az.Status != acme.StatusPending {
		t.Errorf("the folded order's second authorization is %+v, want a pending wildcard for folded.example.com with 2 challenges", az)
	}
	if fresh, err := consumeOne(ctx, s, n, f.expires); err != nil || fresh {
		t.Fatalf("the folded newOrder's nonce is still fresh (%v, %v): it could be replayed", fresh, err)
	}
}

// appliedOtherMethod: an authorization validated by a method the order's
// profile does not offer is none the ordinary path would reuse, so the
// fold applies.
func (f signedOrders) appliedOtherMethod(t *testing.T) {
	dnsOnly := f.spec(t, "reused.example.com")
	dnsOnly.Methods = []acme.ChallengeType{acme.ChallengeDNS01}
	o, err := f.create(f.signed(rnd(16)), dnsOnly, dbNow(t, f.s))
	if err != nil {
		t.Fatalf("a folded newOrder of a profile offering only dns-01, with an authorization validated by http-01: %v", err)
	}
	if o.AuthzIDs[0] == f.reused.AuthzIDs[0] || o.Status != acme.StatusPending {
		t.Errorf("the folded order is %s with authorization %s; want pending with a new one, not %s", o.Status, o.AuthzIDs[0], f.reused.AuthzIDs[0])
	}
}

// foldedKind is one kind of claim with its nonce (ChallengeClaim,
// OrderFinalizeBegin) as testSignedClaims drives it.
type foldedKind struct {
	name    string
	job     string
	open    func(t *testing.T, a *store.Account, name string) string // a row the account may claim
	status  func(t *testing.T, id string) acme.Status
	signed  func(s store.Store, u store.SignedUse, id string) (acme.Status, error)
	claim   func(s store.Store, id string) (bool, error) // the ordinary claim
	claimed acme.Status
}

// testSignedClaims: a claim with its nonce claims its row and consumes
// the nonce together, or, when the nonce, the account or the row does not
// allow it, commits nothing (errNotClaimed). Racing claims with and
// without a nonce, one wins.
func testSignedClaims(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	epoch, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expires := dbNow(t, s).Add(time.Hour)
	for _, k := range foldedKinds(ctx, s) {
		t.Run(k.name, func(t *testing.T) {
			f := foldedClaims{s: s, x: x, ctx: ctx, k: k, a: newAccount(t, s), epoch: epoch, expires: expires}
			f.refused(t)
			f.applied(t)
			f.raced(t)
		})
	}
}

// foldedKinds are the folded writes: a challenge's claim and an order's
// finalize.
func foldedKinds(ctx context.Context, s store.Store) []foldedKind {
	return []foldedKind{{
		name: "challenge", job: jobs.KindChallengeValidate, claimed: acme.StatusProcessing,
		open: func(t *testing.T, a *store.Account, name string) string {
			return authz(t, s, newOrder(t, s, a, name).AuthzIDs[0]).Challenges[0].ID
		},
		status: func(t *testing.T, id string) acme.Status { return challenge(t, s, id).Status },
		signed: func(s store.Store, u store.SignedUse, id string) (acme.Status, error) {
			c, won, err := s.ChallengeClaim(ctx, u, id)
			if err != nil || !won {
				return "", cmp.Or(err, errNotClaimed)
			}
			return c.Status, nil
		},
		claim: func(s store.Store, id string) (bool, error) {
			_, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, id)
			return claimed, err
		},
	}, {
		name: "order", job: jobs.KindSignerIssue, claimed: acme.StatusProcessing,
		open: func(t *testing.T, a *store.Account, name string) string {
			return readyOrder(t, s, a, name).ID
		},
		status: func(t *testing.T, id string) acme.Status { return order(t, s, id).Status },
		signed: func(s store.Store, u store.SignedUse, id string) (acme.Status, error) {
			o, won, err := s.OrderFinalizeBegin(ctx, u, id, "default", []byte("csr"), nil)
			if err != nil || !won {
				return "", cmp.Or(err, errNotClaimed)
			}
			if o == nil {
				return "", errors.New("claimed, but no order returned")
			}
			return o.Status, nil
		},
		claim: func(s store.Store, id string) (bool, error) {
			_, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, id, "default", []byte("csr"), nil)
			return claimed, err
		},
	}}
}

// foldedClaims drives one kind of folded write for account a.
type foldedClaims struct {
	s       store.Store
	x       Extras
	ctx     context.Context
	k       foldedKind
	a       *store.Account
	epoch   int64
	expires time.Time
}

func (f foldedClaims) signed(nonce string) store.SignedUse {
	return store.SignedUse{Nonce: store.NonceUse{Nonce: nonce, Expires: f.expires, Epoch: f.epoch}, AccountID: f.a.ID, KeyJWK: f.a.KeyJWK}
}

// refused: what does not allow the fold commits nothing: the row, the
// job and the nonce stay as they were.
func (f foldedClaims) refused(t *testing.T) {
	s, k := f.s, f.k
	used := rnd(16)
	if fresh, err := consumeOne(f.ctx, s, used, f.expires); err != nil || !fresh {
		t.Fatalf("consuming a nonce: fresh %v, %v", fresh, err)
	}
	otherID := k.open(t, newAccount(t, s), "other-"+k.name+".example.com")
	claimedID := k.open(t, f.a, "claimed-"+k.name+".example.com")
	if won, err := k.claim(s, claimedID); err != nil || !won {
		t.Fatalf("claiming %s: won %v, %v", claimedID, won, err)
	}
	fresh := func(name string) func() string {
		return func() string { return k.open(t, f.a, name+"-"+k.name+".example.com") }
	}
	for _, tc := range []struct {
		name string
		use  func() store.SignedUse
		id   func() string
	}{
		{"a nonce used before", func() store.SignedUse { return f.signed(used) }, fresh("used")},
		{"a nonce of another epoch", func() store.SignedUse { u := f.signed(rnd(16)); u.Nonce.Epoch++; return u }, fresh("epoch")},
		{"a key the account no longer has", func() store.SignedUse {
			u := f.signed(rnd(16))
			u.KeyJWK = []byte(`{"kty":"OKP","crv":"Ed25519","x":"old"}`)
			return u
		}, fresh("key")},
		{"another account's", func() store.SignedUse { return f.signed(rnd(16)) }, func() string { return otherID }},
		{"claimed before", func() store.SignedUse { return f.signed(rnd(16)) }, func() string { return claimedID }},
		{"no such row", func() store.SignedUse { return f.signed(rnd(16)) }, func() string { return "nope" }},
	} {
		t.Run(tc.name, func(t *testing.T) { f.refusedOne(t, tc.use(), tc.id(), used) })
	}
}

// refusedOne: the folded write of u on row id is refused and commits
// nothing; used is the nonce consumed before.
func (f foldedClaims) refusedOne(t *testing.T, u store.SignedUse, id, used string) {
	k := f.k
	jobsBefore := jobCount(t, f.x, k.job)
	var before acme.Status
	if id != "nope" {
		before = k.status(t, id)
	}
	_, err := k.signed(f.s, u, id)
	wantErr(t, "the claim with its nonce", err, errNotClaimed)
	if id != "nope" {
		if st := k.status(t, id); st != before {
			t.Errorf("the %s went %s → %s in a fold that did not apply", k.name, before, st)
		}
	}
	if n := jobCount(t, f.x, k.job) - jobsBefore; n != 0 {
		t.Errorf("%d jobs queued by a fold that did not apply", n)
	}
	if u.Nonce.Nonce != used && u.Nonce.Epoch == f.epoch {
		// Nothing committed: the nonce is still unused.
		if fresh, err := consumeOne(f.ctx, f.s, u.Nonce.Nonce, f.expires); err != nil || !fresh {
			t.Errorf("the nonce was consumed by a fold that did not apply (fresh %v, %v)", fresh, err)
		}
	}
}

// applied: the fold that applies claims its row, queues its job and
// consumes its nonce.
func (f foldedClaims) applied(t *testing.T) {
	k := f.k
	n := rnd(16)
	id := k.open(t, f.a, "folded-"+k.name+".example.com")
	jobsBefore := jobCount(t, f.x, k.job)
	st, err := k.signed(f.s, f.signed(n), id)
	if err != nil {
		t.Fatal(err)
	}
	if st != k.claimed {
		t.Fatalf("the folded write returned a %s %s, want %s", k.name, st, k.claimed)
	}
	if got := jobCount(t, f.x, k.job) - jobsBefore; got != 1 {
		t.Fatalf("%d %s jobs queued, want 1", got, k.job)
	}
	if fresh, err := consumeOne(f.ctx, f.s, n, f.expires); err != nil || fresh {
		t.Fatalf("the folded write's nonce is still fresh (%v, %v): it could be replayed", fresh, err)
	}
}

// raced: ordinary and folded claims racing on one row; one wins.
func (f foldedClaims) raced(t *testing.T) {
	k := f.k
	id := k.open(t, f.a, "fold-race-"+k.name+".example.com")
	var i atomic.Int32
	wins := race(t, handles(t, f.s, f.x, 4), func(s store.Store) (bool, error) {
		if i.Add(1)%2 == 0 {
			return k.claim(s, id)
		}
		_, err := k.signed(s, f.signed(rnd(16)), id)
		if errors.Is(err, errNotClaimed) {
			return false, nil
		}
		return err == nil, err
	})
	if wins != 1 {
		t.Fatalf("%d of 16 concurrent claims, half of them folded, won; want exactly 1", wins)
	}
}

// errNotClaimed is a claim with its nonce that did not win.
var errNotClaimed = errors.New("not claimed")
