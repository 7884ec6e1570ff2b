package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// Failing runs of validations (store.Pauses, migration 0021). The verdict
// keeps them (streakFailSQL, streakResetSQL); an order checks them
// (pauseCheck); operators and subscribers list and lift them here.

// streakOf names the account and identifier of challenge $1's
// authorization; a wildcard's run is its base name's.
const streakOf = `FROM challenges c JOIN authorizations a ON a.id = c.authz_id WHERE c.id = $1`

// streakFailSQL adds challenge $1's failure to its account's run for the
// identifier, starting one if there is none, or a new one when the last
// failure is older than $2 microseconds (streakGap): an account that
// comes back after a long silence and fails once is not a client that
// never stopped failing.
const streakFailSQL = `INSERT INTO validation_streaks (account_id, identifier_type, identifier_value, failures, first_failed_at, last_failed_at)
SELECT a.account_id, a.identifier_type, a.identifier_value, 1, {now}, {now} ` + streakOf + `
ON CONFLICT (account_id, identifier_type, identifier_value)
DO UPDATE SET
  failures = CASE WHEN validation_streaks.last_failed_at < {now+$2} THEN 1 ELSE validation_streaks.failures + 1 END,
  first_failed_at = CASE WHEN validation_streaks.last_failed_at < {now+$2} THEN excluded.first_failed_at ELSE validation_streaks.first_failed_at END,
  last_failed_at = excluded.last_failed_at`

// streakGap is the silence that ends a run: over a week, so that a client
// retrying weekly still counts as failing continuously.
const streakGap = 8 * 24 * time.Hour

// streakResetSQL ends the run challenge $1's success breaks, found by its
// primary key (each subquery is one lookup, before the table is read).
const streakResetSQL = `DELETE FROM validation_streaks
WHERE account_id = (SELECT a.account_id ` + streakOf + `)
  AND identifier_type = (SELECT a.identifier_type ` + streakOf + `)
  AND identifier_value = (SELECT a.identifier_value ` + streakOf + `)`

// pausedWhere is the condition of a run the rule pauses: at least $N
// failures ($min), the first at or before the database clock plus $M
// microseconds (negative: $ago).
func pausedWhere(min, ago string) string {
	return `failures >= ` + min + ` AND first_failed_at <= {now+` + ago + `}`
}

// pauseCheck queues on b a statement that finds a row only when o's
// account is paused for none of o's identifiers; -1 when o.Pause is off.
func pauseCheck(b *batch, o store.NewOrder, dest *int) int {
	if !o.Pause.On() || len(o.Identifiers) == 0 {
		return -1
	}
	args := []any{o.AccountID, o.Pause.MinFailures, -o.Pause.After.Microseconds()}
	keys := make([]string, len(o.Identifiers))
	for i, id := range o.Identifiers {
		args = append(args, string(id.Type)+":"+id.Base().Value)
		keys[i] = "$" + strconv.Itoa(len(args))
	}
	return b.scan("", []any{dest}, `SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM validation_streaks
WHERE account_id = $1 AND `+pausedWhere("$2", "$3")+`
  AND identifier_type || ':' || identifier_value IN (`+strings.Join(keys, ", ")+`))`, args...)
}

// sendChecked sends b, whose statement check (when not -1) must find a
// row: on PostgreSQL it fails otherwise (mustMove), aborting the
// transaction with anything sent behind it, COMMIT included; elsewhere the
// caller's transaction rolls back. Either way the answer is ErrPaused.
func (t *txn) sendChecked(ctx context.Context, b *batch, check int, send func(context.Context, *batch) ([]int64, error)) ([]int64, error) {
	if check < 0 {
		return send(ctx, b)
	}
	if _, ok := t.raw.(lastBatcher); ok {
		must := mustMoveAt(b, check)
		n, err := send(ctx, &must)
		if err != nil && t.c.Classify(err) == ErrSwapLost {
			return n, store.ErrPaused
		}
		return n, err
	}
	n, err := send(ctx, b)
	if err == nil && n[check] == 0 {
		return n, store.ErrPaused
	}
	return n, err
}

func (s *Store) PausesList(ctx context.Context, rule store.PauseRule, f store.PauseFilter, p store.Page) ([]store.Pause, string, error) {
	offset := 0
	if p.After != "" {
		n, err := strconv.Atoi(p.After)
		if err != nil || n <= 0 {
			return nil, "", fmt.Errorf("page cursor %q: %w", p.After, store.ErrBadCursor)
		}
		offset = n
	}
	limit := p.Limit
	if limit <= 0 {
		limit = defaultPageLimit
	}
	limit = min(limit, maxPageLimit)
	least, ago := rule.MinFailures, -rule.After.Microseconds()
	if !rule.On() { // nobody is paused: a condition no run meets
		least = -1
	}
	q := `SELECT account_id, identifier_type, identifier_value, failures, first_failed_at, last_failed_at,
  CASE WHEN ` + pausedWhere("$1", "$2") + ` AND $1 > 0 THEN 1 ELSE 0 END
FROM validation_streaks WHERE ($3 = '' OR account_id = $3)`
	if !f.All {
		q += ` AND ` + pausedWhere("$1", "$2") + ` AND $1 > 0`
	}
	q += ` ORDER BY first_failed_at, account_id, identifier_type, identifier_value LIMIT $4 OFFSET $5`
	var out []store.Pause
	err := s.autocommit(ctx, func(t *txn) error {
		out = nil
		return collect(ctx, t, func(r Rows) error {
			var ps store.Pause
			var typ string
			var paused int
			if err := r.Scan(&ps.AccountID, &typ, &ps.Identifier.Value, &ps.Failures, ts(&ps.FirstFailed), ts(&ps.LastFailed), &paused); err != nil {
				return err
			}
			ps.Identifier.Type, ps.Paused = acme.IdentifierType(typ), paused == 1
			out = append(out, ps)
			return nil
		}, q, least, ago, f.AccountID, limit+1, offset)
	})
	if err != nil {
		return nil, "", fmt.Errorf("listing paused accounts: %w", err)
	}
	if len(out) > limit {
		return out[:limit], strconv.Itoa(offset + limit), nil
	}
	return out, "", nil
}

func (s *Store) PauseLift(ctx context.Context, accountID string, ident *acme.Identifier, ev store.AuditEvent) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(t *txn) error {
		var err error
		if ident == nil {
			n, err = t.exec(ctx, `DELETE FROM validation_streaks WHERE account_id = $1`, accountID)
		} else {
			n, err = t.exec(ctx, `DELETE FROM validation_streaks WHERE account_id = $1 AND identifier_type = $2 AND identifier_value = $3`,
				accountID, string(ident.Type), ident.Base().Value)
		}
		if err != nil || n == 0 {
			return err
		}
		ev.Subject = accountID
		if ev.Action == "" {
			ev.Action = store.ActionPauseLifted
		}
		return s.audit(ctx, t, ev)
	})
	if err != nil {
		return 0, fmt.Errorf("lifting the pauses of account %s: %w", accountID, err)
	}
	return n, nil
}
