package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/storetest"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestRetryJob: the job page's retry button hands a job back to the
// workers, and the client sees the outcome. The challenge_validate job of a
// challenge still processing was cancelled without recording anything (a
// stranded claim: its client polls "processing" forever). Retrying it from
// the panel makes it available; a worker — here a stand-in handler that
// records a valid verdict, as the real one does for a passing check — runs
// it, and the challenge the client polls becomes valid and its order ready.
// The retry goes through operator.RetryJob and is audited.
func TestRetryJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	srv := serve(t, db)

	o := pendingOrder(t, st, "retry", "retry.example.com")
	challengeID, jobID := claimed(t, st, o)
	if _, err := jobs.Cancel(ctx, db.Queue, jobID); err != nil {
		t.Fatal(err)
	}
	// The worker stand-in, running before the retry: a cancelled job is
	// never fetched, so only the retry can bring the verdict.
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, j jobs.Job[jobs.ChallengeValidateArgs]) error {
		return st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: j.Args.ChallengeID, Status: acme.StatusValid})
	}); err != nil {
		t.Fatal(err)
	}
	runner, err := db.Queue.Start(ctx, reg, jobs.Settings{Subjects: st, FetchPollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = runner.Stop(stop)
	})

	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	jobURL := srv.URL + "/jobs/" + strconv.FormatInt(jobID, 10)
	_, page := do(t, c, "GET", jobURL, bearer, nil)
	if !strings.Contains(page, `id="retry"`) {
		t.Fatalf("the job page offers no retry button:\n%s", page)
	}
	if ch, err := storetest.ChallengeByID(ctx, st, challengeID); err != nil || ch.Status != acme.StatusProcessing {
		t.Fatalf("challenge before the retry = %+v, %v; want processing", ch, err)
	}
	resp, body := do(t, c, "POST", jobURL+"/retry", bearer, url.Values{"csrf": {csrfOf(t, page)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry: %d\n%s", resp.StatusCode, body)
	}
	if got := noticeOf(follow(t, srv.URL, resp, bearer)); !strings.Contains(got, "available to run now") {
		t.Fatalf("retry: the job page says %q, want 'available to run now'", got)
	}

	// What the client polls: the challenge gets its verdict, the order is ready.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ch, err := storetest.ChallengeByID(ctx, st, challengeID)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == acme.StatusValid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retried job never ran: challenge still %s", ch.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := st.OrderByID(ctx, o.ID); err != nil || got.Status != acme.StatusReady {
		t.Fatalf("order after the retried validation = %+v, %v; want ready", got, err)
	}
	evs, _, err := st.AuditList(ctx, store.Page{})
	if err != nil || len(evs) == 0 || evs[0].Action != "job.retry" || evs[0].Actor != "admin:token" || evs[0].Subject != strconv.FormatInt(jobID, 10) {
		t.Fatalf("audit = %+v, %v; want job.retry of %d by admin:token first", evs, err, jobID)
	}
}
