package open_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hallmark-ca/hallmark/store"
)

// BenchmarkSettled is one tick of a SQLite frontend's verdict poll
// (open.SQLitePollEvery): which of n processing challenges have their
// verdict, in one read on the read-only pool, for 1 and 500 requests
// waiting. It costs only while a request waits.
//
//	go test ./store/open -run '^$' -bench Settled
func BenchmarkSettled(b *testing.B) {
	for _, n := range []int{1, 500} {
		b.Run(fmt.Sprintf("sqlite/%d", n), func(b *testing.B) {
			s, acct := benchStore(b, "sqlite")
			ctx := context.Background()
			ids := make([]string, n)
			for i := range ids {
				o, err := s.OrderCreate(ctx, store.SignedUse{}, benchOrder(acct))
				if err != nil {
					b.Fatal(err)
				}
				az, err := s.AuthzByID(ctx, o.AuthzIDs[0])
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = az.Challenges[0].ID
				if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, ids[i]); err != nil || !claimed {
					b.Fatalf("ChallengeClaim = %v, %v", claimed, err)
				}
			}
			st := s.(interface {
				Settled(ctx context.Context, ids []string) ([]string, error)
			})
			for b.Loop() {
				if done, err := st.Settled(ctx, ids); err != nil || len(done) != 0 {
					b.Fatalf("Settled = %d settled, %v; want none", len(done), err)
				}
			}
		})
	}
}
