package sqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// dialects runs fn on a fresh migrated store of each dialect.
func dialects(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, testdb.Open(t, kind).Store)
		})
	}
}

func account(t testing.TB, s store.Store, name string) *store.Account {
	t.Helper()
	a, err := s.AccountCreate(context.Background(), &store.Account{
		KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + name + `"}`), Thumbprint: "thumb-" + name, TermsAgreed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func pendingAuthz(name string, exp time.Time) *store.Authorization {
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: name}
	return &store.Authorization{Identifier: id.Base(), Wildcard: id.IsWildcard(), Expires: exp,
		Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}, {Type: acme.ChallengeDNS01}, {Type: acme.ChallengeTLSALPN01}}}
}

// orderedAuthz creates an account and an order for name with one pending
// authorization, and returns the account and that authorization as read.
func orderedAuthz(t testing.TB, s store.Store, acctName, name string) (*store.Account, *store.Authorization) {
	t.Helper()
	ctx := context.Background()
	acct := account(t, s, acctName)
	exp := time.Now().Add(time.Hour)
	o, err := s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: exp,
		Identifiers: []acme.Identifier{{Type: acme.IdentifierDNS, Value: name}}, Authzs: []*store.Authorization{pendingAuthz(name, exp)}})

	if err != nil {
		t.Fatal(err)
	}
	az, err := s.AuthzByID(ctx, o.AuthzIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	return acct, az
}

// TestOrderCreateReturnsWhatIsStored: OrderCreate builds its answer
// instead of reading the order back, so the answer must be exactly what
// OrderByID reads: times in UTC to the microsecond, statuses, IDs in order.
func TestOrderCreateReturnsWhatIsStored(t *testing.T) {
	dialects(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		acct := account(t, s, t.Name())
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		// Nanoseconds and a zone the database does not keep.
		exp := time.Now().In(zone).Add(time.Hour + 123456789*time.Nanosecond)
		nb := exp.Add(-30*time.Minute + 999*time.Nanosecond)
		dns := func(v string) acme.Identifier { return acme.Identifier{Type: acme.IdentifierDNS, Value: v} }

		// A valid authorization to reuse.
		first, err := s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: exp,
			Identifiers: []acme.Identifier{dns("reuse.example")}, Authzs: []*store.Authorization{pendingAuthz("reuse.example", exp)}})

		if err != nil {
			t.Fatal(err)
		}
		az, err := s.AuthzByID(ctx, first.AuthzIDs[0])
		if err != nil || len(az.Challenges) != 3 {
			t.Fatalf("AuthzByID = %+v, %v", az, err)
		}
		for i, c := range az.Challenges {
			if c.Type != pendingAuthz("x", exp).Challenges[i].Type || c.AuthzID != az.ID || c.Status != acme.StatusPending {
				t.Fatalf("challenge %d = %+v", i, c)
			}
		}
		if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[1].ID); err != nil || !claimed {
			t.Fatalf("ChallengeClaim = %v, %v", claimed, err)
		}
		if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: az.Challenges[1].ID, Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
		born := pendingAuthz("born.example", exp)
		born.Status = acme.StatusValid

		for _, tc := range []struct {
			name   string
			o      store.NewOrder
			status acme.Status
		}{
			{"new", store.NewOrder{Identifiers: []acme.Identifier{dns("a.example"), dns("*.b.example"), dns("a.example")},
				NotBefore: &nb, Replaces: "abc.def",
				Authzs: []*store.Authorization{pendingAuthz("a.example", exp), pendingAuthz("*.b.example", exp)}}, acme.StatusPending},
			{"reused", store.NewOrder{Identifiers: []acme.Identifier{dns("reuse.example")},
				Authzs: []*store.Authorization{{ID: az.ID}}}, acme.StatusReady},
			{"reused and new", store.NewOrder{Identifiers: []acme.Identifier{dns("c.example"), dns("reuse.example")},
				Authzs: []*store.Authorization{pendingAuthz("c.example", exp), {ID: az.ID}}}, acme.StatusPending},
			{"born valid", store.NewOrder{Identifiers: []acme.Identifier{dns("born.example")}, NotAfter: &nb,
				Authzs: []*store.Authorization{born}}, acme.StatusReady},
			{"no authorizations", store.NewOrder{Identifiers: []acme.Identifier{}}, acme.StatusReady},
		} {
			tc.o.AccountID, tc.o.Profile, tc.o.Expires = acct.ID, "default", exp
			got, err := s.OrderCreate(ctx, store.SignedUse{}, tc.o)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			read, err := s.OrderByID(ctx, got.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, read) {
				t.Errorf("%s: OrderCreate returned\n%+v\nOrderByID reads\n%+v", tc.name, got, read)
			}
			if got.Status != tc.status || len(got.AuthzIDs) != len(tc.o.Authzs) {
				t.Errorf("%s: order is %s with %d authorizations, want %s with %d", tc.name, got.Status, len(got.AuthzIDs), tc.status, len(tc.o.Authzs))
			}
			list, _, err := s.OrdersList(ctx, store.OrderFilter{AccountID: acct.ID}, store.Page{Limit: 1})
			if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], read) {
				t.Errorf("%s: OrdersList = %+v, %v; want %+v", tc.name, list, err, read)
			}
		}

		other := account(t, s, t.Name()+"-other")
		_, err = s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: other.ID, Profile: "default", Expires: exp,
			Identifiers: []acme.Identifier{dns("reuse.example")}, Authzs: []*store.Authorization{{ID: az.ID}}})

		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("reusing another account's authorization: %v, want ErrNotFound", err)
		}
		_, err = s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: exp,
			Identifiers: []acme.Identifier{dns("reuse.example")}, Authzs: []*store.Authorization{{ID: "nope"}}})

		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("reusing a missing authorization: %v, want ErrNotFound", err)
		}
	})
}

