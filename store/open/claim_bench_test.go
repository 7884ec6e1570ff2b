package open_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// BenchmarkOrderCreate is newOrder's write: an order with one
// authorization and its http-01 and dns-01 challenges, in one transaction.
// BenchmarkChallengeClaim is a challenge POST's write: the compare-and-swap
// pending → processing and the challenge_validate job inserted in the same
// transaction (claim + enqueue). BenchmarkChallengeVerdict is a
// validation's write: the verdict, with its authorization and order. All
// on a real SQLite file and a fresh PostgreSQL database, one commit per
// operation, as a request makes.
//
//	go test ./store/open -run '^$' -bench . -benchtime 2s
func BenchmarkOrderCreate(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			s, acct := benchStore(b, kind)
			ctx := context.Background()
			for b.Loop() {
				if _, err := s.OrderCreate(ctx, store.SignedUse{}, benchOrder(acct)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkChallengeClaim(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			s, challenges := benchChallenges(b, kind, false)
			ctx := context.Background()
			b.ResetTimer()
			for _, id := range challenges {
				if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, id); err != nil || !claimed {
					b.Fatalf("ChallengeClaim = %v, %v", claimed, err)
				}
			}
		})
	}
}

// BenchmarkChallengeClaimConcurrent is BenchmarkChallengeClaim from 16
// goroutines per CPU at once (32 on two cores), as a busy frontend makes
// them: on SQLite the claims that queue while one commits share the next
// commit (store/sqlite/group.go); on PostgreSQL concurrent commits share
// WAL flushes. ns/op is wall time per claim, all goroutines together.
func BenchmarkChallengeClaimConcurrent(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			s, challenges := benchChallenges(b, kind, false)
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := challenges[next.Add(1)-1]
					if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, id); err != nil || !claimed {
						b.Errorf("ChallengeClaim = %v, %v", claimed, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkChallengePOST is a challenge POST's store work, both ways:
// "ordinary" consumes the nonce with the account and the challenge read
// in one batch (NonceConsume), then claims (ChallengeClaim); "folded"
// does both in one transaction (ChallengeClaim with its nonce,
// protocol/claimnow.go). Back to back, one at a time.
func BenchmarkChallengePOST(b *testing.B) {
	for _, run := range []string{"sqlite/ordinary", "sqlite/folded", "postgres/ordinary", "postgres/folded"} {
		kind, how, _ := strings.Cut(run, "/")
		b.Run(run, func(b *testing.B) {
			s, challenges := benchChallenges(b, kind, false)
			ctx := context.Background()
			epoch, err := s.NonceEpoch(ctx)
			if err != nil {
				b.Fatal(err)
			}
			az, err := s.ChallengeWithAuthz(ctx, challenges[0])
			if err != nil {
				b.Fatal(err)
			}
			acct, err := s.AccountByID(ctx, az.Authz.AccountID)
			if err != nil {
				b.Fatal(err)
			}
			expires := time.Now().Add(time.Hour)
			b.ResetTimer()
			for _, id := range challenges {
				n := store.NonceUse{Nonce: rnd(), Expires: expires, Epoch: epoch}
				if how == "folded" {
					if _, won, err := s.ChallengeClaim(ctx, store.SignedUse{Nonce: n, AccountID: acct.ID, KeyJWK: acct.KeyJWK}, id); err != nil || !won {
						b.Fatal(won, err)
					}
					continue
				}
				n.AccountID, n.Lookup = acct.ID, store.Lookup{Kind: store.LookupChallenge, ID: id}
				if got, err := s.NonceConsume(ctx, []store.NonceUse{n}); err != nil || !got[0].Fresh {
					b.Fatalf("NonceConsume = %+v, %v", got, err)
				}
				if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, id); err != nil || !claimed {
					b.Fatalf("ChallengeClaim = %v, %v", claimed, err)
				}
			}
		})
	}
}

// BenchmarkChallengeVerdict is a validation's write: the verdict on a
// processing challenge, moving its authorization and its order with it,
// in one transaction.
func BenchmarkChallengeVerdict(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			s, challenges := benchChallenges(b, kind, true)
			ctx := context.Background()
			b.ResetTimer()
			for _, id := range challenges {
				if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: id, Status: acme.StatusValid}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchChallenges is a store of kind with b.N new orders, and the first
// challenge of each: pending, or claimed (processing) when claim is set.
func benchChallenges(b *testing.B, kind string, claim bool) (store.Store, []string) {
	b.Helper()
	s, acct := benchStore(b, kind)
	ctx := context.Background()
	challenges := make([]string, b.N)
	for i := range challenges {
		o, err := s.OrderCreate(ctx, store.SignedUse{}, benchOrder(acct))
		if err != nil {
			b.Fatal(err)
		}
		az, err := s.AuthzByID(ctx, o.AuthzIDs[0])
		if err != nil {
			b.Fatal(err)
		}
		challenges[i] = az.Challenges[0].ID
		if !claim {
			continue
		}
		if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, challenges[i]); err != nil || !claimed {
			b.Fatalf("ChallengeClaim = %v, %v", claimed, err)
		}
	}
	return s, challenges
}

func benchStore(b *testing.B, kind string) (store.Store, *store.Account) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testdb.Open(b, kind)
	acct, err := db.Store.AccountCreate(ctx, &store.Account{
		KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rnd() + `"}`), Thumbprint: rnd(), TermsAgreed: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	return db.Store, acct
}

func benchOrder(acct *store.Account) store.NewOrder {
	exp := time.Now().Add(time.Hour)
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: "b" + rnd()[:12] + ".example.com"}
	return store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: exp, Identifiers: []acme.Identifier{id},
		Authzs: []*store.Authorization{{Identifier: id, Expires: exp,
			Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}, {Type: acme.ChallengeDNS01}}}}}
}

