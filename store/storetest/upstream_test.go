package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testUpstreamRenewals: UpstreamDue lists a relay's live certificates
// whose upstream window is due, never fetched first, then the longest
// overdue, at most limit, and none of another issuer's or a revoked one;
// a recorded window is read back with its explanation, a recorded "no
// window" reads as not found, and a certificate is due again only once its
// next check has passed.
func testUpstreamRenewals(t *testing.T, s store.Store, _ Extras) {
	ctx := ctxT(t)
	acct := newAccount(t, s)
	relay := "relay:up" + rnd(4)
	serials := []string{"a1" + rnd(4), "a2" + rnd(4), "a3" + rnd(4), "a4" + rnd(4)}
	for _, serial := range serials {
		if err := issueAs(t, s, readyOrder(t, s, acct, "up.example.com"), serial, relay); err != nil {
			t.Fatal(err)
		}
	}
	mustIssue(t, s, readyOrder(t, s, acct, "local.example.com"), "b1"+rnd(4)) // another issuer's
	if err := s.RevokeRecorded(ctx, serials[3], 4, store.AuditEvent{Actor: "worker:1", Action: "revoke.backend", Subject: serials[3]}); err != nil {
		t.Fatal(err)
	}
	due := func(limit int) []string {
		t.Helper()
		ds, err := s.UpstreamDue(ctx, relay, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range ds {
			if len(d.DER) == 0 {
				t.Errorf("due certificate %s without its DER", d.Serial)
			}
			out = append(out, d.Serial)
		}
		return out
	}
	now := dbNow(t, s)
	record := func(serial string, start, end time.Time, next time.Duration) {
		t.Helper()
		if err := s.UpstreamRecord(ctx, store.UpstreamWindow{Serial: serial, Start: start, End: end,
			ExplanationURL: "https://up.example/" + serial, CheckedAt: now, NextCheckAt: now.Add(next)}); err != nil {
			t.Fatal(err)
		}
	}

	for _, step := range []struct {
		name  string
		do    func()
		limit int
		want  []string
	}{
		{"never fetched, by serial, bounded", func() {}, 2, serials[:2]},
		{"all the live ones", func() {}, 10, serials[:3]},
		{"fetched, next check ahead: not due", func() {
			record(serials[0], now.Add(-2*time.Hour), now.Add(-time.Hour), time.Hour)
			record(serials[1], time.Time{}, time.Time{}, 6*time.Hour) // the upstream knows no window
		}, 10, serials[2:3]},
		{"overdue after the never fetched", func() { record(serials[0], now.Add(-2*time.Hour), now.Add(-time.Hour), -time.Minute) }, 10, []string{serials[2], serials[0]}},
	} {
		step.do()
		if got := due(step.limit); !slices.Equal(got, step.want) {
			t.Errorf("%s: due %v, want %v", step.name, got, step.want)
		}
	}
	w, err := s.UpstreamWindowBySerial(ctx, serials[0])
	if err != nil || w.End.Sub(now.Add(-time.Hour)).Abs() > time.Second || w.ExplanationURL != "https://up.example/"+serials[0] {
		t.Errorf("UpstreamWindowBySerial(%s) = %+v, %v", serials[0], w, err)
	}
	_, err = s.UpstreamWindowBySerial(ctx, serials[1])
	wantErr(t, "UpstreamWindowBySerial of a certificate the upstream knows no window of", err, store.ErrNotFound)
	_, err = s.UpstreamWindowBySerial(ctx, serials[2])
	wantErr(t, "UpstreamWindowBySerial before a fetch", err, store.ErrNotFound)
	if _, err := s.RenewalWindowBySerial(ctx, serials[0]); err == nil {
		t.Errorf("an upstream window reads as an operator's move")
	}
}
