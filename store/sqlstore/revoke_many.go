package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/store"
)

// The statements of RevokeMany, each over one list of serials (at most
// maxRowsPerStatement; serialList) and each a lookup of every serial in
// the unique index on certificates (serial): a page costs its own rows
// whatever the table holds. The list is {inlist}VALUES ...{endlist}, not
// IN ($1, ...): on a table never analyzed, PostgreSQL's custom plan read
// all of the certificates (a sequential scan of 20,000 for 100 serials)
// for the plain IN list (TestFleetPlans, "RevokeMany").
const (
	// revokeManyLockSQL locks the listed certificates in serial order
	// before any is changed: two bulk revocations over the same
	// certificates (PostgreSQL locks an UPDATE's rows in whatever order its
	// scan finds them) would otherwise each hold a row the other waits on.
	// SQLite's writers are serialized by BEGIN IMMEDIATE and lock nothing.
	revokeManyLockSQL = `SELECT serial FROM certificates WHERE serial %s ORDER BY serial {forupdate}`
	// revokeManySQL revokes the listed certificates that are not revoked
	// yet ($1 the reason) and returns them as they now stand: a
	// certificate revoked meanwhile by someone else is left as it is and
	// not returned, so it is never revoked twice.
	revokeManySQL = `UPDATE certificates SET revoked_at = {now}, revocation_reason = $1
WHERE serial %s AND revoked_at IS NULL RETURNING ` + certCols
	// revokeManyRowsSQL is the CRL entries of the certificates just
	// revoked, from their rows (revoked_at on the database's clock).
	revokeManyRowsSQL = `INSERT INTO revocations (serial, issuer_id, revoked_at, reason, shard, not_after)
SELECT serial, issuer_id, revoked_at, revocation_reason, crl_shard, not_after FROM certificates WHERE serial %s`
)

