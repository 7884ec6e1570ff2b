package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// TestNonceTablesUnlogged: consuming a nonce must not wait for a WAL flush,
// and both nonce tables must be emptied by the same crash (the epoch is what
// keeps an emptied consumed set from accepting old nonces again; see
// migrations/postgres/0004). A logged nonce_epoch beside an unlogged
// nonces_consumed would survive the crash and re-open every old nonce.
func TestNonceTablesUnlogged(t *testing.T) {
	t.Parallel()
	_, x := newStore(t)
	for _, table := range []string{"nonces_consumed", "nonce_epoch"} {
		n := x.Int(t, `SELECT count(*) FROM pg_class WHERE relname = '`+table+`' AND relpersistence = 'u' AND relkind = 'r'`)
		if n != 1 {
			t.Errorf("table %s is not UNLOGGED", table)
		}
	}
	// None of Hallmark's other tables is: orders and certificates must
	// survive a crash. (River keeps its leader election in an unlogged
	// table of its own; a crash only means a new election.)
	if n := x.Int(t, `SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = current_schema() AND c.relkind = 'r' AND c.relpersistence = 'u'
		AND c.relname NOT IN ('nonces_consumed', 'nonce_epoch') AND c.relname NOT LIKE 'river\_%'`); n != 0 {
		t.Errorf("%d other tables are UNLOGGED; only the nonce tables may be", n)
	}
}

// TestNonceMeanwhileInFlight: the work NonceConsumeMeanwhile runs
// meanwhile runs while the round trip is in flight, not before it: from
// inside it, another connection sees the nonce consumed, which can only
// happen once the statement has gone to the server. (The frontend checks a
// request's signature there; run before the send, the check and the round
// trip would add up instead of overlapping.)
func TestNonceMeanwhileInFlight(t *testing.T) {
	t.Parallel()
	s, x := newStore(t)
	ctx := context.Background()
	e, err := s.NonceEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms, ok := s.(store.NoncesMeanwhile)
	if !ok {
		t.Fatalf("%T does not implement store.NoncesMeanwhile", s)
	}
	for _, lookup := range []store.Lookup{{}, {Kind: store.LookupOrder, ID: "no-such-order"}} {
		nonce := fmt.Sprintf("in-flight-%d", lookup.Kind)
		seen := false
		_, err := ms.NonceConsumeMeanwhile(ctx, []store.NonceUse{{Nonce: nonce, Expires: time.Now().Add(time.Hour), Epoch: e, Lookup: lookup}}, func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if x.Int(t, "SELECT count(*) FROM nonces_consumed WHERE nonce = '"+nonce+"'") == 1 {
					seen = true
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if !seen {
			t.Errorf("lookup %v: meanwhile ran before the nonce's statement reached the server", lookup.Kind)
		}
	}
}
