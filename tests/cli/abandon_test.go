package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// TestJobsAbandonTellsWhatChanged: `hallmark jobs abandon` fails the
// subject only when it is still processing, and says so only then. An
// order that already has its certificate is left valid: the command
// cancels its job (a change, exit 0), says the order was left as it is,
// and its audit event claims no failure. A second abandon of that cancelled
// job changes nothing: exit 4 (nothing to do, docs/cli.md) and no audit
// event. A stuck order is failed with serverInternal, as before.
func TestJobsAbandonTellsWhatChanged(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			a := c.account()
			done := c.issued(a, "done.example.com", "d01") // valid; its signer_issue job not completed
			stuck := c.processing(a, "stuck.example.com")
			jobOf := map[string]string{}
			var js []struct {
				ID      int64
				Subject string
			}
			c.jsonOf(&js, 0, "jobs", "list", "--json", "--kind", "signer_issue")
			for _, j := range js {
				jobOf[strings.TrimPrefix(j.Subject, "order ")] = fmt.Sprint(j.ID)
			}
			if jobOf[done.ID] == "" || jobOf[stuck.ID] == "" {
				t.Fatalf("jobs list = %+v", js)
			}
			abandons := func() (n int, claims []string) {
				for _, ev := range c.audit() {
					if ev.Action == operator.ActionJobAbandon {
						n++
						if strings.Contains(ev.Detail, "failed with") {
							claims = append(claims, ev.Detail)
						}
					}
				}
				return n, claims
			}

			cases := []struct {
				name, order, job string
				code             int
				says, never      string // in stdout (exit 0) or stderr
				status           acme.Status
				audited, failure int // abandon events after, of which claim a failure
			}{
				{"valid order: job cancelled, order left", done.ID, jobOf[done.ID], 0,
					"already had its verdict", "failed with serverInternal", acme.StatusValid, 1, 0},
				{"valid order again: nothing to do", done.ID, jobOf[done.ID], 4,
					"nothing to do", "failed with serverInternal", acme.StatusValid, 1, 0},
				{"stuck order: failed", stuck.ID, jobOf[stuck.ID], 0,
					"is failed with serverInternal", "", acme.StatusInvalid, 2, 1},
				{"stuck order again: nothing to do", stuck.ID, jobOf[stuck.ID], 4,
					"nothing to do", "", acme.StatusInvalid, 2, 1},
			}
			for _, tc := range cases {
				r := c.want(tc.code, "jobs", "abandon", tc.job)
				out := r.stdout + r.stderr
				if !strings.Contains(out, tc.says) || (tc.never != "" && strings.Contains(out, tc.never)) {
					t.Errorf("%s: jobs abandon says %q; want %q and never %q", tc.name, out, tc.says, tc.never)
				}
				o, err := c.st().OrderByID(context.Background(), tc.order)
				if err != nil || o.Status != tc.status {
					t.Errorf("%s: order is %+v, %v; want %s", tc.name, o, err, tc.status)
				}
				if n, claims := abandons(); n != tc.audited || len(claims) != tc.failure {
					t.Errorf("%s: %d job.abandon events, %d claiming a failure (%q); want %d and %d", tc.name, n, len(claims), claims, tc.audited, tc.failure)
				}
			}
		})
	}
}
