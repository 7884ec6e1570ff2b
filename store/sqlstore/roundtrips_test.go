package sqlstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// counting is a Conn that counts the store's round trips to the database:
// each statement, each batch, and COMMIT of each transaction. Statements
// River runs on the transaction (inserting and completing jobs) go around
// it and are not counted.
type counting struct {
	sqlstore.Conn
	n atomic.Int64
}

func (c *counting) InTx(ctx context.Context, fn func(sqlstore.Tx) error) error {
	// COMMIT; on PostgreSQL BEGIN travels with the first statement
	// (store/postgres lazyTx).
	c.n.Add(1)
	return c.Conn.InTx(ctx, func(tx sqlstore.Tx) error { return fn(countingTx{tx, &c.n}) })
}

func (c *counting) Autocommit(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return c.Conn.(sqlstore.Autocommitter).Autocommit(ctx, func(tx sqlstore.Tx) error { return fn(countingTx{tx, &c.n}) })
}

type countingTx struct {
	sqlstore.Tx
	n *atomic.Int64
}

func (t countingTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	t.n.Add(1)
	return t.Tx.Exec(ctx, q, args...)
}

// Batch is one round trip, whatever it holds.
func (t countingTx) Batch(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, error) {
	t.n.Add(1)
	return t.Tx.Batch(ctx, stmts)
}

// BatchCommit carries the COMMIT that InTx counted: no round trip more.
func (t countingTx) BatchCommit(ctx context.Context, stmts []sqlstore.Stmt) ([]int64, error) {
	return t.Tx.(interface {
		BatchCommit(context.Context, []sqlstore.Stmt) ([]int64, error)
	}).BatchCommit(ctx, stmts)
}

func (t countingTx) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	t.n.Add(1)
	return t.Tx.Query(ctx, q, args...)
}

// TestIssuanceRoundTrips counts the store's round trips on PostgreSQL for
// each store call of one issuance (one name, three challenge types), and
// fails when one costs more than it does now.
func TestIssuanceRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.Postgres(t)
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	pool, err := postgres.Connect(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := &counting{Conn: postgres.Conn(pool)}
	s := sqlstore.New(c, sqlstore.Postgres, jobs.NewPostgres(pool).Inserter())

	acct := account(t, s, t.Name())
	exp := time.Now().Add(time.Hour)
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: "rt.example"}
	var (
		o  *store.Order
		az *store.Authorization
		ch *store.Challenge
	)
	for _, step := range []struct {
		name string
		max  int64
		call func() error
	}{
		{"Now", 1, func() error { _, err := s.Now(ctx); return err }},
		{"AuthzsReusable (none)", 1, func() error {
			found, err := s.AuthzsReusable(ctx, acct.ID, []store.AuthzKey{{Identifier: id}}, nil, exp)
			if err == nil && found[0] != nil {
				t.Fatal("AuthzsReusable found one")
			}
			return err
		}},
		{"OrderCreate", 1, func() (err error) {
			o, err = s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: exp,
				Identifiers: []acme.Identifier{id}, Authzs: []*store.Authorization{pendingAuthz(id.Value, exp)}})

			return err
		}},
		{"OrderByID", 1, func() (err error) { _, err = s.OrderByID(ctx, o.ID); return err }},
		{"AuthzByID", 1, func() (err error) { az, err = s.AuthzByID(ctx, o.AuthzIDs[0]); return err }},
		{"ChallengeByID", 1, func() (err error) { _, err = s.ChallengeByID(ctx, az.Challenges[0].ID); return err }},
		{"ChallengeClaim", 2, func() (err error) {
			ch, _, err = s.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[0].ID)
			return err
		}},
		{"ChallengeWithAuthz", 1, func() (err error) { _, err = s.ChallengeWithAuthz(ctx, ch.ID); return err }},
		{"ChallengeVerdict (valid)", 2, func() error {
			return s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: ch.ID, Status: acme.StatusValid})
		}},
		{"OrderFinalizeBegin", 2, func() (err error) {
			_, _, err = s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil)
			return err
		}},
		{"OrderIssued", 1, func() error {
			return s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{Serial: "0abc", IssuerID: "i",
				Names: []string{id.Value}, NotBefore: exp, NotAfter: exp}})
		}},
		{"AuthzsReusable (100 names, one found)", 1, func() error {
			keys := make([]store.AuthzKey, 100)
			for i := range keys {
				keys[i] = store.AuthzKey{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: fmt.Sprintf("n%d.%s", i, id.Value)}}
			}
			keys[50].Identifier = id
			found, err := s.AuthzsReusable(ctx, acct.ID, keys, nil, exp.Add(-time.Minute))
			for i, a := range found {
				if (a != nil) != (i == 50) {
					t.Fatalf("AuthzsReusable found %+v for key %d", a, i)
				}
			}
			return err
		}},
	} {
		before := c.n.Load()
		if err := step.call(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		n := c.n.Load() - before
		t.Logf("%-26s %d round trips", step.name, n)
		if n > step.max {
			t.Errorf("%s took %d round trips, want at most %d", step.name, n, step.max)
		}
	}
}
