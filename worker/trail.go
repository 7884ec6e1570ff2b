package worker

import (
	"context"

	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// trailEvent is an event of the issuance trail about account acctID's
// subject, from the request that queued the job whose context is ctx
// (jobs.Job.Origin): a certificate stored, an order failed, a validation
// failed. The store records it in the transaction of what it records.
func (w *Worker) trailEvent(ctx context.Context, acctID, action, subject, detail string) store.AuditEvent {
	return store.AuditEvent{Actor: "acme:" + acctID, Action: action, Subject: subject,
		Detail: detail + "; worker " + w.id, Trail: true, Origin: origin.Of(ctx)}
}