// TestAuthzWithoutChallenges: the LEFT JOIN keeps an authorization that
// has no challenges.
func TestAuthzWithoutChallenges(t *testing.T) {
	dialects(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		acct := account(t, s, t.Name())
		a, err := s.AuthzCreate(ctx, &store.Authorization{AccountID: acct.ID, Status: acme.StatusValid,
			Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "bare.example"}, Expires: time.Now().Add(time.Hour)}, store.OrderLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != acme.StatusValid || a.Challenges != nil || a.Identifier.Value != "bare.example" || a.AccountID != acct.ID {
			t.Fatalf("authorization = %+v", a)
		}
		got, err := s.AuthzsReusable(ctx, acct.ID, []store.AuthzKey{{Identifier: a.Identifier}}, nil, time.Now())
		if err != nil || !reflect.DeepEqual(got, []*store.Authorization{a}) {
			t.Fatalf("AuthzsReusable = %+v, %v; want %+v", got, err, a)
		}
	})
}

// TestChallengeWithAuthz: the worker's one read gives what the three
// separate reads gave.
func TestChallengeWithAuthz(t *testing.T) {
	dialects(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		acct, az := orderedAuthz(t, s, t.Name(), "*.v.example")
		ch, _, err := s.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[1].ID)
		if err != nil || ch.Status != acme.StatusProcessing {
			t.Fatalf("ChallengeClaim = %+v, %v", ch, err)
		}
		got, err := s.ChallengeWithAuthz(ctx, ch.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := store.ChallengeAuthz{Challenge: *ch, Authz: *az, Thumbprint: acct.Thumbprint}
		want.Authz.Challenges = nil
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("ChallengeWithAuthz =\n%+v\nwant\n%+v", *got, want)
		}
		if _, err := s.ChallengeWithAuthz(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ChallengeWithAuthz of a missing challenge: %v, want ErrNotFound", err)
		}
	})
}

// BenchmarkValidationRead is what the worker reads before validating a
// challenge: one statement, against the three reads it replaced.
func BenchmarkValidationRead(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		s := testdb.Open(b, kind).Store
		ctx := context.Background()
		_, az := orderedAuthz(b, s, "bench-"+kind, "v.example")
		id := az.Challenges[0].ID
		b.Run(kind+"/one", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ChallengeWithAuthz(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind+"/three", func(b *testing.B) {
			for b.Loop() {
				c, err := s.(*sqlstore.Store).ChallengeByID(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				a, err := s.AuthzByID(ctx, c.AuthzID)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.AccountByID(ctx, a.AccountID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
