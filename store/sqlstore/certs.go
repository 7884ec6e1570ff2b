package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/store"
)

const certCols = `seq, serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at, revoked_at, revocation_reason, replaced_by, spki_sha256, crl_shard`

func scanCert(r interface{ Scan(...any) error }, seq *int64) (*store.Certificate, error) {
	var c store.Certificate
	var names string
	if err := r.Scan(seq, &c.Serial, &c.OrderID, &c.AccountID, &c.IssuerID, &c.Profile, &c.DER, &c.ChainPEM, &names,
		ts(&c.NotBefore), ts(&c.NotAfter), ts(&c.IssuedAt), tsNull(&c.RevokedAt), &c.RevocationReason, &c.ReplacedBy, &c.SPKIHash, &c.CRLShard); err != nil {
		return nil, err
	}
	if len(c.SPKIHash) == 0 {
		c.SPKIHash = nil
	}
	if err := json.Unmarshal([]byte(names), &c.Names); err != nil {
		return nil, fmt.Errorf("decoding names of certificate %s: %w", c.Serial, err)
	}
	return &c, nil
}

// certInsertSQL stores an issued certificate, from its order: $1 the
// serial, $2 the order, $3..$13 the columns (certificates; $12 the key's
// hash, for the key's siblings: certificates_spki_idx; $13 its CRL shard). The order is
// found by its key, its status hidden from index choice (concatenated
// with an empty string): with
// statistics taken while the fleet's orders were still pending, PostgreSQL
// chose orders_status_idx and read every valid order, 20,000 for a fleet's
// account, on every issuance (custom and generic plans; TestFleetPlans).
const certInsertSQL = `INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, issued_at, spki_sha256, crl_shard)
SELECT $1, id, COALESCE(NULLIF($3, ''), account_id), $4, COALESCE(NULLIF($5, ''), profile), $6, $7, $8, $9, $10, COALESCE($11, {now}), $12, $13
FROM orders WHERE id = $2 AND status || '' = 'valid' AND cert_serial = $1`

// queueCertificate queues on b the row of certificate c, issued for order
// c.OrderID, and its names, and returns the index of the certificate's
// INSERT. The INSERT reads the order row that OrderIssued's
// compare-and-swap has just made valid with c's serial, taking the order's
// account and profile where c leaves them empty; it inserts nothing when
// no such row exists.
func (s *Store) queueCertificate(b *batch, c store.Certificate) (int, error) {
	names := c.Names
	if names == nil {
		names = []string{}
	}
	nt, err := jsonText(names)
	if err != nil {
		return 0, err
	}
	var issued any = nil
	if !c.IssuedAt.IsZero() {
		issued = s.d.T(c.IssuedAt)
	}
	i := b.exec("storing certificate "+c.Serial,
		certInsertSQL,
		c.Serial, c.OrderID, c.AccountID, c.IssuerID, c.Profile, nonNil(c.DER), nonNil(c.ChainPEM), nt,
		s.d.T(c.NotBefore), s.d.T(c.NotAfter), issued, nullBytes(c.SPKIHash), c.CRLShard)
	rows := make([][]any, len(names))
	for i, n := range names {
		rows[i] = []any{c.Serial, n}
	}
	queueRows(b, "storing the names of certificate "+c.Serial,
		`INSERT INTO certificate_names (serial, name)`, `($1, $2)`, ` ON CONFLICT DO NOTHING`, rows)
	// The domains the certificates-per-domain rate limit counts it under
	// (RateCertificates), with the certificate row's issued_at: one more
	// statement in the same batch (one per maxRowsPerStatement domains).
	// Like the names, it inserts nothing when the certificate row was not
	// written.
	domains := certificateDomains(names)
	for len(domains) > 0 {
		n := min(len(domains), maxRowsPerStatement)
		args := make([]any, 0, n+1)
		args = append(args, c.Serial)
		for _, d := range domains[:n] {
			args = append(args, d)
		}
		b.exec("storing the domains of certificate "+c.Serial, `WITH d (domain) AS (VALUES `+valueRows("(CAST($2 AS TEXT))", 1, n)+`)
INSERT INTO certificate_domains (domain, serial, issued_at)
SELECT d.domain, c.serial, c.issued_at FROM d, certificates c WHERE c.serial = $1`, args...)
		domains = domains[n:]
	}
	return i, nil
}

