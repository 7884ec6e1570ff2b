package worker

import "context"

// expiringPerRun bounds the certificate_expiring notifications one
// housekeeping run queues per threshold; the rest wait a minute.
const expiringPerRun = 500

// notifyExpiring queues certificate_expiring for the certificates not
// renewed within each threshold of [notify] expiry_days (the store records
// each, so it is reported once per threshold).
func (w *Worker) notifyExpiring(ctx context.Context) {
	for _, days := range w.expiryDays {
		n, err := w.st.housekeep.NotifyExpiring(ctx, days, expiringPerRun)
		if err != nil {
			w.log.WarnContext(ctx, "queueing notifications of expiring certificates", "days", days, "err", err)
			continue
		}
		if n > 0 {
			w.log.InfoContext(ctx, "certificates expiring unrenewed, notifications queued", "days", days, "count", n)
		}
	}
}