// RevokeMany is Revoke for many local certificates in one transaction:
// per maxRowsPerStatement serials one UPDATE and one INSERT of their CRL
// entries, one multi-row INSERT of their audit events, and one
// crl_generate job per issuer touched rather than per certificate.
func (s *Store) RevokeMany(ctx context.Context, serials []string, reason int, ev store.AuditEvent) ([]*store.Certificate, error) {
	serials = distinct(serials)
	if len(serials) == 0 {
		return nil, nil
	}
	var out []*store.Certificate
	err := s.inTx(ctx, func(t *txn) error {
		if err := t.customPlans(ctx); err != nil {
			return err
		}
		var err error
		if out, err = s.revokeManyRows(ctx, t, serials, reason); err != nil || len(out) == 0 {
			return err
		}
		if err := refuseRemote(out); err != nil {
			return err
		}
		b := s.revokeManyRecords(out, ev)
		if _, err = t.sendAhead(ctx, b, func() error {
			if err := s.notifyCerts(ctx, t, notify.CertificateRevoked, out, ev); err != nil {
				return err
			}
			return s.revokeManyJobs(ctx, t, out)
		}); err != nil {
			return err
		}
		if reason == store.ReasonKeyCompromise {
			return s.compromised(ctx, t, out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("revoking %d certificates: %w", len(serials), err)
	}
	return out, nil
}

// distinct is serials without repeats, in their first order: a serial
// listed twice is one certificate, revoked once.
func distinct(serials []string) []string {
	seen := make(map[string]bool, len(serials))
	out := make([]string, 0, len(serials))
	for _, sr := range serials {
		if !seen[sr] {
			seen[sr] = true
			out = append(out, sr)
		}
	}
	return out
}

// revokeManyRows locks and revokes serials' unrevoked certificates in one
// round trip (PostgreSQL) and returns them as revoked, in serials' order.
func (s *Store) revokeManyRows(ctx context.Context, t *txn, serials []string, reason int) ([]*store.Certificate, error) {
	var b batch
	var got []*store.Certificate
	// Serial order across the IN lists too, so the locks of two calls
	// over the same certificates are taken in one order.
	sorted := slices.Sorted(slices.Values(serials))
	for _, chunk := range chunks(sorted) {
		args := make([]any, 0, len(chunk)+1)
		for _, sr := range chunk {
			args = append(args, sr)
		}
		b.each("locking certificates", func(Rows) error { return nil }, fmt.Sprintf(revokeManyLockSQL, serialList(1, len(chunk))), args...)
		b.each("revoking certificates", func(r Rows) error {
			var seq int64
			c, err := scanCert(r, &seq)
			if err == nil {
				got = append(got, c)
			}
			return err
		}, fmt.Sprintf(revokeManySQL, serialList(2, len(chunk))), append([]any{reason}, args...)...)
	}
	if _, err := t.send(ctx, &b); err != nil {
		return nil, err
	}
	order := make(map[string]int, len(serials))
	for i, sr := range serials {
		order[sr] = i
	}
	slices.SortFunc(got, func(a, b *store.Certificate) int { return order[a.Serial] - order[b.Serial] })
	return got, nil
}

// refuseRemote fails the transaction when a relay's or custom backend's
// certificate was among those revoked, as Revoke does: Hallmark signs no
// CRL for its issuer, so the backend must be asked (RevokeQueue).
func refuseRemote(certs []*store.Certificate) error {
	for _, c := range certs {
		if store.RemoteIssuer(c.IssuerID) {
			return fmt.Errorf("revoking certificate %s: its issuer %s publishes its own revocation status; revoke it through its backend (signer_revoke)", c.Serial, c.IssuerID)
		}
	}
	return nil
}

// revokeManyRecords queues the CRL entries and the audit events of certs,
// just revoked: one audit event each, ev with its serial as the subject,
// so the audit log names every certificate as a one-by-one revocation's
// does.
func (s *Store) revokeManyRecords(certs []*store.Certificate, ev store.AuditEvent) *batch {
	var b batch
	serials := make([]string, len(certs))
	for i, c := range certs {
		serials[i] = c.Serial
	}
	for _, chunk := range chunks(serials) {
		args := make([]any, len(chunk))
		for i, sr := range chunk {
			args[i] = sr
		}
		b.exec("recording the revocations", fmt.Sprintf(revokeManyRowsSQL, serialList(1, len(chunk))), args...)
	}
	var at any
	if !ev.At.IsZero() {
		at = s.d.T(ev.At)
	}
	rows := make([][]any, len(serials))
	for i, sr := range serials {
		rows[i] = []any{ev.Actor, ev.Action, sr, ev.Detail, at}
	}
	queueRows(&b, "recording audit events "+ev.Action, `INSERT INTO audit_events (actor, action, subject, detail, at)`,
		`($1, $2, $3, $4, COALESCE($5, {now}))`, ``, rows)
	return &b
}

// revokeManyJobs queues one crl_generate job per issuer and CRL shard of
// certs: the handler signs every revocation its shard has when it runs, so
// one job lists them all (CRLGenerateArgs, which cannot be unique, is why
// the store must not queue one per certificate).
func (s *Store) revokeManyJobs(ctx context.Context, t *txn, certs []*store.Certificate) error {
	var shards []jobs.CRLGenerateArgs
	for _, c := range certs {
		a := jobs.CRLGenerateArgs{IssuerID: c.IssuerID, Shard: c.CRLShard}
		if !slices.Contains(shards, a) {
			shards = append(shards, a)
		}
	}
	for _, a := range shards {
		if err := s.enqueue(ctx, t, a); err != nil {
			return err
		}
	}
	return nil
}

// chunks splits serials into IN lists of at most maxRowsPerStatement.
func chunks(serials []string) [][]string {
	var out [][]string
	for len(serials) > 0 {
		n := min(len(serials), maxRowsPerStatement)
		out = append(out, serials[:n])
		serials = serials[n:]
	}
	return out
}

// serialList is "{inlist}VALUES ($first), ... {endlist}" for n serials:
// each value cast to text, so PostgreSQL types the list whatever it
// infers of the first.
func serialList(first, n int) string {
	return "{inlist}VALUES " + valueRows("(CAST($"+strconv.Itoa(first)+" AS TEXT))", 1, n) + "{endlist}"
}
