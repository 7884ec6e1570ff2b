package sqlstore

import (
	"strings"
	"testing"
	"time"
)

func TestDialectSQL(t *testing.T) {
	t.Parallel()
	q := `UPDATE leases SET expires_at = {now+$3} WHERE name = $1 AND expires_at <= {now} AND {json:j.args:order_id} = $12 AND {pin:account_id:$2} {forupdate}`
	for _, tc := range []struct {
		d    *Dialect
		want string
	}{
		{Postgres, `UPDATE leases SET expires_at = (now() + $3::bigint * interval '1 microsecond') WHERE name = $1 AND expires_at <= now() AND j.args->>'order_id' = $12 AND account_id >= $2 AND account_id <= $2  FOR UPDATE`},
		{SQLite, `UPDATE leases SET expires_at = (` + sqliteNow + ` + ?3) WHERE name = ?1 AND expires_at <= ` + sqliteNow + ` AND json_extract(j.args, '$.order_id') = ?12 AND account_id = ?2 `},
	} {
		if got := tc.d.SQL(q); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.d.Name, got, tc.want)
		}
		if got := tc.d.SQL(q); strings.Contains(got, "{") {
			t.Errorf("%s: unexpanded token in %s", tc.d.Name, got)
		}
	}
}

func TestTimeScan(t *testing.T) {
	t.Parallel()
	want := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	for _, src := range []any{want.In(time.FixedZone("x", 3600)), want.UnixMicro()} {
		var got time.Time
		if err := ts(&got).(*timeScan).Scan(src); err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("Scan(%T) = %v, %v; want %v UTC", src, got, err, want)
		}
	}
	p := &want
	if err := tsNull(&p).(*timeScan).Scan(nil); err != nil || p != nil {
		t.Errorf("Scan(nil) into a nullable time = %v, %v", p, err)
	}
	var v time.Time
	if err := ts(&v).(*timeScan).Scan(nil); err == nil {
		t.Error("NULL into a NOT NULL time was accepted")
	}
}

func TestRandomIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 5000 { // a leading '-' came one in 64
		id, tok := randomID(), randomToken()
		if len(id) != 22 || len(tok) != 43 || seen[id] || seen[tok] {
			t.Fatalf("id %q token %q: want 22 and 43 base64url characters, never repeated", id, tok)
		}
		if id[0] == '-' {
			t.Fatalf("id %q starts with '-', which a command line reads as a flag", id)
		}
		seen[id], seen[tok] = true, true
	}
}
