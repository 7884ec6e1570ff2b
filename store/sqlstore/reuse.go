package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// reusableChunk is how many identifiers one AuthzsReusable statement
// asks about: five parameters each, well under SQLite's limit of 32,766.
const reusableChunk = 500

// AuthzsReusable is a read: it runs autocommitted, choosing each key's
// authorization and reading it with its challenges in one statement for
// all of them (per reusableChunk keys), not one per identifier: a
// newOrder of 100 names asks once. A newOrder of at most reusableChunk
// names asks with its nonce instead (LookupReusable, newLookup).
func (s *Store) AuthzsReusable(ctx context.Context, accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) ([]*store.Authorization, error) {
	found := make([]authzRows, len(keys))
	err := s.autocommit(ctx, func(t *txn) error {
		for lo := 0; lo < len(keys); lo += reusableChunk {
			chunk := keys[lo:min(lo+reusableChunk, len(keys))]
			q, args := s.reusableSQL(accountID, chunk, methods, minExpiry)
			if err := collect(ctx, t, reusableRows(found[lo:lo+len(chunk)]), q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding reusable authorizations: %w", err)
	}
	return reusableFound(found), nil
}

// reusableSQL is the statement answering keys (at most reusableChunk):
// the keys are a VALUES list, and each chooses its authorization with a
// correlated subquery, which both PostgreSQL and SQLite plan as an index
// lookup per key: authorizations_reuse_idx's range of the key's name.
// The status is hidden from index choice (concatenated with an empty
// string, as the verdict's statements do): on statistics
// that do not know an account's authorizations became valid (never
// analyzed, or not since), PostgreSQL chose authorizations_account_status_idx
// and walked every valid authorization of the account for each key, 20,000
// of them for a fleet's account (TestReusablePlans). Its rows carry the
// key's index in keys first. A key asking for Corroborated skips an
// authorization a challenge validated that perspectives did not
// corroborate (one born valid, pre-validated by a binding, had no network
// check to corroborate). With
// methods non-nil, a candidate counts only if it has a valid challenge of
// one of those types, or no challenge at all (born valid): an EXISTS on
// challenges_authz_idx for each of the key's few candidates.
func (s *Store) reusableSQL(accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) (string, []any) {
	var q strings.Builder
	args := []any{accountID, s.d.T(minExpiry)}
	method := ""
	if methods != nil {
		method = `
    AND (NOT EXISTS (SELECT 1 FROM challenges v WHERE v.authz_id = r.id)`
		if len(methods) > 0 {
			method += `
      OR EXISTS (SELECT 1 FROM challenges v WHERE v.authz_id = r.id AND v.status = 'valid' AND v.type IN (`
			for i, m := range methods {
				if i > 0 {
					method += ", "
				}
				args = append(args, string(m))
				method += fmt.Sprintf("CAST($%d AS TEXT)", len(args))
			}
			method += "))"
		}
		method += ")"
	}
	q.WriteString("WITH want (i, typ, val, wc, cor) AS (VALUES ")
	for i, k := range keys {
		if i > 0 {
			q.WriteString(", ")
		}
		n := len(args)
		fmt.Fprintf(&q, "(CAST($%d AS INTEGER), CAST($%d AS TEXT), CAST($%d AS TEXT), CAST($%d AS BOOLEAN), CAST($%d AS BOOLEAN))", n+1, n+2, n+3, n+4, n+5)
		args = append(args, i, string(k.Identifier.Type), k.Identifier.Value, k.Wildcard, k.Corroborated)
	}
	q.WriteString(`)
SELECT w.i, ` + authzChallengeCols + `
FROM want w
JOIN authorizations a ON a.id = (SELECT r.id FROM authorizations r
  WHERE r.account_id = $1 AND r.identifier_type = w.typ AND r.identifier_value = w.val AND r.wildcard = w.wc
    AND r.status || '' = 'valid' AND r.expires_at > $2 AND r.expires_at > {now}
    AND (r.corroborated OR NOT w.cor OR NOT EXISTS (SELECT 1 FROM challenges v WHERE v.authz_id = r.id))` + method + `
  ORDER BY r.expires_at DESC LIMIT 1)
LEFT JOIN challenges c ON c.authz_id = a.id
ORDER BY w.i, c.position`)
	return q.String(), args
}

// reusableRows reads reusableSQL's rows into found, one per key asked.
func reusableRows(found []authzRows) func(Rows) error {
	return func(r Rows) error {
		var i int
		a, ch, err := scanAuthzRow(r, &i)
		if err != nil {
			return err
		}
		if i < 0 || i >= len(found) {
			return fmt.Errorf("a reusable authorization for key %d, not asked for", i)
		}
		found[i].add(a, ch)
		return nil
	}
}

// reusableFound is found as AuthzsReusable answers it.
func reusableFound(found []authzRows) []*store.Authorization {
	out := make([]*store.Authorization, len(found))
	for i := range found {
		out[i] = found[i].out
	}
	return out
}

// checkReuse makes sure every authorization o reuses exists, is the
// account's own, and is valid and unexpired, in one read. On PostgreSQL the
// read takes a share lock on them (in id order) until the order commits: an
// AuthzDeactivate (or any other change to them) waits for the order, and
// then finds it among the authorization's orders and invalidates it; one
// that moved first is seen here, in the row's latest version, and the
// order is refused. AuthzsReusable, which chose them, ran before this
// transaction, so an authorization may have stopped being valid since.
// The refusal is store.ErrAuthzUnusable: the frontend drafts the order
// again, and finds fresh authorizations.
func checkReuse(ctx context.Context, t *txn, o store.NewOrder) error {
	var ids []any
	seen := map[string]bool{}
	for _, a := range o.Authzs {
		if a.ID != "" && !seen[a.ID] {
			seen[a.ID] = true
			ids = append(ids, a.ID)
		}
	}
	slices.SortFunc(ids, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	type reused struct {
		owner, status string
		live, cor     bool
	}
	found := map[string]reused{}
	for len(ids) > 0 {
		n := min(len(ids), maxRowsPerStatement)
		if err := collect(ctx, t, func(r Rows) error {
			var id string
			var a reused
			var live, cor int64
			if err := r.Scan(&id, &a.owner, &a.status, &live, &cor); err != nil {
				return err
			}
			a.live, a.cor = live == 1, cor == 1
			found[id] = a
			return nil
		}, `SELECT id, account_id, status, CASE WHEN expires_at > {now} THEN 1 ELSE 0 END,
  CASE WHEN corroborated THEN 1 ELSE 0 END FROM authorizations
WHERE id IN (`+paramList(n)+`) ORDER BY id {forshare}`, ids[:n]...); err != nil {
			return err
		}
		ids = ids[n:]
	}
	for _, a := range o.Authzs {
		if a.ID == "" {
			continue
		}
		r, ok := found[a.ID]
		if !ok {
			return fmt.Errorf("reusing authorization %s: %w", a.ID, store.ErrNotFound)
		}
		if r.owner != o.AccountID {
			return fmt.Errorf("reusing authorization %s of another account: %w", a.ID, store.ErrNotFound)
		}
		if r.status != string(acme.StatusValid) || !r.live {
			why := r.status
			if r.status == string(acme.StatusValid) {
				why = "expired"
			}
			return fmt.Errorf("reusing authorization %s: it is %s, not valid: %w", a.ID, why, store.ErrAuthzUnusable)
		}
		if o.Corroborated && !r.cor && len(a.Challenges) > 0 {
			return fmt.Errorf("reusing authorization %s: network perspectives did not corroborate it, and profile %q requires it: %w", a.ID, o.Profile, store.ErrAuthzUnusable)
		}
	}
	return nil
}
