package nonce_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/nonce"
	"github.com/hallmark-ca/hallmark/store/open"
)

// TestRealStore runs two "replicas", each with its own handle on one real
// SQLite file, as two frontends on one host would: they share the key, a
// nonce from one redeems once at the other, and never again at either.
func TestRealStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "hallmark.db")
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
	a, b := service(), service()

	n := a.Issue()
	if err := b.Redeem(ctx, n); err != nil {
		t.Fatalf("nonce from replica A refused at B: %v", err)
	}
	for name, s := range map[string]*nonce.Service{"A": a, "B": b} {
		err := s.Redeem(ctx, n)
		var ae *acme.Error
		if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemBadNonce || ae.Problem.Detail != "nonce has already been used" {
			t.Fatalf("second redeem at %s = %v, want badNonce \"nonce has already been used\"", name, err)
		}
	}
	if err := a.Redeem(ctx, b.Issue()); err != nil {
		t.Fatalf("nonce from B refused at A: %v", err)
	}
}
