package postgres_test

import (
	"testing"
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
