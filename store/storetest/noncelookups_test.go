package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testNonceLookups: a use's Lookup reads, in the nonce's round trip, what
// the store's own read of that row returns — an order, an authorization
// with its challenges, a challenge with its authorization, a certificate —
// and store.ErrNotFound for a row that does not exist. An ID or account ID
// no row can have (a NUL, invalid UTF-8) finds nothing and fails nothing:
// the batch answers everyone else in it.
func testNonceLookups(t *testing.T, s store.Store, x Extras) {
	f := newLookupFixture(t, s)
	f.inBatchAndAlone(t)
	f.besideCorruptRow(t, x)
	f.besideUnreadableAccount(t, x)
}

// lookupFixture is testNonceLookups' account, its rows, and a lookup of
// each kind with what the store's own read answers.
type lookupFixture struct {
	s       store.Store
	ctx     context.Context
	a       *store.Account
	acct    string // a.ID
	epoch   int64
	expires time.Time
	tests   []lookupCase
}

type lookupCase struct {
	name   string
	acct   string
	lookup store.Lookup
	want   any // nil: store.ErrNotFound; noAnswer: nothing read
}

func newLookupFixture(t *testing.T, s store.Store) lookupFixture {
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
	tests := []lookupCase{
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
	return lookupFixture{s: s, ctx: ctx, a: a, acct: a.ID, epoch: e, expires: expires, tests: tests}
}

// use is a use of nonce n by account acct with lookup l.
func (f lookupFixture) use(n, acct string, l store.Lookup) store.NonceUse {
	return store.NonceUse{Nonce: n, Expires: f.expires, AccountID: acct, Epoch: f.epoch, Lookup: l}
}

func (f lookupFixture) check(t *testing.T, name, acct string, got store.NonceUsed, want any) {
	t.Helper()
	if !got.Fresh {
		t.Errorf("%s: nonce not fresh", name)
	}
	if wantAcct := acct == f.acct; (got.Account != nil) != wantAcct {
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

// inBatchAndAlone: one batch of all the lookups, and each alone
// (PostgreSQL answers a batch of one with a statement of its own).
func (f lookupFixture) inBatchAndAlone(t *testing.T) {
	var uses []store.NonceUse
	for i, tc := range f.tests {
		uses = append(uses, f.use(fmt.Sprintf("lookup-%d", i), tc.acct, tc.lookup))
	}
	// A replay in the same batch is refused before anything it read
	// matters: it is answered nothing.
	uses = append(uses, f.use("lookup-0", f.acct, f.tests[0].lookup))
	got, err := f.s.NonceConsume(f.ctx, uses)
	if err != nil || len(got) != len(uses) {
		t.Fatalf("NonceConsume = %d answers, %v; want %d", len(got), err, len(uses))
	}
	for i, tc := range f.tests {
		f.check(t, "in a batch: "+tc.name, tc.acct, got[i], tc.want)
	}
	if r := got[len(f.tests)]; r.Fresh || r.Found != nil || r.FoundErr != nil {
		t.Errorf("the replay in the batch: fresh %v found %v, %v; want refused with nothing", r.Fresh, r.Found, r.FoundErr)
	}
	for i, tc := range f.tests {
		got, err := f.s.NonceConsume(f.ctx, []store.NonceUse{f.use(fmt.Sprintf("lookup-alone-%d", i), tc.acct, tc.lookup)})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s alone: %v, %v", tc.name, got, err)
		}
		f.check(t, "alone: "+tc.name, tc.acct, got[0], tc.want)
	}
}

// besideCorruptRow: a row that cannot be read (its stored problem is not
// JSON) fails the lookup that reads it, and nothing else in the batch.
func (f lookupFixture) besideCorruptRow(t *testing.T, x Extras) {
	bad := newOrder(t, f.s, f.a, "corrupt.example.com")
	badCh := authz(t, f.s, bad.AuthzIDs[0]).Challenges[0].ID
	x.Exec(t, "UPDATE challenges SET error = 'not json' WHERE id = '"+badCh+"'")
	got, err := f.s.NonceConsume(f.ctx, []store.NonceUse{
		f.use("lookup-corrupt", f.acct, store.Lookup{Kind: store.LookupChallenge, ID: badCh}),
		f.use("lookup-beside-corrupt", f.acct, f.tests[0].lookup),
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("a batch with a corrupt row: %v, %v; want both answered", got, err)
	}
	if got[0].Found != nil || got[0].FoundErr == nil || errors.Is(got[0].FoundErr, store.ErrNotFound) {
		t.Errorf("the corrupt row's lookup = %+v, %v; want its read error", got[0].Found, got[0].FoundErr)
	}
	f.check(t, "beside a corrupt row", f.acct, got[1], f.tests[0].want)
}

// besideUnreadableAccount: so does an account whose row cannot be read
// (its contact list is not JSON): its use is answered with AccountErr, the
// others as usual, in a batch and alone.
func (f lookupFixture) besideUnreadableAccount(t *testing.T, x Extras) {
	broken := newAccount(t, f.s)
	x.Exec(t, "UPDATE accounts SET contact = 'not json' WHERE id = '"+broken.ID+"'")
	for _, batch := range [][]string{{"broken", "fine"}, {"broken"}} {
		var uses []store.NonceUse
		for _, who := range batch {
			id := f.acct
			if who == "broken" {
				id = broken.ID
			}
			uses = append(uses, f.use(fmt.Sprintf("lookup-acct-%d-%s", len(batch), who), id, f.tests[0].lookup))
		}
		got, err := f.s.NonceConsume(f.ctx, uses)
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
			f.check(t, "beside an unreadable account", f.acct, got[1], f.tests[0].want)
		}
	}
}

// noAnswer is testNonceLookups' want for a lookup the store leaves
// unread.
type noAnswer struct{}
