package sqlstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestDeactivateRacingReuseLeavesNoReadyOrder: on PostgreSQL an
// AuthzDeactivate that runs while an OrderCreate reusing the same
// authorization is between its checks and its COMMIT must not leave the
// new order ready on a deactivated authorization (OrderFinalizeBegin would
// claim it and a certificate would be signed on it). OrderCreate holds a
// share lock on the authorization, so the deactivation waits for the order
// to commit and then invalidates it with the authorization's other orders.
// A trigger sleeping after the order turns ready (test instrumentation)
// holds OrderCreate's transaction open while the deactivation starts.
func TestDeactivateRacingReuseLeavesNoReadyOrder(t *testing.T) {
	t.Parallel()
	url := testdb.Postgres(t)
	s := testdb.OpenURL(t, url).Store
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(context.Background())

	a := account(t, s, "race")
	first := readyOrderOf(t, s, a, "race.example.com")
	authzID := first.AuthzIDs[0]
	for _, q := range []string{
		`CREATE FUNCTION slow_ready() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$`,
		`CREATE TRIGGER slow_ready AFTER UPDATE ON orders FOR EACH ROW WHEN (NEW.status = 'ready' AND OLD.status = 'pending') EXECUTE FUNCTION slow_ready()`,
	} {
		if _, err := raw.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	spec := store.NewOrder{AccountID: a.ID, Profile: "default", Expires: first.Expires,
		Identifiers: first.Identifiers, Authzs: []*store.Authorization{{ID: authzID}}}
	var wg sync.WaitGroup
	var second *store.Order
	var createErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		second, createErr = s.OrderCreate(ctx, store.SignedUse{}, spec)
	}()
	time.Sleep(300 * time.Millisecond) // OrderCreate is in the trigger's sleep
	deact, err := s.AuthzDeactivate(ctx, authzID)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if deact.Status != acme.StatusDeactivated {
		t.Fatalf("authorization is %s after AuthzDeactivate", deact.Status)
	}
	if createErr != nil {
		t.Logf("OrderCreate refused: %v", createErr)
		return
	}
	o, err := s.OrderByID(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != acme.StatusInvalid {
		t.Errorf("order %s reusing authorization %s is %s after the authorization was deactivated, want invalid", o.ID, authzID, o.Status)
	}
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || claimed {
		t.Errorf("OrderFinalizeBegin on it: claimed=%v err=%v; want not claimed", claimed, err)
	}
}

// readyOrderOf creates an order for name and validates its authorization.
func readyOrderOf(t *testing.T, s store.Store, a *store.Account, name string) *store.Order {
	t.Helper()
	ctx := context.Background()
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: a.ID, Profile: "default", Expires: now.Add(time.Hour),
		Identifiers: []acme.Identifier{{Type: acme.IdentifierDNS, Value: name}},
		Authzs:      []*store.Authorization{pendingAuthz(name, now.Add(time.Hour))}})

	if err != nil {
		t.Fatal(err)
	}
	az, err := s.AuthzByID(ctx, o.AuthzIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[0].ID)
	if err != nil || !claimed {
		t.Fatalf("ChallengeClaim: %v %v", claimed, err)
	}
	if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: c.ID, Status: acme.StatusValid}); err != nil {
		t.Fatal(err)
	}
	if o, err = s.OrderByID(ctx, o.ID); err != nil || o.Status != acme.StatusReady {
		t.Fatalf("order %+v, %v; want ready", o, err)
	}
	return o
}
