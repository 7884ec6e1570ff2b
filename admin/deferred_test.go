package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestDeferredJobShown: a job whose backend is unavailable is marked
// deferred in the jobs list, and its page lists the deferrals with the
// backend's error, apart from failed attempts.
func TestDeferredJobShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t, "sqlite")
	st := db.Store
	srv := serve(t, db)
	o := pendingOrder(t, st, "deferred", "deferred.example.com")
	_, jobID := claimed(t, st, o)
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, func(ctx context.Context, j jobs.Job[jobs.ChallengeValidateArgs]) error {
		return jobs.Unavailable(errors.New("PKCS#11 token hallmark not present"), time.Now().Add(time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	runner, err := db.Queue.Start(ctx, reg, jobs.Settings{Subjects: st, FetchPollInterval: 20 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, DeferMax: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = runner.Stop(stop)
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		j, err := jobs.Show(ctx, db.Queue, jobID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Deferred >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job deferred %d times after 30s", j.Deferred)
		}
	}
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	_, list := do(t, c, "GET", srv.URL+"/jobs", bearer, nil)
	if !strings.Contains(list, `class="st deferred">deferred `) {
		t.Errorf("the jobs list does not mark the deferred job:\n%s", list)
	}
	_, page := do(t, c, "GET", srv.URL+"/jobs/"+strconv.FormatInt(jobID, 10), bearer, nil)
	if !strings.Contains(page, `id="deferrals"`) || !strings.Contains(page, "PKCS#11 token hallmark not present") {
		t.Errorf("the job page does not list the deferrals:\n%s", page)
	}
}
