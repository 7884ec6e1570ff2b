package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// TestJobsRetry: `hallmark jobs retry` hands a job that will not run again
// back to the workers. The signer_issue job of an order still processing
// was cancelled without failing the order (a stranded claim); the retry
// makes it available — the state `jobs show` reports and a worker fetches
// — leaves the order processing for that worker to sign, and is audited
// with the state it changed.
func TestJobsRetry(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			ctx := context.Background()
			o := c.processing(c.account(), "stranded.example.com")
			var js []struct{ ID int64 }
			c.jsonOf(&js, 0, "jobs", "list", "--json", "--kind", "signer_issue")
			if len(js) != 1 {
				t.Fatalf("signer_issue jobs: %+v", js)
			}
			id := js[0].ID
			if _, err := jobs.Cancel(ctx, c.db.Queue, id); err != nil {
				t.Fatal(err)
			}
			var shown struct{ State string }
			c.jsonOf(&shown, 0, "jobs", "show", "--json", fmt.Sprint(id))
			if shown.State != "cancelled" {
				t.Fatalf("the job before the retry is %q, want cancelled", shown.State)
			}

			var retried struct {
				ID    int64
				State string
			}
			c.jsonOf(&retried, 0, "jobs", "retry", "--json", fmt.Sprint(id))
			c.jsonOf(&shown, 0, "jobs", "show", "--json", fmt.Sprint(id))
			if retried.ID != id || retried.State != "available" || shown.State != "available" {
				t.Fatalf("after jobs retry: printed %+v, jobs show says %q; want the job available", retried, shown.State)
			}
			if got, err := c.st().OrderByID(ctx, o.ID); err != nil || got.Status != acme.StatusProcessing {
				t.Fatalf("order after the retry = %+v, %v; want processing, for the worker to sign", got, err)
			}
			evs := c.audit()
			if len(evs) == 0 || evs[0].Action != "job.retry" || evs[0].Subject != fmt.Sprint(id) || !strings.Contains(evs[0].Detail, "was cancelled, now available") {
				t.Fatalf("audit = %+v; want job.retry of %d, cancelled -> available, first", evs, id)
			}
		})
	}
}
