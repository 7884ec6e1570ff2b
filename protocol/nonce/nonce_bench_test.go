package nonce_test

import (
	"context"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/nonce"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// BenchmarkIssue mints nonces (no database: a nonce authenticates itself).
// BenchmarkRedeem checks and consumes them on a real store one at a time:
// one statement and one commit each, the cost of a lone request (concurrent
// ones share a batch, BenchmarkRedeemParallel).
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

// BenchmarkRedeemParallel redeems from 32 goroutines at once, as a busy
// frontend does: the redemptions share batches (protocol/nonce/batch.go).
func BenchmarkRedeemParallel(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			s := benchService(b, kind)
			ctx := context.Background()
			b.SetParallelism(16) // 16 × GOMAXPROCS goroutines
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Redeem(ctx, s.Issue()); err != nil {
						b.Error(err)
						return
					}
				}
			})
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