// certificateDomains is every domain under which RateCertificates counts a
// certificate for names, without repeats: each name lowercased without
// trailing dots, and for a DNS name each suffix at a label boundary that
// still has two labels (x.example.test: x.example.test and example.test,
// never test alone). An IP address is only itself: a name of digits and
// dots only, or one with a colon (migration 0005 draws the same line).
func certificateDomains(names []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, n := range names {
		d := strings.TrimRight(strings.ToLower(n), ".")
		add(d)
		if isAddress(d) {
			continue
		}
		for {
			i := strings.IndexByte(d, '.')
			if i < 0 || !strings.Contains(d[i+1:], ".") {
				break
			}
			d = d[i+1:]
			add(d)
		}
	}
	return out
}

// isAddress: a name of digits and dots only, or with a colon.
func isAddress(name string) bool {
	return strings.Contains(name, ":") || strings.Trim(name, "0123456789.") == ""
}

// certBySerialSQL reads one certificate by serial.
const certBySerialSQL = `SELECT ` + certCols + ` FROM certificates WHERE serial = $1`

func (s *Store) certBySerial(ctx context.Context, t *txn, serial string) (*store.Certificate, error) {
	var seq int64
	c, err := scanCert(t.queryRow(ctx, certBySerialSQL, serial), &seq)
	if err != nil {
		return nil, fmt.Errorf("reading certificate %s: %w", serial, err)
	}
	return c, nil
}

func (s *Store) CertificateBySerial(ctx context.Context, serial string) (*store.Certificate, error) {
	return autocommitted(ctx, s, func(t *txn) (*store.Certificate, error) { return s.certBySerial(ctx, t, serial) })
}

// certificatesListSQL is CertificatesList's statement for f, with its
// arguments before the page's (where.page). An account is a range of
// certificates_account_idx (pinned to it when it is the only filter:
// where.pin) and a revoked certificate one of certificates_revoked_idx,
// both in seq order; a name is read from certificate_names_name_idx. Not
// being revoked has no index: nearly every certificate qualifies, so the
// newest ones are the page. An expiry bound is a range of
// certificates_not_after_idx or a filter on the newest certificates, as
// the planner judges: no index gives both not_after and seq
// (TestFleetListPlans names the plans it may choose badly). Without an
// expiry bound there is no not_after condition at all (there was one with
// 9999-01-01, which also left out a certificate of RFC 5280's
// 99991231235959Z, "no well-defined expiration date").
func certificatesListSQL(d *Dialect, f store.CertFilter) (string, []any) {
	var w where
	switch {
	case f.AccountID != "" && f.Name == "" && f.ExpiringBefore == nil && f.Revoked == nil:
		w.pin("account_id", f.AccountID)
	case f.AccountID != "":
		w.and(`account_id = $?`, f.AccountID)
	}
	if f.Name != "" {
		// By key, as OrdersList's identifier (ordersListSQL).
		w.and(`serial {inlist} SELECT serial FROM certificate_names WHERE name = $? {endlist}`, f.Name)
	}
	if f.ExpiringBefore != nil {
		w.and(`not_after < $?`, d.T(*f.ExpiringBefore))
	}
	if f.Revoked != nil {
		if *f.Revoked {
			w.and(`revoked_at IS NOT NULL`)
		} else {
			w.and(`revoked_at IS NULL`)
		}
	}
	return `SELECT ` + certCols + ` FROM certificates
` + w.page("seq"), w.args
}

func (s *Store) CertificatesList(ctx context.Context, f store.CertFilter, p store.Page) ([]*store.Certificate, string, error) {
	q, args := certificatesListSQL(s.d, f)
	out, next, err := listPage(ctx, s, p, func(r Rows, seq *int64) (*store.Certificate, error) { return scanCert(r, seq) }, nil, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("listing certificates: %w", err)
	}
	return out, next, nil
}

