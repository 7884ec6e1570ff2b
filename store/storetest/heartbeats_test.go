package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// testHeartbeats: a worker's heartbeat renews while it is live; past its
// expiry with nothing taken it renews again (Revived: a database outage
// lapses every heartbeat at once); any worker returns a lapsed worker's
// running jobs to the queue (discarding one out of attempts), never a live
// worker's, and that worker's next renewal reports the lapse; a worker
// registered afresh gets back the jobs its earlier run left running.
func testHeartbeats(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a, err := s.Beat(ctx, "w-a", time.Time{}, time.Minute)
	if err != nil || a.Since.IsZero() || a.Lapsed {
		t.Fatalf("registering w-a: %+v, %v", a, err)
	}
	if r, err := s.Beat(ctx, "w-a", a.Since, time.Minute); err != nil || r.Lapsed || r.Now.Before(a.Since) {
		t.Fatalf("renewing w-a: %+v, %v", r, err)
	}
	// Expired with no running job: renewed, and said to be revived.
	x.Exec(t, "UPDATE worker_heartbeats SET expires_at = started_at WHERE worker_id = 'w-a'")
	if r, err := s.Beat(ctx, "w-a", a.Since, time.Minute); err != nil || r.Lapsed || !r.Revived {
		t.Fatalf("renewing w-a past its expiry, nothing taken = %+v, %v; want Revived", r, err)
	}
	if r, err := s.Beat(ctx, "w-a", a.Since, time.Minute); err != nil || r.Lapsed || r.Revived {
		t.Fatalf("renewing w-a again = %+v, %v; want a plain renewal", r, err)
	}
	b, err := s.Beat(ctx, "w-b", time.Time{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	acct := newAccount(t, s)
	var ids []int64
	for i := 0; i < 3; i++ {
		o := newOrder(t, s, acct, fmt.Sprintf("h%d.heartbeat.example", i))
		if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, authz(t, s, o.AuthzIDs[0]).Challenges[0].ID); err != nil || !claimed {
			t.Fatalf("ChallengeClaim: %v %v", claimed, err)
		}
		ids = append(ids, x.Int(t, "SELECT max(id) FROM river_job"))
	}
	running := func(id int64, worker string, attempt int) {
		if x.Dialect == "sqlite" {
			x.Exec(t, fmt.Sprintf(`UPDATE river_job SET state = 'running', attempt = %d, attempted_at = datetime('now', 'subsec'), attempted_by = jsonb('["w-x", "%s"]') WHERE id = %d`, attempt, worker, id))
			return
		}
		x.Exec(t, fmt.Sprintf(`UPDATE river_job SET state = 'running', attempt = %d, attempted_at = now(), attempted_by = ARRAY['w-x', '%s'] WHERE id = %d`, attempt, worker, id))
	}
	state := func(id int64) string {
		for _, st := range []string{"running", "available", "discarded"} {
			if x.Int(t, fmt.Sprintf("SELECT count(*) FROM river_job WHERE id = %d AND state = '%s'", id, st)) == 1 {
				return st
			}
		}
		return "other"
	}
	running(ids[0], "w-a", 1)
	running(ids[1], "w-b", 1)
	running(ids[2], "w-a", 25) // out of attempts (River's default 25)
	if rs, err := s.RescueLapsed(ctx, "w-b"); err != nil || len(rs) != 0 {
		t.Fatalf("RescueLapsed with every worker live = %+v, %v; want nothing taken", rs, err)
	}

	// w-a's heartbeat lapses: its expiry is behind the database's clock.
	x.Exec(t, "UPDATE worker_heartbeats SET expires_at = started_at WHERE worker_id = 'w-a'")
	rs, err := s.RescueLapsed(ctx, "w-b")
	if err != nil || len(rs) != 2 {
		t.Fatalf("RescueLapsed after w-a lapsed = %+v, %v; want its two jobs", rs, err)
	}
	for _, r := range rs {
		if r.Worker != "w-a" || r.Kind != "challenge_validate" || r.Discarded != (r.JobID == ids[2]) {
			t.Errorf("rescued %+v", r)
		}
	}
	if got := []string{state(ids[0]), state(ids[1]), state(ids[2])}; got[0] != "available" || got[1] != "running" || got[2] != "discarded" {
		t.Fatalf("job states after the rescue = %v, want [available running discarded]", got)
	}
	lastErr := fmt.Sprintf("SELECT count(*) FROM river_job WHERE id = %d AND errors[array_length(errors, 1)]->>'error' LIKE '%%returned to the queue by worker w-b'", ids[0])
	if x.Dialect == "sqlite" {
		lastErr = fmt.Sprintf("SELECT count(*) FROM river_job WHERE id = %d AND json_extract(errors, '$[#-1].error') LIKE '%%returned to the queue by worker w-b'", ids[0])
	}
	if x.Int(t, lastErr) != 1 {
		t.Error("the rescued job's attempt log does not say which worker returned it")
	}
	if r, err := s.Beat(ctx, "w-a", a.Since, time.Minute); err != nil || !r.Lapsed || r.Taken {
		t.Fatalf("renewing w-a's lapsed heartbeat = %+v, %v; want Lapsed, not Taken", r, err)
	}

	// w-b restarts under the same id: what its earlier run held comes back.
	time.Sleep(5 * time.Millisecond) // a River time has milliseconds
	if b2, err := s.Beat(ctx, "w-b", time.Time{}, time.Minute); err != nil || !b2.Since.After(b.Since) {
		t.Fatalf("registering w-b again = %+v, %v", b2, err)
	}
	if rs, err := s.RescueLapsed(ctx, "w-a"); err != nil || len(rs) != 1 || rs[0].JobID != ids[1] {
		t.Fatalf("RescueLapsed after w-b restarted = %+v, %v; want job %d", rs, err, ids[1])
	}
	// The earlier run of w-b, still alive, finds its id taken.
	if r, err := s.Beat(ctx, "w-b", b.Since, time.Minute); err != nil || !r.Lapsed || !r.Taken {
		t.Fatalf("renewing w-b's earlier run after another registered = %+v, %v; want Lapsed and Taken", r, err)
	}
	// The rescue ended w-a's heartbeat; only w-b's row is left.
	if n, err := s.HeartbeatGC(ctx, dbNow(t, s).Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("HeartbeatGC = %d, %v; want w-b's row", n, err)
	}
}
