package nonce_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/nonce"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestRealStore runs two frontends, each with its own handle on one real
// SQLite file. On SQLite the consumed set lives in each process
// (store/sqlstore/memnonces.go; SQLite is for one frontend per file): a
// nonce redeems once, at the frontend that minted it. Another frontend,
// like this one restarted, refuses it with badNonce, and accepts the nonce
// that refusal carries.
func TestRealStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoReplicas(t, "sqlite:"+filepath.Join(t.TempDir(), "hallmark.db"))
	wantBadNonce := func(what string, err error, detail string) {
		t.Helper()
		var ae *acme.Error
		if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemBadNonce || !strings.Contains(ae.Problem.Detail, detail) {
			t.Fatalf("%s = %v, want badNonce %q", what, err, detail)
		}
	}

	n := a.Issue()
	wantBadNonce("A's nonce at B", b.Redeem(ctx, n), "earlier nonce epoch")
	if err := a.Redeem(ctx, n); err != nil {
		t.Fatalf("A's nonce refused at A: %v", err)
	}
	wantBadNonce("A's nonce at A again", a.Redeem(ctx, n), "nonce has already been used")
	if err := b.Redeem(ctx, b.Issue()); err != nil {
		t.Fatalf("B's own nonce refused at B: %v", err)
	}
}

// TestCrashResetPostgres: what a PostgreSQL crash does to the unlogged
// nonce tables — TRUNCATE both — done by hand, between two replicas. No
// nonce from before is accepted again, and both replicas recover from the
// nonce their refusal carried.
func TestCrashResetPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.Postgres(t)
	a, b := twoReplicas(t, url)
	used, fromB := a.Issue(), b.Issue()
	if err := b.Redeem(ctx, used); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `TRUNCATE nonces_consumed, nonce_epoch`); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]string{"consumed before": used, "minted before": fromB} {
		err := a.Redeem(ctx, n)
		var ae *acme.Error
		if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemBadNonce || !strings.Contains(ae.Problem.Detail, "reset") {
			t.Fatalf("nonce %s the reset = %v, want badNonce saying the store was reset", name, err)
		}
	}
	if err := b.Redeem(ctx, a.Issue()); err != nil {
		t.Fatalf("A's nonce after its refusal refused at B: %v", err)
	}
	if err := b.Redeem(ctx, used); err == nil {
		t.Fatal("B accepted a nonce consumed before the reset")
	}
	if err := a.Redeem(ctx, b.Issue()); err != nil {
		t.Fatalf("B's nonce after its refusal refused at A: %v", err)
	}
}

// twoReplicas migrates the database at url and returns two nonce services,
// each on a handle of its own, as two frontends would have.
func twoReplicas(t *testing.T, url string) (a, b *nonce.Service) {
	t.Helper()
	ctx := context.Background()
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	service := func() *nonce.Service {
		db, err := open.Open(ctx, url, 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		s, err := nonce.New(ctx, db.Store, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return service(), service()
}
