package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/migrations"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func testNow(t *testing.T, s store.Store, _ Extras) {
	now := dbNow(t, s)
	if d := time.Since(now); d > time.Minute || d < -time.Minute {
		t.Fatalf("database clock %v is %v away from this host's", now, d)
	}
	if err := s.Ping(ctxT(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// testNotFound: every lookup and every move of a missing record is
// store.ErrNotFound, in both dialects.
func testNotFound(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	_, err := s.AccountByID(ctx, "nope")
	wantErr(t, "AccountByID", err, store.ErrNotFound)
	_, err = s.AccountByThumbprint(ctx, "nope")
	wantErr(t, "AccountByThumbprint", err, store.ErrNotFound)
	_, err = s.AccountUpdate(ctx, "nope", nil)
	wantErr(t, "AccountUpdate", err, store.ErrNotFound)
	_, err = s.AccountDeactivate(ctx, "nope")
	wantErr(t, "AccountDeactivate", err, store.ErrNotFound)
	_, err = s.AccountKeyChange(ctx, "nope", "a", []byte(`{}`), "b")
	wantErr(t, "AccountKeyChange", err, store.ErrNotFound)
	_, err = s.OrderByID(ctx, "nope")
	wantErr(t, "OrderByID", err, store.ErrNotFound)
	_, err = s.AuthzByID(ctx, "nope")
	wantErr(t, "AuthzByID", err, store.ErrNotFound)
	_, err = s.AuthzDeactivate(ctx, "nope")
	wantErr(t, "AuthzDeactivate", err, store.ErrNotFound)
	_, err = s.ChallengeByID(ctx, "nope")
	wantErr(t, "ChallengeByID", err, store.ErrNotFound)
	_, _, err = s.ChallengeClaim(ctx, "nope")
	wantErr(t, "ChallengeClaim", err, store.ErrNotFound)
	err = s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: "nope", Status: acme.StatusValid})
	wantErr(t, "ChallengeVerdict", err, store.ErrNotFound)
	_, _, err = s.OrderFinalizeBegin(ctx, "nope", "default", []byte("csr"), nil)
	wantErr(t, "OrderFinalizeBegin", err, store.ErrNotFound)
	err = s.OrderIssued(ctx, store.Issued{OrderID: "nope", Certificate: store.Certificate{Serial: "01"}})
	wantErr(t, "OrderIssued", err, store.ErrNotFound)
	err = s.OrderFail(ctx, "nope", acme.Problem{Type: acme.ProblemBadCSR})
	wantErr(t, "OrderFail", err, store.ErrNotFound)
	_, err = s.CertificateBySerial(ctx, "nope")
	wantErr(t, "CertificateBySerial", err, store.ErrNotFound)
	_, err = s.Revoke(ctx, "nope", 1, store.AuditEvent{Actor: "cli:test", Action: "revoke"})
	wantErr(t, "Revoke", err, store.ErrNotFound)
	_, err = s.RevokeQueue(ctx, "nope", "up", 1, store.AuditEvent{Actor: "cli:test", Action: "revoke"})
	wantErr(t, "RevokeQueue", err, store.ErrNotFound)
	_, err = s.RevokeProgress(ctx, "nope", 1)
	wantErr(t, "RevokeProgress", err, store.ErrNotFound)
	_, err = s.CRLLatest(ctx, "nope")
	wantErr(t, "CRLLatest", err, store.ErrNotFound)
	err = s.Requeue(ctx, jobs.Subject{Kind: jobs.KindChallengeValidate, ID: "nope"})
	wantErr(t, "Requeue challenge", err, store.ErrNotFound)
	err = s.Requeue(ctx, jobs.Subject{Kind: jobs.KindSignerIssue, ID: "nope"})
	wantErr(t, "Requeue order", err, store.ErrNotFound)
	_, err = s.Abandon(ctx, jobs.Subject{Kind: jobs.KindChallengeValidate, ID: "nope"}, acme.Problem{})
	wantErr(t, "Abandon challenge", err, store.ErrNotFound)
	_, err = s.Abandon(ctx, jobs.Subject{Kind: jobs.KindSignerIssue, ID: "nope"}, acme.Problem{})
	wantErr(t, "Abandon order", err, store.ErrNotFound)
	_, err = reusable(ctx, s, "nope", acme.Identifier{Type: acme.IdentifierDNS, Value: "example.com"}, false, time.Now())
	wantErr(t, "AuthzReusable", err, store.ErrNotFound)
	// An order for a missing account names what is missing rather than
	// failing with a driver error.
	_, err = s.OrderCreate(ctx, store.NewOrder{AccountID: "nope", Profile: "default", Expires: time.Now().Add(time.Hour),
		Identifiers: []acme.Identifier{{Type: acme.IdentifierDNS, Value: "example.com"}}})
	wantErr(t, "OrderCreate for a missing account", err, store.ErrNotFound)
}

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

	// A batch of one (PostgreSQL answers it with a statement of its own)
	// means the same, use by use.
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

// testNonceLookups: a use's Lookup reads, in the nonce's round trip, what
// the store's own read of that row returns — an order, an authorization
// with its challenges, a challenge with its authorization, a certificate —
// and store.ErrNotFound for a row that does not exist. An ID or account ID
// no row can have (a NUL, invalid UTF-8) finds nothing and fails nothing:
// the batch answers everyone else in it.
func testNonceLookups(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "lookup.example.com")
	mustIssue(t, s, o, "10ccab1e")
	o = order(t, s, o.ID)
	az := authz(t, s, o.AuthzIDs[0])
	ch, err := s.ChallengeWithAuthz(ctx, az.Challenges[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := s.CertificateBySerial(ctx, "10ccab1e")
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expires := dbNow(t, s).Add(time.Hour)
	// The reusable authorizations of the account: its valid one, and
	// none for a name it has none for, as AuthzsReusable answers.
	keys := []store.AuthzKey{{Identifier: az.Identifier}, {Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "none.example.com"}}}
	after := dbNow(t, s)
	reusable, err := s.AuthzsReusable(ctx, a.ID, keys, nil, after)
	if err != nil || len(reusable) != 2 || reusable[0] == nil || reusable[1] != nil {
		t.Fatalf("AuthzsReusable = %+v, %v; want the valid authorization and none", reusable, err)
	}
	// A key no text column can hold is not read with the nonce (it would
	// fail the whole batch on PostgreSQL): no answer, and the caller
	// reads for itself.
	badKeys := []store.AuthzKey{{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "bad\x00name"}}}
	tests := []struct {
		name   string
		acct   string
		lookup store.Lookup
		want   any // nil: store.ErrNotFound; noAnswer: nothing read
	}{
		{"reusable authorizations", a.ID, store.Lookup{Kind: store.LookupReusable, ID: a.ID, Keys: keys, After: after}, reusable},
		{"reusable, none after", a.ID, store.Lookup{Kind: store.LookupReusable, ID: a.ID, Keys: keys, After: after.Add(365 * 24 * time.Hour)}, []*store.Authorization{nil, nil}},
		{"reusable by the method that validated it", a.ID, store.Lookup{Kind: store.LookupReusable, ID: a.ID, Keys: keys, Methods: []acme.ChallengeType{acme.ChallengeHTTP01}, After: after}, reusable},
		{"reusable, none by another method", a.ID, store.Lookup{Kind: store.LookupReusable, ID: a.ID, Keys: keys, Methods: []acme.ChallengeType{acme.ChallengeDNS01}, After: after}, []*store.Authorization{nil, nil}},
		{"reusable, NUL in a key", a.ID, store.Lookup{Kind: store.LookupReusable, ID: a.ID, Keys: badKeys, After: after}, noAnswer{}},
		{"order", a.ID, store.Lookup{Kind: store.LookupOrder, ID: o.ID}, o},
		{"authorization", a.ID, store.Lookup{Kind: store.LookupAuthz, ID: az.ID}, az},
		{"challenge", a.ID, store.Lookup{Kind: store.LookupChallenge, ID: ch.Challenge.ID}, ch},
		{"certificate", a.ID, store.Lookup{Kind: store.LookupCert, ID: cert.Serial}, cert},
		{"missing order", a.ID, store.Lookup{Kind: store.LookupOrder, ID: "no-such-order"}, nil},
		{"missing authorization", "", store.Lookup{Kind: store.LookupAuthz, ID: "no-such-authz"}, nil},
		{"NUL in the ID", a.ID, store.Lookup{Kind: store.LookupChallenge, ID: "bad\x00id"}, nil},
		{"invalid UTF-8", a.ID, store.Lookup{Kind: store.LookupCert, ID: "bad\xffid"}, nil},
		{"NUL in the account ID", "bad\x00acct", store.Lookup{Kind: store.LookupOrder, ID: o.ID}, o},
	}
	check := func(t *testing.T, name, acct string, got store.NonceUsed, want any) {
		t.Helper()
		if !got.Fresh {
			t.Errorf("%s: nonce not fresh", name)
		}
		if wantAcct := acct == a.ID; (got.Account != nil) != wantAcct {
			t.Errorf("%s: account %+v, want one: %v", name, got.Account, wantAcct)
		}
		if _, ok := want.(noAnswer); ok {
			if got.Found != nil || got.FoundErr != nil {
				t.Errorf("%s: found %+v, %v; want no answer", name, got.Found, got.FoundErr)
			}
			return
		}
		if want == nil {
			if got.Found != nil || !errors.Is(got.FoundErr, store.ErrNotFound) {
				t.Errorf("%s: found %+v, %v; want store.ErrNotFound", name, got.Found, got.FoundErr)
			}
			return
		}
		if got.FoundErr != nil || !reflect.DeepEqual(got.Found, want) {
			t.Errorf("%s: found %+v, %v\nwant %+v", name, got.Found, got.FoundErr, want)
		}
	}
	// One batch of all of them, and each alone (PostgreSQL answers a
	// batch of one with a statement of its own).
	var uses []store.NonceUse
	for i, tc := range tests {
		uses = append(uses, store.NonceUse{Nonce: fmt.Sprintf("lookup-%d", i), Expires: expires, AccountID: tc.acct, Epoch: e, Lookup: tc.lookup})
	}
	// A replay in the same batch is refused before anything it read
	// matters: it is answered nothing.
	uses = append(uses, store.NonceUse{Nonce: "lookup-0", Expires: expires, AccountID: a.ID, Epoch: e, Lookup: tests[0].lookup})
	got, err := s.NonceConsume(ctx, uses)
	if err != nil || len(got) != len(uses) {
		t.Fatalf("NonceConsume = %d answers, %v; want %d", len(got), err, len(uses))
	}
	for i, tc := range tests {
		check(t, "in a batch: "+tc.name, tc.acct, got[i], tc.want)
	}
	if r := got[len(tests)]; r.Fresh || r.Found != nil || r.FoundErr != nil {
		t.Errorf("the replay in the batch: fresh %v found %v, %v; want refused with nothing", r.Fresh, r.Found, r.FoundErr)
	}
	for i, tc := range tests {
		got, err := s.NonceConsume(ctx, []store.NonceUse{{Nonce: fmt.Sprintf("lookup-alone-%d", i), Expires: expires, AccountID: tc.acct, Epoch: e, Lookup: tc.lookup}})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s alone: %v, %v", tc.name, got, err)
		}
		check(t, "alone: "+tc.name, tc.acct, got[0], tc.want)
	}

	// A row that cannot be read (its stored problem is not JSON) fails
	// the lookup that reads it, and nothing else in the batch.
	bad := newOrder(t, s, a, "corrupt.example.com")
	badCh := authz(t, s, bad.AuthzIDs[0]).Challenges[0].ID
	x.Exec(t, "UPDATE challenges SET error = 'not json' WHERE id = '"+badCh+"'")
	got, err = s.NonceConsume(ctx, []store.NonceUse{
		{Nonce: "lookup-corrupt", Expires: expires, AccountID: a.ID, Epoch: e, Lookup: store.Lookup{Kind: store.LookupChallenge, ID: badCh}},
		{Nonce: "lookup-beside-corrupt", Expires: expires, AccountID: a.ID, Epoch: e, Lookup: tests[0].lookup},
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("a batch with a corrupt row: %v, %v; want both answered", got, err)
	}
	if got[0].Found != nil || got[0].FoundErr == nil || errors.Is(got[0].FoundErr, store.ErrNotFound) {
		t.Errorf("the corrupt row's lookup = %+v, %v; want its read error", got[0].Found, got[0].FoundErr)
	}
	check(t, "beside a corrupt row", a.ID, got[1], tests[0].want)

	// So does an account whose row cannot be read (its contact list is not
	// JSON): its use is answered with AccountErr, the others as usual, in
	// a batch and alone.
	broken := newAccount(t, s)
	x.Exec(t, "UPDATE accounts SET contact = 'not json' WHERE id = '"+broken.ID+"'")
	for _, batch := range [][]string{{"broken", "fine"}, {"broken"}} {
		var uses []store.NonceUse
		for _, who := range batch {
			id := a.ID
			if who == "broken" {
				id = broken.ID
			}
			uses = append(uses, store.NonceUse{Nonce: fmt.Sprintf("lookup-acct-%d-%s", len(batch), who), Expires: expires, AccountID: id, Epoch: e, Lookup: tests[0].lookup})
		}
		got, err := s.NonceConsume(ctx, uses)
		if err != nil || len(got) != len(uses) {
			t.Fatalf("a batch with an unreadable account (%v): %v, %v; want every use answered", batch, got, err)
		}
		if got[0].Account != nil || got[0].AccountErr == nil || !got[0].Fresh {
			t.Errorf("the unreadable account's use (%v) = account %+v, error %v, fresh %v; want no account, its read error, the nonce consumed", batch, got[0].Account, got[0].AccountErr, got[0].Fresh)
		}
		if len(got) > 1 {
			if got[1].AccountErr != nil {
				t.Errorf("the use beside it has AccountErr %v", got[1].AccountErr)
			}
			check(t, "beside an unreadable account", a.ID, got[1], tests[0].want)
		}
	}
}