func rnd() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// BenchmarkOrderIssued is the issuing worker's write: the certificate and
// the order's move to valid in one transaction, without and with its
// trail event (store.Issued.Trail), which rides in the same batch.
//
//	go test ./store/open -run '^$' -bench OrderIssued -benchtime 300x
func BenchmarkOrderIssued(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, trail := range []bool{false, true} {
			name := kind + "/no-trail"
			if trail {
				name = kind + "/trail"
			}
			b.Run(name, func(b *testing.B) {
				s, orders := benchProcessing(b, kind)
				ctx := context.Background()
				now := time.Now()
				b.ResetTimer()
				for i, id := range orders {
					in := store.Issued{OrderID: id, Certificate: store.Certificate{Serial: rnd()[:32], IssuerID: "issuer-1",
						DER: make([]byte, 800), ChainPEM: make([]byte, 2000), Names: []string{"n" + rnd()[:8] + ".example.com"},
						NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour)}}
					if trail {
						in.Trail = &store.AuditEvent{Actor: "acme:a", Action: store.ActionCertificateIssued, Subject: in.Certificate.Serial,
							Detail: "order " + id + ", profile default, names n.example.com, issuer issuer-1; worker w1", Trail: true,
							Origin: origin.Origin{RequestID: rnd()[:16], ClientAddr: "192.0.2.1", UserAgent: "lego-cli/4.25.0 xenolf-acme/4.25.0"}}
					}
					if err := s.OrderIssued(ctx, in); err != nil {
						b.Fatalf("order %d: %v", i, err)
					}
				}
			})
		}
	}
}

// benchProcessing is a store of kind with b.N orders finalized (processing).
func benchProcessing(b *testing.B, kind string) (store.Store, []string) {
	b.Helper()
	s, acct := benchStore(b, kind)
	ctx := context.Background()
	orders := make([]string, b.N)
	for i := range orders {
		o, err := s.OrderCreate(ctx, store.SignedUse{}, benchOrder(acct))
		if err != nil {
			b.Fatal(err)
		}
		az, err := s.AuthzByID(ctx, o.AuthzIDs[0])
		if err != nil {
			b.Fatal(err)
		}
		ch := az.Challenges[0].ID
		if _, _, err := s.ChallengeClaim(ctx, store.SignedUse{}, ch); err != nil {
			b.Fatal(err)
		}
		if err := s.ChallengeVerdict(ctx, store.Verdict{ChallengeID: ch, Status: acme.StatusValid}); err != nil {
			b.Fatal(err)
		}
		if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, "default", []byte("csr"), nil); err != nil || !claimed {
			b.Fatalf("OrderFinalizeBegin = %v, %v", claimed, err)
		}
		orders[i] = o.ID
	}
	return s, orders
}