func (s *Store) Revoke(ctx context.Context, serial string, reason int, ev store.AuditEvent) (*store.Certificate, error) {
	var out *store.Certificate
	err := s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, `UPDATE certificates SET revoked_at = {now}, revocation_reason = $2 WHERE serial = $1 AND revoked_at IS NULL`, serial, reason)
		if err != nil {
			return err
		}
		out, err = s.certBySerial(ctx, t, serial)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("revoking certificate %s: it was already revoked: %w", serial, store.ErrConflict)
		}
		if store.RemoteIssuer(out.IssuerID) {
			// Its crl_generate job could not even be queued (a River queue
			// name has no ':'), and no CRL of ours would list it.
			return fmt.Errorf("revoking certificate %s: its issuer %s publishes its own revocation status; revoke it through its backend (signer_revoke)", serial, out.IssuerID)
		}
		if _, err := t.exec(ctx, revocationInsertSQL, serial); err != nil {
			return err
		}
		if err := s.audit(ctx, t, ev); err != nil {
			return err
		}
		if err := s.notify(ctx, t, certNotice(notify.CertificateRevoked, out, ev)); err != nil {
			return err
		}
		if err := s.enqueue(ctx, t, jobs.CRLGenerateArgs{IssuerID: out.IssuerID, Shard: out.CRLShard}); err != nil {
			return err
		}
		if reason == store.ReasonKeyCompromise {
			return s.compromised(ctx, t, []*store.Certificate{out}, ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rerevokeSQL makes a revoked certificate's reason keyCompromise, keeping
// its revocation time, as Boulder's UpdateRevokedCertificate does.
const rerevokeSQL = `UPDATE certificates SET revocation_reason = 1 WHERE serial = $1 AND revoked_at IS NOT NULL AND revocation_reason <> 1`

func (s *Store) RevokeForKeyCompromise(ctx context.Context, serial string, ev store.AuditEvent) (*store.Certificate, error) {
	var out *store.Certificate
	err := s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, rerevokeSQL, serial)
		if err != nil {
			return err
		}
		out, err = s.certBySerial(ctx, t, serial)
		if err != nil {
			return err
		}
		switch {
		case n == 0 && out.RevokedAt == nil:
			return fmt.Errorf("recording the key compromise of certificate %s: it is not revoked: %w", serial, store.ErrConflict)
		case n == 0:
			return fmt.Errorf("recording the key compromise of certificate %s: it was revoked with reason keyCompromise already: %w", serial, store.ErrConflict)
		case store.RemoteIssuer(out.IssuerID):
			return fmt.Errorf("recording the key compromise of certificate %s: its issuer %s keeps its own record of the reason, which Hallmark cannot change", serial, out.IssuerID)
		}
		if _, err := t.exec(ctx, `UPDATE revocations SET reason = 1 WHERE serial = $1`, serial); err != nil {
			return err
		}
		if err := s.audit(ctx, t, ev); err != nil {
			return err
		}
		if err := s.enqueue(ctx, t, jobs.CRLGenerateArgs{IssuerID: out.IssuerID, Shard: out.CRLShard}); err != nil {
			return err
		}
		return s.compromised(ctx, t, []*store.Certificate{out}, ev)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// raiseRevokeReasonSQL makes the reason of signer_revoke job $1
// keyCompromise while no worker has taken it. Its uniqueness is by serial
// alone (jobs.SignerRevokeArgs), so River's unique key stays right. River
// keeps args as jsonb on PostgreSQL and as SQLite's JSONB blob, and the
// two spell a path differently.
func (s *Store) raiseRevokeReasonSQL() string {
	if s.d == SQLite {
		return `UPDATE river_job SET args = jsonb_set(args, '$.reason', 1) WHERE id = $1 AND state IN ('available', 'scheduled', 'retryable', 'pending')`
	}
	return `UPDATE river_job SET args = jsonb_set(args, '{reason}', '1') WHERE id = $1 AND state IN ('available', 'scheduled', 'retryable', 'pending')`
}

func (s *Store) RevokeQueue(ctx context.Context, serial, profile string, reason int, ev store.AuditEvent) (int64, error) {
	var id int64
	err := s.inTx(ctx, func(t *txn) error {
		c, err := s.certBySerial(ctx, t, serial)
		if err != nil {
			return err
		}
		if c.RevokedAt != nil {
			return fmt.Errorf("queueing revocation of certificate %s: it was already revoked: %w", serial, store.ErrConflict)
		}
		if err := s.audit(ctx, t, ev); err != nil {
			return err
		}
		var inserted bool
		id, inserted, err = s.insertJob(ctx, t, jobs.SignerRevokeArgs{Serial: serial, Profile: profile, Reason: reason})
		if err != nil || reason != store.ReasonKeyCompromise {
			return err
		}
		if !inserted {
			// It joined a job queued for another reason: the backend is
			// told keyCompromise instead, unless the job has started.
			if _, err := t.exec(ctx, s.raiseRevokeReasonSQL(), id); err != nil {
				return fmt.Errorf("raising the reason of signer_revoke job %d to keyCompromise: %w", id, err)
			}
		}
		// The report is of the key, whatever the backend answers or when:
		// the key is blocked and its other certificates revoked now, not
		// when the backend's revocation is recorded (a request that joined
		// an earlier job for another reason would never block it).
		return s.compromised(ctx, t, []*store.Certificate{c}, ev)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// revokedCountSQL reads certificates_revoked_idx (migration 0008), which
// holds only revoked certificates, so it costs what the CA has revoked, not
// what it has issued (TestFleetPlans). On a table never analyzed,
// PostgreSQL chose a sequential scan of every certificate for the plain
// count; counting an ordered subquery whose limit it cannot see ($2, the
// largest bigint: no limit at all), as where.page pages, it plans to stop
// early and reads the index.
const revokedCountSQL = `SELECT count(*) FROM (SELECT seq FROM certificates WHERE revoked_at IS NOT NULL AND issuer_id = $1
ORDER BY seq LIMIT (SELECT CAST($2 AS bigint))) revoked`

func (s *Store) RevokedCount(ctx context.Context, issuerID string) (int, error) {
	var n int64
	err := s.plannedRead(ctx, func(t *txn) error {
		return t.queryRow(ctx, revokedCountSQL, issuerID, int64(math.MaxInt64)).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("counting the revoked certificates of issuer %s: %w", issuerID, err)
	}
	return int(n), nil
}

// undeliveredInsertSQL stores a certificate no order took
// (UndeliveredRecord): $1 the serial, $2 its order, $3..$12 the columns.
// Nothing is inserted when the serial is stored already.
const undeliveredInsertSQL = `INSERT INTO certificates (serial, order_id, account_id, issuer_id, profile, der, chain_pem, names, not_before, not_after, spki_sha256, crl_shard)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (serial) DO NOTHING`

func (s *Store) UndeliveredRecord(ctx context.Context, c store.Certificate, reason int, ev store.AuditEvent) error {
	names := c.Names
	if names == nil {
		names = []string{}
	}
	nt, err := jsonText(names)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(t *txn) error {
		n, err := t.exec(ctx, undeliveredInsertSQL, c.Serial, c.OrderID, c.AccountID, c.IssuerID, c.Profile,
			nonNil(c.DER), nonNil(c.ChainPEM), nt, s.d.T(c.NotBefore), s.d.T(c.NotAfter), nullBytes(c.SPKIHash), c.CRLShard)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("certificate %s is stored already: %w", c.Serial, store.ErrConflict)
		}
		// Its names, so the operator finds it by name; no
		// certificate_domains rows: the subscriber never received it, and
		// it does not count against their certificates-per-domain limit.
		var b batch
		rows := make([][]any, len(names))
		for i, name := range names {
			rows[i] = []any{c.Serial, name}
		}
		queueRows(&b, "storing the names of certificate "+c.Serial,
			`INSERT INTO certificate_names (serial, name)`, `($1, $2)`, ` ON CONFLICT DO NOTHING`, rows)
		b.exec("registering issuer "+c.IssuerID, issuerRegisterSQL, c.IssuerID)
		if _, err := t.send(ctx, &b); err != nil {
			return err
		}
		if err := s.audit(ctx, t, ev); err != nil {
			return err
		}
		if store.RemoteIssuer(c.IssuerID) {
			// Its backend's CA publishes its status: ask it to revoke,
			// as an operator's revocation would (RevokeQueue).
			_, err := s.enqueueJob(ctx, t, jobs.SignerRevokeArgs{Serial: c.Serial, Profile: c.Profile, Reason: reason})
			return err
		}
		// Ours: revoked now, listed by its issuer's next CRL (Revoke).
		if _, err := t.exec(ctx, `UPDATE certificates SET revoked_at = {now}, revocation_reason = $2 WHERE serial = $1`, c.Serial, reason); err != nil {
			return err
		}
		if _, err := t.exec(ctx, revocationInsertSQL, c.Serial); err != nil {
			return err
		}
		return s.enqueue(ctx, t, jobs.CRLGenerateArgs{IssuerID: c.IssuerID, Shard: c.CRLShard})
	})
	if err != nil {
		return fmt.Errorf("recording undelivered certificate %s of order %s: %w", c.Serial, c.OrderID, err)
	}
	s.issuers.add(c.IssuerID)
	return nil
}