// noAnswer is testNonceLookups' want for a lookup the store leaves
// unread.
type noAnswer struct{}

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

func testAccountLifecycle(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	if a.ID == "" || len(a.ID) < 22 || a.Status != acme.StatusValid || !a.TermsAgreed || a.CreatedAt.IsZero() {
		t.Fatalf("created account = %+v", a)
	}
	got, err := s.AccountByThumbprint(ctx, a.Thumbprint)
	if err != nil || got.ID != a.ID || string(got.KeyJWK) != string(a.KeyJWK) {
		t.Fatalf("AccountByThumbprint = %+v, %v", got, err)
	}
	up, err := s.AccountUpdate(ctx, a.ID, []string{"mailto:a@example.com", "mailto:b@example.com"})
	if err != nil || !slices.Equal(up.Contact, []string{"mailto:a@example.com", "mailto:b@example.com"}) {
		t.Fatalf("AccountUpdate = %+v, %v", up, err)
	}
	// Key change is a compare-and-swap on the current thumbprint.
	ch, err := s.AccountKeyChange(ctx, a.ID, a.Thumbprint, []byte(`{"kty":"new"}`), "new-thumb")
	if err != nil || ch.Thumbprint != "new-thumb" || string(ch.KeyJWK) != `{"kty":"new"}` {
		t.Fatalf("AccountKeyChange = %+v, %v", ch, err)
	}
	_, err = s.AccountKeyChange(ctx, a.ID, a.Thumbprint, []byte(`{"kty":"again"}`), "again")
	wantErr(t, "key change from a stale thumbprint", err, store.ErrConflict)
	other := newAccount(t, s)
	_, err = s.AccountKeyChange(ctx, a.ID, "new-thumb", []byte(`{}`), other.Thumbprint)
	wantErr(t, "key change to another account's key", err, store.ErrConflict)
	if _, err := s.AccountByThumbprint(ctx, a.Thumbprint); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old key still finds the account: %v", err)
	}
}

