package sqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/postgres"
	"github.com/hallmark-ca/hallmark/store/sqlite"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestBatch: a batch runs its statements in order and tells what each did;
// one that fails stops it with the error exec would give (here a unique
// violation, store.ErrConflict), and the transaction keeps nothing, whether
// the batch began it or joined it.
func TestBatch(t *testing.T) {
	t.Parallel()
	conns := map[string]func(t *testing.T) (sqlstore.Conn, *sqlstore.Dialect){
		"sqlite": func(t *testing.T) (sqlstore.Conn, *sqlstore.Dialect) {
			db, err := sqlite.Open(strings.TrimPrefix(testdb.SQLite(t), "sqlite:"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return sqlite.Conn(db), sqlstore.SQLite
		},
		"postgres": func(t *testing.T) (sqlstore.Conn, *sqlstore.Dialect) {
			pool, err := postgres.Connect(t.Context(), testdb.Postgres(t), 2)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return postgres.Conn(pool), sqlstore.Postgres
		},
	}
	for kind, connect := range conns {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, d := connect(t)
			inTx := func(fn func(tx sqlstore.Tx) error) error { return c.InTx(ctx, fn) }
			exec := func(tx sqlstore.Tx, q string, args ...any) {
				t.Helper()
				if _, err := tx.Exec(ctx, d.SQL(q), args...); err != nil {
					t.Fatal(err)
				}
			}
			stmt := func(q string, args ...any) sqlstore.Stmt { return sqlstore.Stmt{SQL: q, Args: args} }
			keys := func() string {
				var ks []string
				err := inTx(func(tx sqlstore.Tx) error {
					rows, err := tx.Query(ctx, `SELECT k FROM kv ORDER BY k`)
					if err != nil {
						return err
					}
					defer rows.Close()
					for rows.Next() {
						var k string
						if err := rows.Scan(&k); err != nil {
							return err
						}
						ks = append(ks, k)
					}
					return rows.Err()
				})
				if err != nil {
					t.Fatal(err)
				}
				return strings.Join(ks, ",")
			}
			if err := inTx(func(tx sqlstore.Tx) error {
				exec(tx, `CREATE TABLE kv (k text PRIMARY KEY, v integer NOT NULL)`)
				return nil
			}); err != nil {
				t.Fatal(err)
			}

			// The batch begins the transaction; every statement succeeds.
			var b, none int64
			err := inTx(func(tx sqlstore.Tx) error {
				n, err := sqlstore.Send(ctx, c, d, tx, []sqlstore.Stmt{
					stmt(`INSERT INTO kv (k, v) VALUES ($1, $2)`, "a", 1),
					stmt(`INSERT INTO kv (k, v) VALUES ($1, $2), ($3, $4)`, "b", 2, "c", 3),
					stmt(`UPDATE kv SET v = v + 10 WHERE k <> $1`, "a"),
					{SQL: `SELECT v FROM kv WHERE k = $1`, Args: []any{"b"}, Dest: []any{&b}},
					{SQL: `SELECT v FROM kv WHERE k = $1`, Args: []any{"zz"}, Dest: []any{&none}},
					stmt(`DELETE FROM kv WHERE k = $1`, "zz"),
				})
				if want := []int64{1, 2, 2, 1, 0, 0}; err != nil || !reflect.DeepEqual(n, want) {
					t.Errorf("batch = %v, %v; want %v", n, err, want)
				}
				return err
			})
			if err != nil || b != 12 || keys() != "a,b,c" {
				t.Fatalf("after the batch: %v, b = %d, keys %q; want b = 12 and keys a,b,c", err, b, keys())
			}

			// A duplicate key in the middle, in a transaction begun before
			// and in one the batch begins: ErrConflict, the statements
			// before it reported, nothing kept.
			for _, before := range []bool{true, false} {
				err := inTx(func(tx sqlstore.Tx) error {
					if before {
						exec(tx, `INSERT INTO kv (k, v) VALUES ('d', 4)`)
					}
					n, err := sqlstore.Send(ctx, c, d, tx, []sqlstore.Stmt{
						stmt(`INSERT INTO kv (k, v) VALUES ($1, $2)`, "e", 5),
						stmt(`INSERT INTO kv (k, v) VALUES ($1, $2)`, "a", 6),
						stmt(`INSERT INTO kv (k, v) VALUES ($1, $2)`, "f", 7),
					})
					if !reflect.DeepEqual(n, []int64{1}) {
						t.Errorf("before=%v: the failed batch reported %v, want [1] (the statement before the failure)", before, n)
					}
					return err
				})
				if !errors.Is(err, store.ErrConflict) {
					t.Errorf("before=%v: a duplicate key in a batch: %v, want ErrConflict", before, err)
				}
				if got := keys(); got != "a,b,c" {
					t.Errorf("before=%v: keys %q after the failed transaction, want a,b,c", before, got)
				}
			}

			// The first statement fails.
			err = inTx(func(tx sqlstore.Tx) error {
				n, err := sqlstore.Send(ctx, c, d, tx, []sqlstore.Stmt{
					stmt(`INSERT INTO kv (k, v) VALUES ($1, $2)`, "b", 1),
					stmt(`INSERT INTO kv (k, v) VALUES ($1, $2)`, "g", 1),
				})
				if len(n) != 0 {
					t.Errorf("a batch failing at once reported %v", n)
				}
				return err
			})
			if !errors.Is(err, store.ErrConflict) || keys() != "a,b,c" {
				t.Errorf("a batch failing at its first statement: %v, keys %q; want ErrConflict and a,b,c", err, keys())
			}

			// Nothing to send.
			if err := inTx(func(tx sqlstore.Tx) error {
				n, err := sqlstore.Send(ctx, c, d, tx, nil)
				if n != nil || err != nil {
					t.Errorf("an empty batch = %v, %v", n, err)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOrderIssuedSwap: OrderIssued stores a certificate only on the order
// it moves from processing to valid. Any other order is ErrConflict (or
// ErrNotFound when missing) and nothing of the call is kept.
func TestOrderIssuedSwap(t *testing.T) {
	dialects(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		acct := account(t, s, t.Name())
		exp := time.Now().Add(time.Hour)
		order := func(name string, finalize bool) *store.Order {
			t.Helper()
			az := pendingAuthz(name, exp)
			az.Status = acme.StatusValid
			o, err := s.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: exp,
				Identifiers: []acme.Identifier{{Type: acme.IdentifierDNS, Value: name}}, Authzs: []*store.Authorization{az}})

			if err != nil {
				t.Fatal(err)
			}
			if finalize {
				if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
					t.Fatalf("OrderFinalizeBegin = %v, %v", claimed, err)
				}
			}
			return o
		}
		issue := func(o *store.Order, serial, account, profile string) error {
			return s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{Serial: serial, IssuerID: "i",
				AccountID: account, Profile: profile, Names: []string{"x.example", "y.example"}, NotBefore: exp, NotAfter: exp}})
		}
		status := func(o *store.Order) (acme.Status, string) {
			t.Helper()
			got, err := s.OrderByID(ctx, o.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.Status, got.CertSerial
		}
		noCert := func(serial string) {
			t.Helper()
			if _, err := s.CertificateBySerial(ctx, serial); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("certificate %s: %v, want ErrNotFound", serial, err)
			}
		}

		if err := issue(&store.Order{ID: "nope"}, "01", "", ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("OrderIssued on a missing order: %v, want ErrNotFound", err)
		}
		noCert("01")

		ready := order("ready.example", false)
		if err := issue(ready, "02", "", ""); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "it is ready, not processing") {
			t.Errorf("OrderIssued on a ready order: %v, want ErrConflict saying it is ready", err)
		}
		if st, serial := status(ready); st != acme.StatusReady || serial != "" {
			t.Errorf("the ready order is now %s with serial %q", st, serial)
		}
		noCert("02")

		// The order's account and profile by default.
		o := order("issued.example", true)
		if err := issue(o, "03", "", ""); err != nil {
			t.Fatal(err)
		}
		c, err := s.CertificateBySerial(ctx, "03")
		if err != nil || c.OrderID != o.ID || c.AccountID != acct.ID || c.Profile != "default" ||
			!reflect.DeepEqual(c.Names, []string{"x.example", "y.example"}) || c.IssuedAt.IsZero() {
			t.Fatalf("certificate 03 = %+v, %v", c, err)
		}
		// Again, with the same serial or another: the order is valid.
		for _, serial := range []string{"03", "04"} {
			if err := issue(o, serial, "", ""); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "it is valid, not processing") {
				t.Errorf("OrderIssued(%s) on a valid order: %v, want ErrConflict saying it is valid", serial, err)
			}
		}
		if st, serial := status(o); st != acme.StatusValid || serial != "03" {
			t.Errorf("the issued order is now %s with serial %q, want valid with 03", st, serial)
		}
		noCert("04")

		// A serial already stored: the swap is undone.
		dup := order("dup.example", true)
		if err := issue(dup, "03", "", ""); !errors.Is(err, store.ErrConflict) {
			t.Errorf("OrderIssued with a stored serial: %v, want ErrConflict", err)
		}
		if st, serial := status(dup); st != acme.StatusProcessing || serial != "" {
			t.Errorf("the order whose serial was taken is now %s with serial %q, want processing", st, serial)
		}
		if c, err := s.CertificateBySerial(ctx, "03"); err != nil || c.OrderID != o.ID {
			t.Errorf("certificate 03 = %+v, %v; want still the first order's", c, err)
		}

		// Account and profile given by the caller win.
		if err := issue(dup, "05", "acct-x", "short"); err != nil {
			t.Fatal(err)
		}
		if c, err := s.CertificateBySerial(ctx, "05"); err != nil || c.AccountID != "acct-x" || c.Profile != "short" || c.OrderID != dup.ID {
			t.Errorf("certificate 05 = %+v, %v; want account acct-x, profile short", c, err)
		}
	})
}
