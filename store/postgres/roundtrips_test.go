package postgres_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestWriteRoundTrips: the writes on a certificate's path cost the round
// trips they are built for. Creating an order is one (BEGIN, its rows and
// COMMIT in one batch); claiming a challenge or an order for finalizing is
// one (BEGIN, the claim, River's insert, its notification and COMMIT),
// and wakes the workers with exactly one notification (River's own,
// arriving after the COMMIT, is not sent again); a verdict is two (BEGIN,
// the lock of the orders and the challenge's swap, then the rest with
// COMMIT); storing the certificate is one. A verdict and a certificate
// stored are each announced to the frontends once (VerdictChannel), in
// the same round trip. Each round trip at one request
// at a time costs a process wake-up.
func TestWriteRoundTrips(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.Postgres(t)
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := postgres.New(pool, jobs.NewPostgres(pool).Inserter())
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.WithoutCancel(ctx))
	if _, err := listener.Exec(ctx, `LISTEN "public.river_insert"`); err != nil {
		t.Fatal(err)
	}
	announced, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer announced.Close(context.WithoutCancel(ctx))
	if _, err := announced.Exec(ctx, "LISTEN "+sqlstore.VerdictChannel); err != nil {
		t.Fatal(err)
	}
	wantAnnounced := func(name, subject string) {
		t.Helper()
		if err := wantNotification(ctx, announced, subject); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := wantNotification(ctx, announced, ""); err != nil {
			t.Errorf("%s: a second announcement: %v", name, err)
		}
	}
	wantOneNotification := func(name, queue string) {
		t.Helper()
		if err := wantNotification(ctx, listener, fmt.Sprintf(`{"queue": %q}`, queue)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := wantNotification(ctx, listener, ""); err != nil {
			t.Errorf("%s: a second notification: %v", name, err)
		}
	}

	acct, err := s.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"roundtrips"}`), Thumbprint: "roundtrips", TermsAgreed: true})
	if err != nil {
		t.Fatal(err)
	}
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	no := store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: now.Add(time.Hour),
		Identifiers: []acme.Identifier{{Type: acme.IdentifierDNS, Value: "trips.example"}},
		Authzs: []*store.Authorization{{AccountID: acct.ID, Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "trips.example"},
			Status: acme.StatusPending, Expires: now.Add(time.Hour),
			Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01, Token: "tok-trips", Status: acme.StatusPending}}}},
		// Pausing on: its check rides in the order's own round trip.
		Pause: store.PauseRule{After: 7 * 24 * time.Hour, MinFailures: 10}}

	count := func(name string, want int64, fn func() error) {
		t.Helper()
		before := rt.n.Load()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := rt.n.Load() - before; got != want {
			t.Errorf("%s took %d round trips, want %d", name, got, want)
		}
	}
	// Twice: River asks the server's version once per driver, on the
	// first insert, with a query of its own.
	for i := range 2 {
		no.Authzs[0].Challenges[0].Token = fmt.Sprintf("tok-trips-%d", i)
		no.Authzs[0].ID, no.Authzs[0].Challenges[0].ID = "", ""
		var o *store.Order
		count("OrderCreate", 1, func() (err error) { o, err = s.OrderCreate(ctx, store.SignedUse{}, no); return err })
		a, err := s.AuthzByID(ctx, o.AuthzIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		// A claim is one round trip: its swap, River's insert and
		// notification, and the COMMIT (lazyTx.commitWithInsert).
		trips := int64(1)
		if i == 0 {
			trips = 2
		}
		// The second claim's job carries its request's origin (River's
		// metadata): the same insert.
		cctx := ctx
		if i == 1 {
			cctx = origin.NewContext(ctx, &origin.Origin{RequestID: "rid-trips", ClientAddr: "192.0.2.1"})
		}
		count("ChallengeClaim", trips, func() error {
			_, claimed, err := s.ChallengeClaim(cctx, store.SignedUse{}, a.Challenges[0].ID)
			if err == nil && !claimed {
				t.Error("the challenge was not claimed")
			}
			return err
		})
		wantOneNotification("ChallengeClaim", jobs.QueueValidate)
		// A verdict is one round trip: its statements find the
		// authorization and orders themselves (sqlstore.verdict).
		count("ChallengeVerdict", 1, func() error {
			return s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: a.Challenges[0].ID, Status: acme.StatusValid})
		})
		wantAnnounced("ChallengeVerdict", a.Challenges[0].ID)
		count("OrderFinalizeBegin", 1, func() error {
			_, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil)
			if err == nil && !claimed {
				t.Error("the order was not claimed")
			}
			return err
		})
		wantOneNotification("OrderFinalizeBegin", jobs.ProfileQueue(o.Profile))
		// Its trail event (the second time) rides in the same batch.
		in := store.Issued{OrderID: o.ID, Certificate: store.Certificate{Serial: fmt.Sprintf("0abc%d", i),
			IssuerID: "i", Names: []string{"trips.example"}, NotBefore: now, NotAfter: now.Add(time.Hour)}}
		if i == 1 {
			in.Trail = &store.AuditEvent{Actor: "acme:" + acct.ID, Action: store.ActionCertificateIssued, Subject: in.Certificate.Serial,
				Trail: true, Origin: origin.Origin{RequestID: "rid-trips", ClientAddr: "192.0.2.1", UserAgent: "ua"}}
		}
		count("OrderIssued", 1, func() error { return s.OrderIssued(ctx, in) })
		wantAnnounced("OrderIssued", o.ID)
	}

	// A challenge POST or a finalize folded with its nonce is one round
	// trip too: the nonce, the account's check, the swap, River's insert
	// and notification, and the COMMIT.
	epoch, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	no.Authzs[0].Challenges[0].Token = "tok-trips-folded"
	no.Authzs[0].ID, no.Authzs[0].Challenges[0].ID = "", ""
	o, err := s.OrderCreate(ctx, store.SignedUse{}, no)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.AuthzByID(ctx, o.AuthzIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	use := store.SignedUse{Nonce: store.NonceUse{Nonce: "nonce-trips-folded", Expires: now.Add(time.Hour), Epoch: epoch},
		AccountID: acct.ID, KeyJWK: acct.KeyJWK}
	count("ChallengeClaim with its nonce", 1, func() error {
		_, won, err := s.ChallengeClaim(ctx, use, a.Challenges[0].ID)
		return cmp.Or(err, lostErr(won))
	})
	wantOneNotification("ChallengeClaim with its nonce", jobs.QueueValidate)
	if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: a.Challenges[0].ID, Status: acme.StatusValid}); err != nil {
		t.Fatal(err)
	}
	use.Nonce.Nonce = "nonce-trips-finalize"
	count("OrderFinalizeBegin with its nonce", 1, func() error {
		_, won, err := s.OrderFinalizeBegin(ctx, use, o.ID, o.Profile, []byte("csr"), nil)
		return cmp.Or(err, lostErr(won))
	})
	wantOneNotification("OrderFinalizeBegin with its nonce", jobs.ProfileQueue(o.Profile))
}

// lostErr is an error for a claim that did not win.
func lostErr(won bool) error {
	if won {
		return nil
	}
	return errors.New("the claim did not win")
}
