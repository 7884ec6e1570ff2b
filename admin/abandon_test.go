package admin_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/storetest"
)

// TestAbandonAfterVerdict: the panel's Abandon on the job of a challenge
// that already has its verdict cancels the job and leaves the challenge
// valid, and neither the notice nor the audit event says it failed; a
// second press on the cancelled job is 'Not abandoned' and audits nothing.
func TestAbandonAfterVerdict(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	o := pendingOrder(t, st, "verdict", "done.example.com")
	challengeID, jobID := claimed(t, st, o)
	if err := st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: challengeID, Status: acme.StatusValid}); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: noRedirect}
	bearer := "Bearer " + token
	jobURL := srv.URL + "/jobs/" + strconv.FormatInt(jobID, 10)
	press := func() (flash string, events []store.AuditEvent) {
		t.Helper()
		_, page := do(t, c, "GET", jobURL, bearer, nil)
		resp, _ := do(t, c, "POST", jobURL+"/abandon", bearer, url.Values{"csrf": {csrfOf(t, page)}})
		flash = noticeOf(follow(t, srv.URL, resp, bearer))
		evs, _, err := st.AuditList(ctx, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Action == operator.ActionJobAbandon {
				events = append(events, ev)
			}
		}
		return flash, events
	}

	flash, evs := press()
	if ch, err := storetest.ChallengeByID(ctx, st, challengeID); err != nil || ch.Status != acme.StatusValid {
		t.Fatalf("challenge after abandon: %+v, %v; want valid", ch, err)
	}
	if strings.Contains(flash, "failed") || !strings.Contains(flash, "already had its verdict") {
		t.Errorf("the challenge is still valid, but the panel says %q", flash)
	}
	if len(evs) != 1 || strings.Contains(evs[0].Detail, "failed with") {
		t.Errorf("audit events %+v; want one that claims no failure", evs)
	}

	flash, evs = press()
	if !strings.HasPrefix(flash, "Not abandoned") || len(evs) != 1 {
		t.Errorf("second press on the cancelled job: flash %q, %d abandon events; want 'Not abandoned' and still one", flash, len(evs))
	}
}
