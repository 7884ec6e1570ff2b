package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// NotifyRoute sets the destinations each event goes to ([notify]): every
// write that reports an event then queues one notify_send job per
// destination in its own transaction. Call it before the store is used.
func (s *Store) NotifyRoute(route func(event string) []string) { s.route = route }

// notify queues n, an event, for each destination that takes it, on the
// transaction of the write it reports.
func (s *Store) notify(ctx context.Context, t *txn, n jobs.NotifySendArgs) error {
	if s.route == nil {
		return nil
	}
	for _, d := range s.route(n.Event) {
		one := n
		one.Destination = d
		if err := s.enqueue(ctx, t, one); err != nil {
			return err
		}
	}
	return nil
}

// notifyCerts queues event for each certificate of certs.
func (s *Store) notifyCerts(ctx context.Context, t *txn, event string, certs []*store.Certificate, ev store.AuditEvent) error {
	for _, c := range certs {
		if err := s.notify(ctx, t, certNotice(event, c, ev)); err != nil {
			return err
		}
	}
	return nil
}

// certNotice is event about certificate c, by ev's actor.
func certNotice(event string, c *store.Certificate, ev store.AuditEvent) jobs.NotifySendArgs {
	return jobs.NotifySendArgs{Event: event, Key: c.Serial, Subject: c.Serial, Account: c.AccountID,
		Actor: ev.Actor, Detail: ev.Detail, Names: c.Names, NotAfter: c.NotAfter, At: now(ev)}
}

// eventNotice is event about ev's subject.
func eventNotice(event string, ev store.AuditEvent) jobs.NotifySendArgs {
	return jobs.NotifySendArgs{Event: event, Key: ev.Subject, Subject: ev.Subject, Actor: ev.Actor,
		Detail: ev.Detail, At: now(ev)}
}

// now is ev's time, or now when it has none (the database's own clock
// stamps the audit row; a message needs no more precision than this).
func now(ev store.AuditEvent) time.Time {
	if ev.At.IsZero() {
		return time.Now().UTC()
	}
	return ev.At
}

// challengeNotice is challenge_failed for challenge id, failed with p, as
// the trail event records it (its actor names the account).
func challengeNotice(id string, p *acme.Problem, trail *store.AuditEvent) jobs.NotifySendArgs {
	n := jobs.NotifySendArgs{Event: notify.ChallengeFailed, Key: id, Subject: id, At: time.Now().UTC()}
	if trail != nil {
		n.Actor, n.Account = trail.Actor, strings.TrimPrefix(trail.Actor, "acme:")
		n.At = now(*trail)
	}
	if p != nil {
		n.Detail = string(p.Type) + ": " + p.Detail
	}
	return n
}

// expiringSQL finds up to $3 live certificates that expire within $1
// microseconds, were not reported at threshold $2 days, and were not
// renewed: no ARI replacement, no later live certificate with the same
// names. By certificates_not_after_idx, soonest first.
const expiringSQL = `SELECT c.serial FROM certificates c
WHERE c.not_after > {now} AND c.not_after <= {now+$1} AND c.revoked_at IS NULL AND c.replaced_by = ''
  AND NOT EXISTS (SELECT 1 FROM notify_expiring n WHERE n.serial = c.serial AND n.days = $2)
  AND NOT EXISTS (SELECT 1 FROM certificates r WHERE r.names = c.names AND r.issued_at > c.issued_at AND r.revoked_at IS NULL)
ORDER BY c.not_after LIMIT $3`

func (s *Store) NotifyExpiring(ctx context.Context, days, limit int) (int, error) {
	if s.route == nil || len(s.route(notify.CertificateExpiring)) == 0 {
		return 0, nil // nothing would be sent, and nothing is recorded as sent
	}
	var n int
	err := s.inTx(ctx, func(t *txn) error {
		var serials []string
		within := (time.Duration(days) * 24 * time.Hour).Microseconds()
		if err := collect(ctx, t, func(r Rows) error {
			var sr string
			err := r.Scan(&sr)
			serials = append(serials, sr)
			return err
		}, expiringSQL, within, days, limit); err != nil {
			return err
		}
		for _, sr := range serials {
			c, err := s.certBySerial(ctx, t, sr)
			if err != nil {
				return err
			}
			if _, err := t.exec(ctx, `INSERT INTO notify_expiring (serial, days) VALUES ($1, $2)`, sr, days); err != nil {
				return err
			}
			ev := store.AuditEvent{Actor: "housekeeping", Detail: fmt.Sprintf("%d-day threshold", days)}
			notice := certNotice(notify.CertificateExpiring, c, ev)
			notice.Key = fmt.Sprintf("%s/%d", sr, days)
			if err := s.notify(ctx, t, notice); err != nil {
				return err
			}
		}
		n = len(serials)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reporting certificates expiring within %d days: %w", days, err)
	}
	return n, nil
}
