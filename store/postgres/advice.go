package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Advice reads the server settings that decide whether a certificate
// Hallmark has handed out survives a crash, and whether issuance stays as
// fast as the tables grow, and says what an operator should change, one
// sentence each; none when all is well. The frontend and the worker log
// it at startup. It reads the settings of one of pool's sessions, so a
// setting made for Hallmark's role or database (ALTER ROLE ... SET) is
// what it sees.
func Advice(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var fsync, syncCommit, fullPages, autovacuum string
	err := pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
       current_setting('full_page_writes'), current_setting('autovacuum')`).Scan(&fsync, &syncCommit, &fullPages, &autovacuum)
	if err != nil {
		return nil, fmt.Errorf("reading PostgreSQL's settings: %w", err)
	}
	var out []string
	if fsync == "off" {
		out = append(out, "PostgreSQL runs with fsync = off: a crash of the machine can corrupt the database and lose certificates already issued; set fsync = on")
	}
	if fullPages == "off" {
		out = append(out, "PostgreSQL runs with full_page_writes = off: a crash in the middle of a page write can corrupt the database; set full_page_writes = on")
	}
	// "local", "remote_write", "on" and "remote_apply" all wait for this
	// server's WAL flush; only "off" answers before it. River's own
	// sessions in the worker commit asynchronously on purpose (jobs/queue.go:
	// runnerPool); this pool is the store's.
	if syncCommit == "off" {
		out = append(out, "PostgreSQL commits Hallmark's transactions with synchronous_commit = off: a crash can lose orders and certificates already answered to clients; set it to on (the default) for Hallmark's role and database")
	}
	if autovacuum == "off" {
		out = append(out, "PostgreSQL's autovacuum is off: River's job table and Hallmark's orders and authorizations keep every dead row version and their indexes grow, so each issuance costs more than the last; set autovacuum = on, or run VACUUM ANALYZE on a schedule")
	}
	// A table can also be left out on its own; said even when the server's
	// switch is off too, as turning that on would not cover it. The option
	// is stored as written (off, false, no, 0, ...); PostgreSQL checked it
	// was a boolean when it was set, and its own cast reads it back.
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
  AND EXISTS (SELECT 1 FROM unnest(c.reloptions) o
              WHERE split_part(o, '=', 1) = 'autovacuum_enabled' AND NOT split_part(o, '=', 2)::boolean)
ORDER BY c.relname`)
	if err != nil {
		return out, fmt.Errorf("reading PostgreSQL's table settings: %w", err)
	}
	var off []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return out, fmt.Errorf("reading PostgreSQL's table settings: %w", err)
		}
		off = append(off, name)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("reading PostgreSQL's table settings: %w", err)
	}
	if len(off) > 0 {
		out = append(out, fmt.Sprintf("PostgreSQL's autovacuum is off for %s: they keep every dead row version and their indexes grow, so each issuance costs more than the last; ALTER TABLE ... RESET (autovacuum_enabled), or run VACUUM ANALYZE on a schedule", strings.Join(off, ", ")))
	}
	return out, nil
}