func testAccountThumbprintUnique(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	dup, err := x.Open(t, nil).AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{}`), Thumbprint: a.Thumbprint})
	wantErr(t, "second account with one thumbprint", err, store.ErrConflict)
	if dup == nil || dup.ID != a.ID {
		t.Fatalf("conflicting AccountCreate returned %+v, want the existing account %s", dup, a.ID)
	}
}

func testAccountDeactivate(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	ready := readyOrder(t, s, a, "ready.example.com")
	pending := newOrder(t, s, a, "pending.example.com")
	// One being signed: the worker must find it no longer processing.
	processing := readyOrder(t, s, a, "processing.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, processing.ID, processing.Profile, []byte("csr-der"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin = %v, %v", claimed, err)
	}
	d, err := s.AccountDeactivate(ctx, a.ID)
	if err != nil || d.Status != acme.StatusDeactivated {
		t.Fatalf("AccountDeactivate = %+v, %v", d, err)
	}
	for _, id := range append(ready.AuthzIDs, pending.AuthzIDs...) {
		if st := authz(t, s, id).Status; st != acme.StatusDeactivated {
			t.Errorf("authorization %s is %s after its account was deactivated, want deactivated (RFC 8555 §7.3.6)", id, st)
		}
	}
	for _, o := range []*store.Order{ready, pending, processing} {
		if got := order(t, s, o.ID); got.Status != acme.StatusInvalid || got.Error == nil {
			t.Errorf("order %s is %s (error %v) after its account was deactivated, want invalid with a problem", o.ID, got.Status, got.Error)
		}
	}
	// Again: nothing left to move, the account is returned as it is.
	if d, err := s.AccountDeactivate(ctx, a.ID); err != nil || d.Status != acme.StatusDeactivated {
		t.Fatalf("second AccountDeactivate = %+v, %v", d, err)
	}
}

func testAccountsListPages(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	var want []string
	for range 5 {
		want = append([]string{newAccount(t, s).ID}, want...) // newest first
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		list, next, err := s.AccountsList(ctx, store.Page{After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 2 {
			t.Fatalf("page has %d accounts, limit 2", len(list))
		}
		for _, a := range list {
			got = append(got, a.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages gave %v, want newest first %v", got, want)
	}
	for _, after := range []string{"garbage", "0", "-5", "1\x00"} {
		_, _, err := s.AccountsList(ctx, store.Page{After: after})
		wantErr(t, fmt.Sprintf("a cursor of %q", after), err, store.ErrBadCursor)
	}
}

func testOrderHappyPath(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	spec := orderSpec(t, s, a, "a.example.com", "*.b.example.com")
	nb := spec.Expires.Add(-30 * time.Minute).Truncate(time.Second)
	spec.NotBefore = &nb
	o, err := s.OrderCreate(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != acme.StatusPending || len(o.AuthzIDs) != 2 || len(o.ID) < 22 || o.NotBefore == nil || !o.NotBefore.Equal(nb) || o.NotAfter != nil {
		t.Fatalf("created order = %+v", o)
	}
	if !slices.Equal(o.Identifiers, spec.Identifiers) {
		t.Fatalf("identifiers = %v, want %v", o.Identifiers, spec.Identifiers)
	}
	if ids, _, err := s.OrdersByAccount(ctx, a.ID, store.Page{}); err != nil || !slices.Equal(ids, []string{o.ID}) {
		t.Fatalf("OrdersByAccount = %v, %v", ids, err)
	}
	az := authz(t, s, o.AuthzIDs[1])
	if az.Identifier.Value != "b.example.com" || !az.Wildcard || az.Status != acme.StatusPending || az.AccountID != a.ID || len(az.Challenges) != 2 {
		t.Fatalf("wildcard authorization = %+v", az)
	}
	tokens := map[string]bool{}
	for _, c := range az.Challenges {
		// RFC 8555 §8.1: a token has at least 128 bits of entropy, base64url.
		if len(c.Token) < 22 || strings.ContainsAny(c.Token, "+/=") || c.Status != acme.StatusPending || c.AuthzID != az.ID {
			t.Fatalf("challenge = %+v", c)
		}
		tokens[c.Token] = true
	}
	if len(tokens) != 2 {
		t.Fatal("two challenges share a token")
	}

	// The first authorization valid: the order waits for the second.
	c := validate(t, s, o.AuthzIDs[0], acme.StatusValid)
	if got := challenge(t, s, c.ID); got.Status != acme.StatusValid || got.Validated == nil || string(got.ValidationRecord) == "" {
		t.Fatalf("validated challenge = %+v", got)
	}
	if got := order(t, s, o.ID); got.Status != acme.StatusPending {
		t.Fatalf("order is %s with one of two authorizations valid, want pending", got.Status)
	}
	validate(t, s, o.AuthzIDs[1], acme.StatusValid)
	if got := order(t, s, o.ID); got.Status != acme.StatusReady {
		t.Fatalf("order is %s with every authorization valid, want ready", got.Status)
	}

	// Naming another profile than the order's claims nothing and queues
	// nothing: the job would have gone to that profile's workers.
	if _, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile+"-other", []byte("csr-der"), nil); err == nil || claimed {
		t.Fatalf("finalize naming another profile: claimed=%v err=%v, want an error", claimed, err)
	}
	if got := order(t, s, o.ID); got.Status != acme.StatusReady || got.CSR != nil {
		t.Fatalf("order is %s (csr %q) after a finalize naming another profile, want ready with no CSR", got.Status, got.CSR)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 0 {
		t.Fatalf("%d signer_issue jobs after a finalize naming another profile, want 0", n)
	}
	got, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("csr-der"), nil)
	if err != nil || !claimed || got.Status != acme.StatusProcessing || string(got.CSR) != "csr-der" {
		t.Fatalf("OrderFinalizeBegin = %+v, %v, %v", got, claimed, err)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 1 {
		t.Fatalf("%d signer_issue jobs after finalize, want 1", n)
	}
	if _, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("again"), nil); err != nil || claimed {
		t.Fatalf("second finalize: claimed=%v err=%v, want not claimed", claimed, err)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 1 {
		t.Fatalf("%d signer_issue jobs after a repeated finalize, want still 1", n)
	}
	now := dbNow(t, s)
	err = s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: "0a1b2c", IssuerID: "issuer-1", DER: []byte{0x30}, ChainPEM: []byte("pem"),
		Names: []string{"a.example.com", "*.b.example.com"}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
	}})
	if err != nil {
		t.Fatalf("OrderIssued: %v", err)
	}
	// The verdict leaves its job to River, which completes it after the
	// handler returns.
	if n := jobsIn(t, x, jobs.KindSignerIssue, "available"); n != 1 {
		t.Fatalf("%d available signer_issue jobs after OrderIssued, want 1: the store must not touch the job", n)
	}
	got = order(t, s, o.ID)
	if got.Status != acme.StatusValid || got.CertSerial != "0a1b2c" {
		t.Fatalf("issued order = %+v", got)
	}
	cert, err := s.CertificateBySerial(ctx, "0a1b2c")
	if err != nil || cert.OrderID != o.ID || cert.AccountID != a.ID || cert.Profile != "default" || cert.IssuedAt.IsZero() ||
		!slices.Equal(cert.Names, []string{"a.example.com", "*.b.example.com"}) || cert.RevokedAt != nil {
		t.Fatalf("certificate = %+v, %v", cert, err)
	}
	// A verdict is terminal: the order never goes back.
	wantErr(t, "OrderFail on a valid order", s.OrderFail(ctx, o.ID, acme.Problem{Type: acme.ProblemBadCSR}), store.ErrConflict)
}

// testIssueLapsed: an order processing whose account or one of whose
// authorizations is no longer valid, though the order was left processing
// (on PostgreSQL, a deactivation whose statements ran before the order was
// committed; set here directly, as that leaves it), is read by
// OrderToIssue with the problem to fail it with, and OrderIssued records
// no certificate for it: ErrUnauthorized, the order still processing for
// the worker to fail. Born valid (pre-validated) or validated, alike.
func testIssueLapsed(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	cases := []struct {
		name      string
		bornValid bool
		lapse     func(o *store.Order) string // a statement that makes it lapse; nil for none
		detail    string                      // in the problem's detail; "" for none
	}{
		{"nothing lapsed", false, nil, ""},
		{"nothing lapsed, born valid", true, nil, ""},
		{"account deactivated", false, func(o *store.Order) string {
			return "UPDATE accounts SET status = 'deactivated' WHERE id = '" + o.AccountID + "'"
		}, "the account is deactivated"},
		{"account deactivated, born valid", true, func(o *store.Order) string {
			return "UPDATE accounts SET status = 'deactivated' WHERE id = '" + o.AccountID + "'"
		}, "the account is deactivated"},
		{"an authorization deactivated", false, func(o *store.Order) string {
			return "UPDATE authorizations SET status = 'deactivated' WHERE id = '" + o.AuthzIDs[1] + "'"
		}, "is no longer valid"},
		{"an authorization deactivated, born valid", true, func(o *store.Order) string {
			return "UPDATE authorizations SET status = 'deactivated' WHERE id = '" + o.AuthzIDs[0] + "'"
		}, "is no longer valid"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccount(t, s)
			names := []string{fmt.Sprintf("lapse%d-a.example.com", i), fmt.Sprintf("lapse%d-b.example.com", i)}
			var o *store.Order
			if tc.bornValid {
				spec := orderSpec(t, s, a, names...)
				for _, az := range spec.Authzs {
					az.Status, az.Challenges = acme.StatusValid, nil
				}
				var err error
				if o, err = s.OrderCreate(ctx, spec); err != nil || o.Status != acme.StatusReady {
					t.Fatalf("born valid order: %+v, %v; want ready", o, err)
				}
			} else {
				o = readyOrder(t, s, a, names...)
			}
			if _, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
				t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
			}
			o = order(t, s, o.ID)
			if tc.lapse != nil {
				x.Exec(t, tc.lapse(o))
			}
			got, err := s.OrderToIssue(ctx, o.ID, time.Hour)
			if err != nil || got.Order.Status != acme.StatusProcessing {
				t.Fatalf("OrderToIssue = %+v, %v; want the processing order", got, err)
			}
			switch {
			case tc.detail == "" && got.Lapsed != nil:
				t.Fatalf("OrderToIssue: lapsed %+v, want nothing lapsed", got.Lapsed)
			case tc.detail != "" && (got.Lapsed == nil || got.Lapsed.Type != acme.ProblemUnauthorized || !strings.Contains(got.Lapsed.Detail, tc.detail)):
				t.Fatalf("OrderToIssue: lapsed %+v, want unauthorized saying %q", got.Lapsed, tc.detail)
			}
			serial := fmt.Sprintf("1a5e%d", i)
			err = issue(t, s, o, serial)
			if tc.detail == "" {
				if err != nil {
					t.Fatalf("OrderIssued: %v", err)
				}
				return
			}
			wantErr(t, "OrderIssued of a lapsed order", err, store.ErrUnauthorized)
			if got := order(t, s, o.ID); got.Status != acme.StatusProcessing || got.CertSerial != "" {
				t.Fatalf("order after the refused OrderIssued: %s, serial %q; want processing, none", got.Status, got.CertSerial)
			}
			_, err = s.CertificateBySerial(ctx, serial)
			wantErr(t, "the refused certificate", err, store.ErrNotFound)
		})
	}
}

// testStaleValidations: an order's validated authorizations count as
// stale once their challenge's validation is older than the age asked
// for, on the database clock, in the order's position order.
func testStaleValidations(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "stale.example.com", "*.wild.example.com", "pending.example.com")
	var methods []acme.ChallengeType
	for _, id := range o.AuthzIDs[:2] {
		methods = append(methods, validate(t, s, id, acme.StatusValid).Type)
	}
	if got, err := s.StaleValidations(ctx, o.ID, time.Hour); err != nil || len(got) != 0 {
		t.Fatalf("StaleValidations(1h) right after validating = %+v, %v; want none", got, err)
	}
	if got, err := s.OrderToIssue(ctx, o.ID, time.Hour); err != nil || got.Stale || got.Order.ID != o.ID || len(got.Order.AuthzIDs) != 3 {
		t.Fatalf("OrderToIssue(1h) right after validating = %+v, %v; want the order, nothing stale", got, err)
	}
	time.Sleep(20 * time.Millisecond)
	if got, err := s.OrderToIssue(ctx, o.ID, 5*time.Millisecond); err != nil || !got.Stale {
		t.Fatalf("OrderToIssue(5ms) = %+v, %v; want stale", got, err)
	}
	// An order with nothing validated has nothing stale.
	pending := newOrder(t, s, a, "nothing.example.com")
	if got, err := s.OrderToIssue(ctx, pending.ID, 5*time.Millisecond); err != nil || got.Stale {
		t.Fatalf("OrderToIssue(5ms) of an order with nothing validated = %+v, %v; want not stale", got, err)
	}
	_, err := s.OrderToIssue(ctx, "no-such-order", time.Hour)
	wantErr(t, "OrderToIssue of no order", err, store.ErrNotFound)
	got, err := s.StaleValidations(ctx, o.ID, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.StaleValidation{
		{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "stale.example.com"}, Method: methods[0]},
		{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "wild.example.com"}, Wildcard: true, Method: methods[1]},
	}
	if len(got) != len(want) {
		t.Fatalf("StaleValidations(5ms) = %+v, want the two validated authorizations", got)
	}
	for i := range want {
		if got[i].Identifier != want[i].Identifier || got[i].Wildcard != want[i].Wildcard || got[i].Method != want[i].Method || got[i].Validated.IsZero() {
			t.Errorf("StaleValidations(5ms)[%d] = %+v, want %+v with its time", i, got[i], want[i])
		}
	}
}

func testOrderReusesAuthz(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	first := readyOrder(t, s, a, "reuse.example.com")
	spec := orderSpec(t, s, a, "reuse.example.com")
	spec.Authzs = []*store.Authorization{{ID: first.AuthzIDs[0]}}
	second, err := s.OrderCreate(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != acme.StatusReady || !slices.Equal(second.AuthzIDs, first.AuthzIDs) {
		t.Fatalf("order reusing a valid authorization = %+v, want ready with %v", second, first.AuthzIDs)
	}
	// Another account cannot borrow it.
	other := newAccount(t, s)
	spec.AccountID = other.ID
	_, err = s.OrderCreate(ctx, spec)
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
	c, claimed, err := s.ChallengeClaim(ctx, byDNS.Challenges[1].ID)
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
	o, err := s.OrderCreate(ctx, spec)
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

func testInvalidVerdict(t *testing.T, s store.Store, _ Extras) {
	a := newAccount(t, s)
	o := newOrder(t, s, a, "bad.example.com", "good.example.com")
	c := validate(t, s, o.AuthzIDs[0], acme.StatusInvalid)
	got := challenge(t, s, c.ID)
	if got.Status != acme.StatusInvalid || got.Error == nil || got.Error.Type != acme.ProblemIncorrectResponse || got.Validated != nil {
		t.Fatalf("failed challenge = %+v", got)
	}
	az := authz(t, s, o.AuthzIDs[0])
	if az.Status != acme.StatusInvalid {
		t.Fatalf("authorization is %s after its challenge failed, want invalid", az.Status)
	}
	for _, ch := range az.Challenges {
		if ch.Status != acme.StatusInvalid {
			t.Errorf("sibling challenge %s is %s, want invalid with its authorization", ch.Type, ch.Status)
		}
	}
	ord := order(t, s, o.ID)
	if ord.Status != acme.StatusInvalid || ord.Error == nil || ord.Error.Type != acme.ProblemIncorrectResponse {
		t.Fatalf("order = %s %+v after an authorization failed, want invalid with the challenge's problem", ord.Status, ord.Error)
	}
	// The other authorization is untouched.
	if st := authz(t, s, o.AuthzIDs[1]).Status; st != acme.StatusPending {
		t.Fatalf("unrelated authorization is %s, want pending", st)
	}
}

// testConcurrentVerdicts: every authorization of an order succeeds at once,
// each verdict on its own handle (as workers do). Each verdict decides
// readiness after the others' authorizations are visible to it, so the
// last one always moves the order to ready; none may leave it pending.
func testConcurrentVerdicts(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	stores := handles(t, s, x, 4)
	a := newAccount(t, s)
	for round := range 5 {
		names := make([]string, 4)
		for i := range names {
			names[i] = fmt.Sprintf("n%d.r%d.verdicts.example.com", i, round)
		}
		o := newOrder(t, s, a, names...)
		var claimed []string
		for _, id := range o.AuthzIDs {
			c, ok, err := s.ChallengeClaim(ctx, authz(t, s, id).Challenges[0].ID)
			if err != nil || !ok {
				t.Fatalf("ChallengeClaim: %v %v", ok, err)
			}
			claimed = append(claimed, c.ID)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, id := range claimed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := stores[i%len(stores)].ChallengeVerdict(ctx, store.Verdict{ChallengeID: id, Status: acme.StatusValid}); err != nil {
					t.Errorf("ChallengeVerdict: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := order(t, s, o.ID).Status; got != acme.StatusReady {
			t.Fatalf("round %d: order is %s after all %d authorizations were validated at once, want ready", round, got, len(names))
		}
	}
}

// testLateVerdict: two challenges of one authorization answered at once.
// A late failure after a success does not undo it (the authorization, the
// order and the valid challenge stay); a failure first takes the other
// processing challenge with it, so the late success finds it decided.
func testLateVerdict(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	for _, firstValid := range []bool{true, false} {
		o := newOrder(t, s, a, fmt.Sprintf("late-%v.example.com", firstValid))
		az := authz(t, s, o.AuthzIDs[0])
		if len(az.Challenges) < 2 {
			t.Fatalf("authorization has %d challenges, want at least 2", len(az.Challenges))
		}
		c1, c2 := az.Challenges[0].ID, az.Challenges[1].ID
		for _, id := range []string{c1, c2} {
			if _, claimed, err := s.ChallengeClaim(ctx, id); err != nil || !claimed {
				t.Fatalf("ChallengeClaim(%s): claimed=%v err=%v", id, claimed, err)
			}
		}
		first, second := acme.StatusValid, acme.StatusInvalid
		if !firstValid {
			first, second = acme.StatusInvalid, acme.StatusValid
		}
		verdict := func(id string, st acme.Status) error {
			v := store.Verdict{ChallengeID: id, Status: st}
			if st == acme.StatusInvalid {
				v.Error = &acme.Problem{Type: acme.ProblemIncorrectResponse}
			}
			return s.ChallengeVerdict(ctx, v)
		}
		if err := verdict(c1, first); err != nil {
			t.Fatalf("first verdict: %v", err)
		}
		err := verdict(c2, second)
		if firstValid {
			if err != nil {
				t.Fatalf("a late failure on a still processing challenge: %v", err)
			}
			if st := challenge(t, s, c1).Status; st != acme.StatusValid {
				t.Errorf("the valid challenge became %s after a late failure", st)
			}
			if st := challenge(t, s, c2).Status; st != acme.StatusInvalid {
				t.Errorf("the late failure left its challenge %s", st)
			}
			if st := authz(t, s, az.ID).Status; st != acme.StatusValid {
				t.Errorf("authorization is %s after a late failure, want valid", st)
			}
			if st := order(t, s, o.ID).Status; st != acme.StatusReady {
				t.Errorf("order is %s after a late failure, want ready", st)
			}
			continue
		}
		wantErr(t, "a late success after the authorization failed", err, store.ErrConflict)
		if st := challenge(t, s, c2).Status; st != acme.StatusInvalid {
			t.Errorf("the sibling of a failed challenge is %s, want invalid", st)
		}
		if st := authz(t, s, az.ID).Status; st != acme.StatusInvalid {
			t.Errorf("authorization is %s, want invalid", st)
		}
		if st := order(t, s, o.ID).Status; st != acme.StatusInvalid {
			t.Errorf("order is %s, want invalid", st)
		}
	}
}

func testVerdictIsTerminal(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "terminal.example.com")
	az := authz(t, s, o.AuthzIDs[0])
	err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: az.Challenges[0].ID, Status: acme.StatusValid})
	wantErr(t, "verdict on a pending challenge", err, store.ErrConflict)
	if st := challenge(t, s, az.Challenges[0].ID).Status; st != acme.StatusPending {
		t.Fatalf("a refused verdict moved the challenge to %s", st)
	}
	c := validate(t, s, az.ID, acme.StatusValid)
	err = s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: c.ID, Status: acme.StatusInvalid,
		Error: &acme.Problem{Type: acme.ProblemConnection}})
	wantErr(t, "second verdict", err, store.ErrConflict)
	if st := challenge(t, s, c.ID).Status; st != acme.StatusValid {
		t.Fatalf("second verdict moved the challenge to %s", st)
	}
	if st := order(t, s, o.ID).Status; st != acme.StatusReady {
		t.Fatalf("second verdict moved the order to %s", st)
	}
	// A repeated POST of the valid challenge claims nothing.
	if got, claimed, err := s.ChallengeClaim(ctx, c.ID); err != nil || claimed || got.Status != acme.StatusValid {
		t.Fatalf("claiming a valid challenge: %+v claimed=%v err=%v", got, claimed, err)
	}
}

// testVerdictLeavesItsJob: a verdict commits the challenge, its
// authorization and its order together and writes nothing to the
// challenge_validate job: River completes it after the handler returns. A
// job run again after that (its worker died before River marked it) sees
// the challenge no longer processing, and a second verdict is refused.
func testVerdictLeavesItsJob(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "verdict-job.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if _, claimed, err := s.ChallengeClaim(ctx, cid); err != nil || !claimed {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: cid, Status: acme.StatusValid}); err != nil {
		t.Fatalf("ChallengeVerdict: %v", err)
	}
	if st := challenge(t, s, cid).Status; st != acme.StatusValid {
		t.Fatalf("challenge is %s after its verdict, want valid", st)
	}
	if st := authz(t, s, o.AuthzIDs[0]).Status; st != acme.StatusValid {
		t.Fatalf("authorization is %s after its challenge's verdict, want valid", st)
	}
	if st := order(t, s, o.ID).Status; st != acme.StatusReady {
		t.Fatalf("order is %s after its only authorization's verdict, want ready", st)
	}
	if n := jobsIn(t, x, jobs.KindChallengeValidate, "available"); n != 1 {
		t.Fatalf("%d available challenge_validate jobs after the verdict, want 1: the store must not touch the job", n)
	}
	// What a rescued job's handler reads first.
	tgt, err := s.ChallengeWithAuthz(ctx, cid)
	if err != nil || tgt.Challenge.Status != acme.StatusValid {
		t.Fatalf("ChallengeWithAuthz after the verdict: %+v, %v; want the challenge valid", tgt, err)
	}
	err = s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: cid, Status: acme.StatusInvalid})
	wantErr(t, "a rescued job's second verdict", err, store.ErrConflict)
}

// handles returns s and n-1 more stores on the same database, each with its
// own handle: separate processes, as far as SQLite's locking is concerned.
func handles(t *testing.T, s store.Store, x Extras, n int) []store.Store {
	out := []store.Store{s}
	for len(out) < n {
		out = append(out, x.Open(t, nil))
	}
	return out
}

// race runs fn from 16 goroutines spread over the handles and counts wins.
func race(t *testing.T, stores []store.Store, fn func(s store.Store) (bool, error)) int {
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			won, err := fn(stores[i%len(stores)])
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
			}
			if won {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(wins.Load())
}

func testChallengeClaimConcurrent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "race.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	wins := race(t, handles(t, s, x, 4), func(s store.Store) (bool, error) {
		c, claimed, err := s.ChallengeClaim(ctx, cid)
		if err == nil && c.Status != acme.StatusProcessing {
			return claimed, fmt.Errorf("claim returned a %s challenge", c.Status)
		}
		return claimed, err
	})
	if wins != 1 {
		t.Fatalf("%d of 16 concurrent claims won, want exactly 1", wins)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 1 {
		t.Fatalf("%d challenge_validate jobs after 16 claims, want 1", n)
	}
}

// testSignedOrders: a newOrder folded with its nonce writes the order and
// consumes the nonce together, or, when the nonce, the account, the clock
// it was drafted by or an authorization the ordinary path would reuse
// does not allow it, commits nothing (ErrUnfolded). SQLite does not fold.
func testSignedOrders(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	epoch, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := dbNow(t, s)
	expires := now.Add(time.Hour)
	a := newAccount(t, s)
	signed := func(nonce string) store.SignedUse {
		return store.SignedUse{Nonce: store.NonceUse{Nonce: nonce, Expires: expires, Epoch: epoch}, AccountID: a.ID, KeyJWK: a.KeyJWK}
	}
	orders := func() int {
		t.Helper()
		ids, _, err := s.OrdersByAccount(ctx, a.ID, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		return len(ids)
	}
	// An order that expires before the account's valid authorization
	// for reused.example.com, which the ordinary path would reuse.
	reused := readyOrder(t, s, a, "reused.example.com")
	spec := func(names ...string) store.NewOrder {
		o := orderSpec(t, s, a, names...)
		o.Expires = now.Add(30 * time.Minute)
		return o
	}
	if x.ProcessNonces {
		before := orders()
		_, err := s.OrderCreateSigned(ctx, signed(rnd(16)), spec("unfolded.example.com"), dbNow(t, s))
		wantErr(t, "a folded newOrder on a store that does not fold", err, store.ErrUnfolded)
		if n := orders() - before; n != 0 {
			t.Errorf("%d orders written by a fold that did not apply", n)
		}
		return
	}

	used := rnd(16)
	if fresh, err := consumeOne(ctx, s, used, expires); err != nil || !fresh {
		t.Fatalf("consuming a nonce: fresh %v, %v", fresh, err)
	}
	for _, tc := range []struct {
		name  string
		use   func() store.SignedUse
		order func() store.NewOrder
		clock func() time.Time
	}{
		{"a nonce used before", func() store.SignedUse { return signed(used) }, nil, nil},
		{"a nonce of another epoch", func() store.SignedUse { u := signed(rnd(16)); u.Nonce.Epoch++; return u }, nil, nil},
		{"a key the account no longer has", func() store.SignedUse {
			u := signed(rnd(16))
			u.KeyJWK = []byte(`{"kty":"OKP","crv":"Ed25519","x":"old"}`)
			return u
		}, nil, nil},
		{"another account's order", nil, func() store.NewOrder {
			o := spec("other.example.com")
			o.AccountID = newAccount(t, s).ID
			return o
		}, nil},
		{"a clock a minute fast", nil, nil, func() time.Time { return dbNow(t, s).Add(time.Minute) }},
		{"a clock a minute slow", nil, nil, func() time.Time { return dbNow(t, s).Add(-time.Minute) }},
		{"an authorization to reuse", nil, func() store.NewOrder { return spec("new.example.com", "reused.example.com") }, nil},
		{"an authorization reused", nil, func() store.NewOrder {
			o := spec("reused.example.com")
			o.Authzs[0] = authz(t, s, reused.AuthzIDs[0])
			return o
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, o, clock := signed(rnd(16)), spec("folded-not.example.com"), dbNow(t, s)
			if tc.use != nil {
				u = tc.use()
			}
			if tc.order != nil {
				o = tc.order()
			}
			if tc.clock != nil {
				clock = tc.clock()
			}
			before := orders()
			_, err := s.OrderCreateSigned(ctx, u, o, clock)
			wantErr(t, "the folded newOrder", err, store.ErrUnfolded)
			if n := orders() - before; n != 0 {
				t.Errorf("%d orders written by a fold that did not apply", n)
			}
			if u.Nonce.Nonce != used && u.Nonce.Epoch == epoch {
				// Nothing committed: the nonce is still unused.
				if fresh, err := consumeOne(ctx, s, u.Nonce.Nonce, expires); err != nil || !fresh {
					t.Errorf("the nonce was consumed by a fold that did not apply (fresh %v, %v)", fresh, err)
				}
			}
		})
	}

	// The fold that applies: the order as OrderCreate writes it, and its
	// nonce consumed.
	n := rnd(16)
	before := orders()
	o, err := s.OrderCreateSigned(ctx, signed(n), spec("folded.example.com", "*.folded.example.com"), dbNow(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if got := orders() - before; got != 1 {
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
	if fresh, err := consumeOne(ctx, s, n, expires); err != nil || fresh {
		t.Fatalf("the folded newOrder's nonce is still fresh (%v, %v): it could be replayed", fresh, err)
	}

	// An authorization validated by a method the order's profile does not
	// offer is none the ordinary path would reuse: the fold applies.
	dnsOnly := spec("reused.example.com")
	dnsOnly.Methods = []acme.ChallengeType{acme.ChallengeDNS01}
	o, err = s.OrderCreateSigned(ctx, signed(rnd(16)), dnsOnly, dbNow(t, s))
	if err != nil {
		t.Fatalf("a folded newOrder of a profile offering only dns-01, with an authorization validated by http-01: %v", err)
	}
	if o.AuthzIDs[0] == reused.AuthzIDs[0] || o.Status != acme.StatusPending {
		t.Errorf("the folded order is %s with authorization %s; want pending with a new one, not %s", o.Status, o.AuthzIDs[0], reused.AuthzIDs[0])
	}
}

// foldedKind is one kind of folded write (ChallengeClaimSigned,
// OrderFinalizeSigned) as testSignedClaims drives it.
type foldedKind struct {
	name    string
	job     string
	open    func(t *testing.T, a *store.Account, name string) string // a row the account may claim
	status  func(t *testing.T, id string) acme.Status
	signed  func(s store.Store, u store.SignedUse, id string) (acme.Status, error)
	claim   func(s store.Store, id string) (bool, error) // the ordinary claim
	claimed acme.Status
}

// testSignedClaims: a write folded with its nonce claims its row and
// consumes the nonce together, or, when the nonce, the account or the row
// does not allow it, commits nothing (ErrUnfolded). Racing ordinary and
// folded claims, one wins. SQLite does not fold.
func testSignedClaims(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	kinds := []foldedKind{{
		name: "challenge", job: jobs.KindChallengeValidate, claimed: acme.StatusProcessing,
		open: func(t *testing.T, a *store.Account, name string) string {
			return authz(t, s, newOrder(t, s, a, name).AuthzIDs[0]).Challenges[0].ID
		},
		status: func(t *testing.T, id string) acme.Status { return challenge(t, s, id).Status },
		signed: func(s store.Store, u store.SignedUse, id string) (acme.Status, error) {
			c, err := s.ChallengeClaimSigned(ctx, u, id)
			if err != nil {
				return "", err
			}
			return c.Status, nil
		},
		claim: func(s store.Store, id string) (bool, error) {
			_, claimed, err := s.ChallengeClaim(ctx, id)
			return claimed, err
		},
	}, {
		name: "order", job: jobs.KindSignerIssue, claimed: acme.StatusProcessing,
		open: func(t *testing.T, a *store.Account, name string) string {
			return readyOrder(t, s, a, name).ID
		},
		status: func(t *testing.T, id string) acme.Status { return order(t, s, id).Status },
		signed: func(s store.Store, u store.SignedUse, id string) (acme.Status, error) {
			o, err := s.OrderFinalizeSigned(ctx, u, id, "default", []byte("csr"), nil)
			if err != nil {
				return "", err
			}
			return o.Status, nil
		},
		claim: func(s store.Store, id string) (bool, error) {
			_, claimed, err := s.OrderFinalizeBegin(ctx, id, "default", []byte("csr"), nil)
			return claimed, err
		},
	}}
	if s.Folds() == x.ProcessNonces {
		t.Fatalf("Folds() = %v on a store whose nonces are the process's (%v): it folds exactly when they are the database's", s.Folds(), x.ProcessNonces)
	}
	epoch, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expires := dbNow(t, s).Add(time.Hour)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			a := newAccount(t, s)
			signed := func(nonce string) store.SignedUse {
				return store.SignedUse{Nonce: store.NonceUse{Nonce: nonce, Expires: expires, Epoch: epoch}, AccountID: a.ID, KeyJWK: a.KeyJWK}
			}
			if x.ProcessNonces {
				id := k.open(t, a, "unfolded-"+k.name+".example.com")
				_, err := k.signed(s, signed(rnd(16)), id)
				wantErr(t, "a folded write on a store that does not fold", err, store.ErrUnfolded)
				if st := k.status(t, id); st == k.claimed {
					t.Fatalf("the %s is %s after a fold that did not apply", k.name, st)
				}
				return
			}

			used := rnd(16)
			if fresh, err := consumeOne(ctx, s, used, expires); err != nil || !fresh {
				t.Fatalf("consuming a nonce: fresh %v, %v", fresh, err)
			}
			otherID := k.open(t, newAccount(t, s), "other-"+k.name+".example.com")
			claimedID := k.open(t, a, "claimed-"+k.name+".example.com")
			if won, err := k.claim(s, claimedID); err != nil || !won {
				t.Fatalf("claiming %s: won %v, %v", claimedID, won, err)
			}
			fresh := func(name string) func() string {
				return func() string { return k.open(t, a, name+"-"+k.name+".example.com") }
			}
			for _, tc := range []struct {
				name string
				use  func() store.SignedUse
				id   func() string
			}{
				{"a nonce used before", func() store.SignedUse { return signed(used) }, fresh("used")},
				{"a nonce of another epoch", func() store.SignedUse { u := signed(rnd(16)); u.Nonce.Epoch++; return u }, fresh("epoch")},
				{"a key the account no longer has", func() store.SignedUse {
					u := signed(rnd(16))
					u.KeyJWK = []byte(`{"kty":"OKP","crv":"Ed25519","x":"old"}`)
					return u
				}, fresh("key")},
				{"another account's", func() store.SignedUse { return signed(rnd(16)) }, func() string { return otherID }},
				{"claimed before", func() store.SignedUse { return signed(rnd(16)) }, func() string { return claimedID }},
				{"no such row", func() store.SignedUse { return signed(rnd(16)) }, func() string { return "nope" }},
			} {
				t.Run(tc.name, func(t *testing.T) {
					u, id := tc.use(), tc.id()
					jobsBefore := jobCount(t, x, k.job)
					var before acme.Status
					if id != "nope" {
						before = k.status(t, id)
					}
					_, err := k.signed(s, u, id)
					wantErr(t, "the folded write", err, store.ErrUnfolded)
					if id != "nope" {
						if st := k.status(t, id); st != before {
							t.Errorf("the %s went %s → %s in a fold that did not apply", k.name, before, st)
						}
					}
					if n := jobCount(t, x, k.job) - jobsBefore; n != 0 {
						t.Errorf("%d jobs queued by a fold that did not apply", n)
					}
					if u.Nonce.Nonce != used && u.Nonce.Epoch == epoch {
						// Nothing committed: the nonce is still unused.
						if fresh, err := consumeOne(ctx, s, u.Nonce.Nonce, expires); err != nil || !fresh {
							t.Errorf("the nonce was consumed by a fold that did not apply (fresh %v, %v)", fresh, err)
						}
					}
				})
			}

			// The fold that applies: claimed, queued, and its nonce consumed.
			n := rnd(16)
			id := k.open(t, a, "folded-"+k.name+".example.com")
			jobsBefore := jobCount(t, x, k.job)
			st, err := k.signed(s, signed(n), id)
			if err != nil {
				t.Fatal(err)
			}
			if st != k.claimed {
				t.Fatalf("the folded write returned a %s %s, want %s", k.name, st, k.claimed)
			}
			if got := jobCount(t, x, k.job) - jobsBefore; got != 1 {
				t.Fatalf("%d %s jobs queued, want 1", got, k.job)
			}
			if fresh, err := consumeOne(ctx, s, n, expires); err != nil || fresh {
				t.Fatalf("the folded write's nonce is still fresh (%v, %v): it could be replayed", fresh, err)
			}

			// Ordinary and folded claims racing on one row: one wins.
			id = k.open(t, a, "fold-race-"+k.name+".example.com")
			var i atomic.Int32
			wins := race(t, handles(t, s, x, 4), func(s store.Store) (bool, error) {
				if i.Add(1)%2 == 0 {
					return k.claim(s, id)
				}
				_, err := k.signed(s, signed(rnd(16)), id)
				if errors.Is(err, store.ErrUnfolded) {
					return false, nil
				}
				return err == nil, err
			})
			if wins != 1 {
				t.Fatalf("%d of 16 concurrent claims, half of them folded, won; want exactly 1", wins)
			}
		})
	}
}

func testOrderFinalizeConcurrent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "finalize-race.example.com")
	wins := race(t, handles(t, s, x, 4), func(s store.Store) (bool, error) {
		_, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("csr"), nil)
		return claimed, err
	})
	if wins != 1 {
		t.Fatalf("%d of 16 concurrent finalizations won, want exactly 1", wins)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 1 {
		t.Fatalf("%d signer_issue jobs after 16 finalizations, want 1", n)
	}
}

// testClaimEnqueueAtomic: a claim whose job cannot be queued is released,
// so the client's retry can claim again.
func testClaimEnqueueAtomic(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	broken := x.Open(t, failingInserter{})
	a := newAccount(t, s)
	o := newOrder(t, s, a, "queue-down.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if _, _, err := broken.ChallengeClaim(ctx, cid); !errors.Is(err, errQueueDown) {
		t.Fatalf("ChallengeClaim with a failing queue: %v, want %v", err, errQueueDown)
	}
	if st := challenge(t, s, cid).Status; st != acme.StatusPending {
		t.Fatalf("challenge is %s after its job failed to queue, want pending", st)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 0 {
		t.Fatalf("%d challenge_validate jobs, want 0", n)
	}
	if _, claimed, err := s.ChallengeClaim(ctx, cid); err != nil || !claimed {
		t.Fatalf("retrying the claim: claimed=%v err=%v", claimed, err)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 1 {
		t.Fatalf("%d challenge_validate jobs after the claim, want 1", n)
	}

	// A queue that sends nothing of its own: the swap goes out alone.
	silent := x.Open(t, silentInserter{})
	quiet := newOrder(t, s, a, "queue-silent.example.com")
	qid := authz(t, s, quiet.AuthzIDs[0]).Challenges[0].ID
	if c, claimed, err := silent.ChallengeClaim(ctx, qid); err != nil || !claimed || c.Status != acme.StatusProcessing {
		t.Fatalf("ChallengeClaim with a queue that sends nothing: %+v claimed=%v err=%v", c, claimed, err)
	}
	if st := challenge(t, s, qid).Status; st != acme.StatusProcessing {
		t.Fatalf("challenge is %s after a claim whose queue sent nothing, want processing", st)
	}

	ready := readyOrder(t, s, a, "finalize-queue-down.example.com")
	if _, _, err := broken.OrderFinalizeBegin(ctx, ready.ID, ready.Profile, []byte("csr"), nil); !errors.Is(err, errQueueDown) {
		t.Fatalf("OrderFinalizeBegin with a failing queue: %v, want %v", err, errQueueDown)
	}
	if got := order(t, s, ready.ID); got.Status != acme.StatusReady || got.CSR != nil {
		t.Fatalf("order is %s (csr %q) after its job failed to queue, want ready with no CSR", got.Status, got.CSR)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 0 {
		t.Fatalf("%d signer_issue jobs, want 0", n)
	}
}

// testClaimsAtOnce: many requests of one process claiming different
// challenges and finalizing different orders at once (on SQLite they share
// commits: store/sqlite/group.go) each get their claim and their one job,
// with nothing of one counted for another.
func testClaimsAtOnce(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	const n = 16
	var cids, ready []string
	for i := range n {
		o := newOrder(t, s, a, fmt.Sprintf("at-once-%d.example.com", i))
		cids = append(cids, authz(t, s, o.AuthzIDs[0]).Challenges[0].ID)
		ready = append(ready, readyOrder(t, s, a, fmt.Sprintf("at-once-ready-%d.example.com", i)).ID)
	}
	validateBefore, issueBefore := jobCount(t, x, jobs.KindChallengeValidate), jobCount(t, x, jobs.KindSignerIssue)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if c, claimed, err := s.ChallengeClaim(ctx, cids[i]); err != nil || !claimed || c.Status != acme.StatusProcessing {
				t.Errorf("ChallengeClaim %d: %+v claimed=%v err=%v", i, c, claimed, err)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if _, began, err := s.OrderFinalizeBegin(ctx, ready[i], "default", []byte(fmt.Sprintf("csr %d", i)), nil); err != nil || !began {
				t.Errorf("OrderFinalizeBegin %d: began=%v err=%v", i, began, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if st := challenge(t, s, cids[i]).Status; st != acme.StatusProcessing {
			t.Errorf("challenge %d is %s, want processing", i, st)
		}
		if o := order(t, s, ready[i]); o.Status != acme.StatusProcessing || string(o.CSR) != fmt.Sprintf("csr %d", i) {
			t.Errorf("order %d is %s with CSR %q, want processing with its own", i, o.Status, o.CSR)
		}
	}
	if got := jobCount(t, x, jobs.KindChallengeValidate) - validateBefore; got != n {
		t.Errorf("%d challenge_validate jobs for %d claims", got, n)
	}
	if got := jobCount(t, x, jobs.KindSignerIssue) - issueBefore; got != n {
		t.Errorf("%d signer_issue jobs for %d finalizations", got, n)
	}
}

// testClaimExpiredAuthz: a claim that loses its compare-and-swap queues
// nothing, although the job's insert may travel with the swap (sendAhead).
func testClaimExpiredAuthz(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	spec := orderSpec(t, s, a, "late.example.com")
	spec.Authzs[0].Expires = dbNow(t, s).Add(-time.Second)
	o, err := s.OrderCreate(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if c, claimed, err := s.ChallengeClaim(ctx, cid); err != nil || claimed || c.Status != acme.StatusPending {
		t.Fatalf("claiming a challenge of an expired authorization: %+v claimed=%v err=%v, want not claimed", c, claimed, err)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 0 {
		t.Fatalf("%d challenge_validate jobs after a lost claim, want 0", n)
	}
}

func testOrderFail(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "fail.example.com")
	wantErr(t, "OrderFail on a ready order", s.OrderFail(ctx, o.ID, acme.Problem{Type: acme.ProblemBadCSR}), store.ErrConflict)
	if _, _, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("csr"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.OrderFail(ctx, o.ID, acme.Problem{Type: acme.ProblemBadCSR, Detail: "key too small"}); err != nil {
		t.Fatalf("OrderFail: %v", err)
	}
	got := order(t, s, o.ID)
	if got.Status != acme.StatusInvalid || got.Error == nil || got.Error.Detail != "key too small" {
		t.Fatalf("failed order = %s %+v", got.Status, got.Error)
	}
	// A backend's rejection is terminal: never ready again.
	if _, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("csr"), nil); err != nil || claimed {
		t.Fatalf("finalizing a failed order: claimed=%v err=%v", claimed, err)
	}
}

func testCertificateSerialUnique(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o1 := readyOrder(t, s, a, "one.example.com")
	o2 := readyOrder(t, s, a, "two.example.com")
	mustIssue(t, s, o1, "abcdef01")
	wantErr(t, "second certificate with one serial", issue(t, s, o2, "abcdef01"), store.ErrConflict)
	if got := order(t, s, o2.ID); got.Status != acme.StatusProcessing || got.CertSerial != "" {
		t.Fatalf("order is %s with serial %q after its certificate conflicted, want processing with none", got.Status, got.CertSerial)
	}
	if c, err := s.CertificateBySerial(ctx, "abcdef01"); err != nil || c.OrderID != o1.ID {
		t.Fatalf("certificate = %+v, %v; want the first order's", c, err)
	}
}

func testCertificatesList(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a, b := newAccount(t, s), newAccount(t, s)
	for i, acct := range []*store.Account{a, a, b} {
		o := readyOrder(t, s, acct, fmt.Sprintf("host%d.example.com", i))
		mustIssue(t, s, o, fmt.Sprintf("%02x", i+1))
	}
	if _, err := s.Revoke(ctx, "02", 1, store.AuditEvent{Actor: "cli:test", Action: "revoke", Subject: "02"}); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	soon := dbNow(t, s).Add(24 * time.Hour)
	serials := func(f store.CertFilter) []string {
		t.Helper()
		list, _, err := s.CertificatesList(ctx, f, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range list {
			out = append(out, c.Serial)
		}
		return out
	}
	for name, tc := range map[string]struct {
		f    store.CertFilter
		want []string
	}{
		"all":         {store.CertFilter{}, []string{"03", "02", "01"}},
		"account":     {store.CertFilter{AccountID: a.ID}, []string{"02", "01"}},
		"name":        {store.CertFilter{Name: "host2.example.com"}, []string{"03"}},
		"revoked":     {store.CertFilter{Revoked: &yes}, []string{"02"}},
		"not revoked": {store.CertFilter{Revoked: &no}, []string{"03", "01"}},
		"expiring":    {store.CertFilter{ExpiringBefore: &soon}, nil},
	} {
		if got := serials(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("CertificatesList %s = %v, want %v", name, got, tc.want)
		}
	}
	page, next, err := s.CertificatesList(ctx, store.CertFilter{}, store.Page{Limit: 2})
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("first page: %d certificates, next %q, %v", len(page), next, err)
	}
	rest, next, err := s.CertificatesList(ctx, store.CertFilter{}, store.Page{After: next, Limit: 2})
	if err != nil || len(rest) != 1 || rest[0].Serial != "01" || next != "" {
		t.Fatalf("second page: %+v next %q %v", rest, next, err)
	}
	// One filtered certificate a page, as revocation.Service.Select reads
	// an account's.
	var walked []string
	p := store.Page{Limit: 1}
	for range 3 {
		page, next, err := s.CertificatesList(ctx, store.CertFilter{AccountID: a.ID}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			walked = append(walked, c.Serial)
		}
		if next == "" {
			break
		}
		p.After = next
	}
	if !slices.Equal(walked, []string{"02", "01"}) {
		t.Errorf("the account's certificates one a page: %v, want [02 01]", walked)
	}
}

func testOrdersList(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a, b := newAccount(t, s), newAccount(t, s)
	o1 := newOrder(t, s, a, "list1.example.com")
	o2 := readyOrder(t, s, a, "list2.example.com")
	o3 := newOrder(t, s, b, "list1.example.com")
	ids := func(f store.OrderFilter) []string {
		t.Helper()
		list, _, err := s.OrdersList(ctx, f, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range list {
			if len(o.AuthzIDs) == 0 {
				t.Errorf("listed order %s has no authorizations", o.ID)
			}
			out = append(out, o.ID)
		}
		return out
	}
	for name, tc := range map[string]struct {
		f    store.OrderFilter
		want []string
	}{
		"all":        {store.OrderFilter{}, []string{o3.ID, o2.ID, o1.ID}},
		"account":    {store.OrderFilter{AccountID: a.ID}, []string{o2.ID, o1.ID}},
		"identifier": {store.OrderFilter{Identifier: "list1.example.com"}, []string{o3.ID, o1.ID}},
		"status":     {store.OrderFilter{Status: acme.StatusReady}, []string{o2.ID}},
		"combined":   {store.OrderFilter{AccountID: b.ID, Status: acme.StatusReady}, nil},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("OrdersList %s = %v, want %v", name, got, tc.want)
		}
	}
}

func testAuthzDeactivate(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "deact.example.com")
	// A second order on the same authorization, being signed.
	spec := orderSpec(t, s, a, "deact.example.com")
	spec.Authzs = []*store.Authorization{{ID: o.AuthzIDs[0]}}
	signing, err := s.OrderCreate(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, claimed, err := s.OrderFinalizeBegin(ctx, signing.ID, signing.Profile, []byte("csr-der"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin = %v, %v", claimed, err)
	}
	az, err := s.AuthzDeactivate(ctx, o.AuthzIDs[0])
	if err != nil || az.Status != acme.StatusDeactivated {
		t.Fatalf("AuthzDeactivate = %+v, %v", az, err)
	}
	for _, id := range []string{o.ID, signing.ID} {
		if got := order(t, s, id); got.Status != acme.StatusInvalid || got.Error == nil {
			t.Fatalf("order %s using a deactivated authorization is %s (%v), want invalid with a problem", id, got.Status, got.Error)
		}
	}
	_, err = s.AuthzDeactivate(ctx, o.AuthzIDs[0])
	wantErr(t, "deactivating twice", err, store.ErrConflict)
}

func testRevoke(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "revoke.example.com")
	mustIssue(t, s, o, "beef")
	ev := store.AuditEvent{Actor: "cli:alice", Action: "revoke", Subject: "beef", Detail: "keyCompromise"}
	c, err := s.Revoke(ctx, "beef", 1, ev)
	if err != nil || c.RevokedAt == nil || c.RevocationReason != 1 {
		t.Fatalf("Revoke = %+v, %v", c, err)
	}
	revs, err := s.Revocations(ctx, "issuer-1")
	if err != nil || len(revs) != 1 || revs[0].Serial != "beef" || revs[0].Reason != 1 || !revs[0].RevokedAt.Equal(*c.RevokedAt) {
		t.Fatalf("Revocations = %+v, %v", revs, err)
	}
	if revs, err := s.Revocations(ctx, "other-issuer"); err != nil || len(revs) != 0 {
		t.Fatalf("another issuer has revocations %v (%v)", revs, err)
	}
	if n := jobCount(t, x, jobs.KindCRLGenerate); n != 1 {
		t.Fatalf("%d crl_generate jobs after a revocation, want 1", n)
	}
	evs, _, err := s.AuditList(ctx, store.Page{})
	if err != nil || len(evs) != 1 || evs[0].Actor != "cli:alice" || evs[0].Subject != "beef" || evs[0].At.IsZero() {
		t.Fatalf("audit after revocation = %+v, %v", evs, err)
	}
	_, err = s.Revoke(ctx, "beef", 4, ev)
	wantErr(t, "revoking twice", err, store.ErrConflict)
	if c, _ := s.CertificateBySerial(ctx, "beef"); c.RevocationReason != 1 {
		t.Fatalf("second revocation changed the reason to %d", c.RevocationReason)
	}
	if n := jobCount(t, x, jobs.KindCRLGenerate); n != 1 {
		t.Fatalf("%d crl_generate jobs after a refused revocation, want 1", n)
	}
}

// testRevokeQueue: a relay's certificate is revoked through its backend:
// RevokeQueue queues signer_revoke on the profile's queue it is given, and
// Revoke refuses it (no revocation row, no crl_generate: Hallmark signs no
// CRL for a remote issuer, and "crl_relay:up" is no River queue name).
func testRevokeQueue(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "relay.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
	}
	now := dbNow(t, s)
	if err := s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: "cafe", IssuerID: "relay:up", Profile: "old", DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		Names: []string{"relay.example.com"}, NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, "cafe", 4, store.AuditEvent{Actor: "cli:test", Action: "revoke", Subject: "cafe"}); err == nil || !strings.Contains(err.Error(), "publishes its own revocation status") {
		t.Fatalf("Revoke of a relay's certificate: %v, want refused", err)
	}
	if c, err := s.CertificateBySerial(ctx, "cafe"); err != nil || c.RevokedAt != nil {
		t.Fatalf("certificate after a refused Revoke = %+v, %v; want unrevoked", c, err)
	}
	if revs, err := s.Revocations(ctx, "relay:up"); err != nil || len(revs) != 0 {
		t.Fatalf("revocations of relay:up = %+v, %v; want none", revs, err)
	}
	id, err := s.RevokeQueue(ctx, "cafe", "upstream", 4, store.AuditEvent{Actor: "acme:" + a.ID, Action: "revoke", Subject: "cafe"})
	if err != nil {
		t.Fatal(err)
	}
	// Asked again while the job is outstanding: the same job, not a second.
	again, err := s.RevokeQueue(ctx, "cafe", "upstream", 4, store.AuditEvent{Actor: "acme:" + a.ID, Action: "revoke", Subject: "cafe"})
	if err != nil || again != id || id == 0 {
		t.Fatalf("RevokeQueue again while job %d is outstanding = job %d, %v; want the same job", id, again, err)
	}
	if n := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+jobs.KindSignerRevoke+"' AND queue = '"+jobs.ProfileQueue("upstream")+"'"); n != 1 {
		t.Fatalf("%d signer_revoke jobs on the upstream profile's queue, want 1", n)
	}
	// A key compromise reported while it waits joins it too, and the
	// backend is told keyCompromise, not the first request's reason.
	reasonOf := func(id int64) int64 {
		q := fmt.Sprintf("SELECT (args->>'reason')::bigint FROM river_job WHERE id = %d", id)
		if x.Dialect == "sqlite" {
			q = fmt.Sprintf("SELECT json_extract(args, '$.reason') FROM river_job WHERE id = %d", id)
		}
		return x.Int(t, q)
	}
	if r := reasonOf(id); r != 4 {
		t.Fatalf("the queued job's reason = %d, want 4", r)
	}
	joined, err := s.RevokeQueue(ctx, "cafe", "upstream", store.ReasonKeyCompromise, store.AuditEvent{Actor: "acme:certificate-key", Action: "revoke", Subject: "cafe"})
	if err != nil || joined != id {
		t.Fatalf("RevokeQueue with reason 1 while job %d is outstanding = job %d, %v; want the same job", id, joined, err)
	}
	if r := reasonOf(id); r != store.ReasonKeyCompromise {
		t.Fatalf("the queued job's reason after a key compromise joined it = %d, want 1", r)
	}
	if p, err := s.RevokeProgress(ctx, "cafe", id); err != nil || p.Revoked || p.Refused != nil {
		t.Fatalf("RevokeProgress before the backend answered = %+v, %v; want nothing yet", p, err)
	}
	// The backend's refusal, as River stores a job's recorded output (a
	// JSON text literal is JSONB to PostgreSQL's assignment and JSON to
	// SQLite's json functions alike).
	x.Exec(t, fmt.Sprintf(`UPDATE river_job SET metadata = '{"output": {"refused": {"type": "%s", "detail": "no"}}}' WHERE id = %d`, acme.ProblemUnauthorized, id))
	if p, err := s.RevokeProgress(ctx, "cafe", id); err != nil || p.Revoked || p.Refused == nil || p.Refused.Type != acme.ProblemUnauthorized || p.Refused.Detail != "no" {
		t.Fatalf("RevokeProgress after a refusal = %+v, %v; want the refusal", p, err)
	}
	if p, err := s.RevokeProgress(ctx, "cafe", id+1000); err != nil || p.Revoked || p.Refused != nil {
		t.Fatalf("RevokeProgress of another job = %+v, %v; want nothing: the refusal is job %d's", p, err, id)
	}
	if n, err := s.RevokedCount(ctx, "relay:up"); err != nil || n != 0 {
		t.Fatalf("RevokedCount(relay:up) before the backend's answer = %d, %v; want 0", n, err)
	}
	if err := s.RevokeRecorded(ctx, "cafe", 4, store.AuditEvent{Actor: "worker:1", Action: "revoke.backend"}); err != nil {
		t.Fatal(err)
	}
	// Revoked, with no revocation row: the count reads the certificates.
	if n, err := s.RevokedCount(ctx, "relay:up"); err != nil || n != 1 {
		t.Fatalf("RevokedCount(relay:up) = %d, %v; want 1", n, err)
	}
	if n, err := s.RevokedCount(ctx, "relay:other"); err != nil || n != 0 {
		t.Fatalf("RevokedCount(relay:other) = %d, %v; want 0", n, err)
	}
	if p, err := s.RevokeProgress(ctx, "cafe", id); err != nil || !p.Revoked {
		t.Fatalf("RevokeProgress after RevokeRecorded = %+v, %v; want revoked", p, err)
	}
	_, err = s.RevokeQueue(ctx, "cafe", "upstream", 4, store.AuditEvent{Actor: "x", Action: "revoke"})
	wantErr(t, "queueing revocation of a revoked certificate", err, store.ErrConflict)
}

func testCRLMonotonic(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	now := dbNow(t, s).Truncate(time.Second)
	crl := func(n int64) store.CRL {
		return store.CRL{IssuerID: "ca", Number: n, ThisUpdate: now, NextUpdate: now.Add(24 * time.Hour), DER: []byte{byte(n)}}
	}
	if n, err := s.CRLNextNumber(ctx, "ca"); err != nil || n != 1 {
		t.Fatalf("CRLNextNumber on none = %d, %v; want 1", n, err)
	}
	if err := s.CRLStore(ctx, crl(1)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "storing number 1 again", s.CRLStore(ctx, crl(1)), store.ErrConflict)
	if err := s.CRLStore(ctx, crl(5)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "storing a lower number", s.CRLStore(ctx, crl(3)), store.ErrConflict)
	if n, err := s.CRLNextNumber(ctx, "ca"); err != nil || n != 6 {
		t.Fatalf("CRLNextNumber = %d, %v; want 6", n, err)
	}
	latest, err := s.CRLLatest(ctx, "ca")
	if err != nil || latest.Number != 5 || !latest.ThisUpdate.Equal(now) || string(latest.DER) != "\x05" {
		t.Fatalf("CRLLatest = %+v, %v", latest, err)
	}
	if n, _ := s.CRLNextNumber(ctx, "other"); n != 1 {
		t.Fatalf("another issuer's next number is %d, want 1", n)
	}
}

// testLeases: the lease's expiry is on the database clock; a short ttl
// expires after a short wait measured on that clock, not on this host's.
func testLeases(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	other := x.Open(t, nil)
	lock := func(s store.Store, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.TryLock(ctx, "crl:issuer-1", holder, ttl)
		if err != nil {
			t.Fatalf("TryLock(%s): %v", holder, err)
		}
		return ok
	}
	if !lock(s, "a", time.Hour) {
		t.Fatal("a could not take a free lease")
	}
	if lock(other, "b", time.Hour) {
		t.Fatal("b took a live lease held by a")
	}
	if !lock(s, "a", time.Hour) {
		t.Fatal("a could not renew its own lease")
	}
	wantErr(t, "b releasing a's lease", other.Unlock(ctx, "crl:issuer-1", "b"), store.ErrLeaseLost)
	if err := s.Unlock(ctx, "crl:issuer-1", "a"); err != nil {
		t.Fatal(err)
	}
	if !lock(other, "b", 50*time.Millisecond) {
		t.Fatal("b could not take a released lease")
	}
	start := dbNow(t, s)
	for dbNow(t, s).Sub(start) < 60*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}
	if !lock(s, "a", time.Hour) {
		t.Fatal("a could not take b's expired lease")
	}
	wantErr(t, "b releasing a lease it lost", other.Unlock(ctx, "crl:issuer-1", "b"), store.ErrLeaseLost)
	if lock(other, "b", time.Hour) {
		t.Fatal("b renewed a lease it lost")
	}
}

func testAudit(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		ev := store.AuditEvent{Actor: "admin:bob", Action: "account.deactivate", Subject: fmt.Sprint(i), Detail: "d"}
		if i == 0 {
			ev.At = at
		}
		if err := s.AuditRecord(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	first, next, err := s.AuditList(ctx, store.Page{Limit: 2})
	if err != nil || len(first) != 2 || next == "" || first[0].Subject != "2" || first[1].Subject != "1" {
		t.Fatalf("first audit page = %+v next %q %v", first, next, err)
	}
	rest, next, err := s.AuditList(ctx, store.Page{After: next, Limit: 2})
	if err != nil || len(rest) != 1 || next != "" || rest[0].Subject != "0" || !rest[0].At.Equal(at) || rest[0].ID == 0 {
		t.Fatalf("second audit page = %+v next %q %v", rest, next, err)
	}
}

func testExpirePending(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	past := dbNow(t, s).Add(-time.Second)
	spec := orderSpec(t, s, a, "expired.example.com")
	spec.Expires = past
	spec.Authzs[0].Expires = past
	old, err := s.OrderCreate(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	live := newOrder(t, s, a, "live.example.com")
	n, err := s.ExpirePending(ctx)
	if err != nil || n != 2 {
		t.Fatalf("ExpirePending = %d, %v; want 2 (one authorization, one order)", n, err)
	}
	if st := authz(t, s, old.AuthzIDs[0]).Status; st != acme.StatusExpired {
		t.Errorf("expired authorization is %s, want expired", st)
	}
	if st := order(t, s, old.ID).Status; st != acme.StatusInvalid {
		t.Errorf("expired order is %s, want invalid (RFC 8555 §7.1.6)", st)
	}
	if st := order(t, s, live.ID).Status; st != acme.StatusPending {
		t.Errorf("live order is %s, want pending", st)
	}
	if n, err := s.ExpirePending(ctx); err != nil || n != 0 {
		t.Fatalf("second ExpirePending = %d, %v; want 0", n, err)
	}
}

func testStrandedChallenge(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "stranded.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if _, claimed, err := s.ChallengeClaim(ctx, cid); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	later := dbNow(t, s).Add(time.Minute)
	stranded := func(olderThan time.Time) []jobs.Subject {
		t.Helper()
		subs, err := s.Stranded(ctx, olderThan)
		if err != nil {
			t.Fatal(err)
		}
		return subs
	}
	if subs := stranded(later); len(subs) != 0 {
		t.Fatalf("Stranded = %v while the job is queued, want none", subs)
	}
	x.Exec(t, "DELETE FROM river_job")
	want := []jobs.Subject{{Kind: jobs.KindChallengeValidate, ID: cid}}
	if subs := stranded(later); !slices.Equal(subs, want) {
		t.Fatalf("Stranded = %v after the job was lost, want %v", subs, want)
	}
	if subs := stranded(dbNow(t, s).Add(-time.Minute)); len(subs) != 0 {
		t.Fatalf("Stranded with olderThan before the claim = %v, want none", subs)
	}
	if err := s.Requeue(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 1 {
		t.Fatalf("%d challenge_validate jobs after Requeue, want 1", n)
	}
	if subs := stranded(later); len(subs) != 0 {
		t.Fatalf("Stranded = %v after Requeue, want none", subs)
	}
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Detail: "validation could not run"}); err != nil || !moved {
		t.Fatalf("Abandon of a processing challenge = %v, %v; want true", moved, err)
	}
	c := challenge(t, s, cid)
	if c.Status != acme.StatusInvalid || c.Error == nil || c.Error.Type != acme.ProblemServerInternal {
		t.Fatalf("abandoned challenge = %s %+v, want invalid with serverInternal", c.Status, c.Error)
	}
	if st := order(t, s, o.ID).Status; st != acme.StatusInvalid {
		t.Fatalf("order of an abandoned challenge is %s, want invalid", st)
	}
	// Abandoning a subject that already has its verdict changes nothing,
	// and says so.
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Detail: "again"}); err != nil || moved {
		t.Fatalf("abandoning twice = %v, %v; want false, nil (nothing left to abandon)", moved, err)
	}
	if c := challenge(t, s, cid); c.Error == nil || c.Error.Detail != "validation could not run" {
		t.Fatalf("a second Abandon rewrote the problem to %+v", c.Error)
	}
	wantErr(t, "requeueing a finished challenge", s.Requeue(ctx, want[0]), store.ErrConflict)
}

func testStrandedOrder(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	spec := orderSpec(t, s, a, "stranded-order.example.com")
	spec.Profile = "hsm"
	o, err := s.OrderCreate(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, s, o.AuthzIDs[0], acme.StatusValid)
	if _, claimed, err := s.OrderFinalizeBegin(ctx, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	x.Exec(t, "DELETE FROM river_job")
	subs, err := s.Stranded(ctx, dbNow(t, s).Add(time.Minute))
	want := []jobs.Subject{{Kind: jobs.KindSignerIssue, ID: o.ID}}
	if err != nil || !slices.Equal(subs, want) {
		t.Fatalf("Stranded = %v, %v; want %v", subs, err, want)
	}
	if err := s.Requeue(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	// The requeued job goes to the queue of the order's profile.
	if n := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = 'signer_issue' AND queue = '"+jobs.ProfileQueue("hsm")+"'"); n != 1 {
		t.Fatalf("%d signer_issue jobs on the hsm profile's queue after Requeue, want 1", n)
	}
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Type: acme.ProblemServerInternal, Detail: "signing could not run"}); err != nil || !moved {
		t.Fatalf("Abandon of a processing order = %v, %v; want true", moved, err)
	}
	got := order(t, s, o.ID)
	if got.Status != acme.StatusInvalid || got.Error == nil || got.Error.Type != acme.ProblemServerInternal {
		t.Fatalf("abandoned order = %s %+v", got.Status, got.Error)
	}
	if moved, err := s.Abandon(ctx, want[0], acme.Problem{Detail: "again"}); err != nil || moved {
		t.Fatalf("abandoning a failed order again = %v, %v; want false, nil", moved, err)
	}
}

func testMigrationsIdempotent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	applied, err := x.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("migrating a migrated database applied %v, %v; want nothing", applied, err)
	}
	st, err := x.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files, err := migrations.Files(st.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pending) != 0 || len(st.Applied) != len(files) || st.Current() != st.Latest || st.Latest != files[len(files)-1].Version {
		t.Fatalf("status = %+v, want every one of %d migrations applied", st, len(files))
	}
}

func testMigrationsRefuseNewer(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	x.Exec(t, "INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_from_the_future.up.sql')")
	_, err := x.Migrate(ctx)
	if !errors.Is(err, store.ErrTooNew) {
		t.Fatalf("migrating a newer database: %v, want store.ErrTooNew", err)
	}
	if !strings.Contains(err.Error(), "upgrade") || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("the refusal %q does not tell the operator to upgrade to version 9999", err)
	}
	st, err := x.Status(ctx)
	if !errors.Is(err, store.ErrTooNew) || st.Current() != 9999 {
		t.Fatalf("status of a newer database = %+v, %v; want version 9999 and store.ErrTooNew", st, err)
	}
}
