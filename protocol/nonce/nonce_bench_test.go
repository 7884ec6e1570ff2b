package nonce_test

import (
	"context"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/nonce"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// BenchmarkIssue mints nonces (no database: a nonce authenticates itself).
// BenchmarkRedeem checks and consumes them on a real store: one insert
// into the consumed set and one commit per ACME POST.
//
//	go test ./protocol/nonce -run '^$' -bench . -benchtime 2s
func BenchmarkIssue(b *testing.B) {
	s := benchService(b, "sqlite")
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Issue()
	}
}

func BenchmarkRedeem(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			s := benchService(b, kind)
			ctx := context.Background()
			for b.Loop() {
				if err := s.Redeem(ctx, s.Issue()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchService(b *testing.B, kind string) *nonce.Service {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testdb.Open(b, kind)
	s, err := nonce.New(ctx, db.Store, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
