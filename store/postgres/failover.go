package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Failover: database.url may name several hosts
// (postgres://h1:5432,h2:5432/db?target_session_attrs=read-write), and pgx
// dials them in turn until one accepts writes. A connection made before a
// failover may end up on a server that no longer does (a primary fenced
// read-only, or demoted): its statements fail with SQLSTATE 25006, which
// Classify reports as an outage (503 + Retry-After), and readOnlyDrop
// closes it when it goes back to the pool instead of reusing it, so the
// next request dials the hosts again and finds the new primary.

// readOnlyDrop is a pgx tracer that marks each connection whose statement
// a read-only server refused, and the pool hook that closes a marked
// connection on release. Every pool made from the configuration (River's
// runner pool copies it) shares it.
type readOnlyDrop struct {
	marked sync.Map // *pgx.Conn → struct{}
}

// readOnly reports whether err is a read-only server's refusal of a write.
func readOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}

func (d *readOnlyDrop) note(conn *pgx.Conn, err error) {
	if readOnly(err) {
		d.marked.Store(conn, struct{}{})
	}
}

// keep is pgxpool's AfterRelease: false closes the connection.
func (d *readOnlyDrop) keep(conn *pgx.Conn) bool {
	_, bad := d.marked.LoadAndDelete(conn)
	return !bad
}

func (d *readOnlyDrop) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (d *readOnlyDrop) TraceQueryEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	d.note(conn, data.Err)
}

func (d *readOnlyDrop) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (d *readOnlyDrop) TraceBatchQuery(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	d.note(conn, data.Err)
}

func (d *readOnlyDrop) TraceBatchEnd(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	d.note(conn, data.Err)
}

// dropReadOnly installs a readOnlyDrop on cfg, beside any tracer and
// release hook it has.
func dropReadOnly(cfg *pgxpool.Config) {
	d := &readOnlyDrop{}
	if cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = d
	} else {
		cfg.ConnConfig.Tracer = multitracer.New(cfg.ConnConfig.Tracer, d)
	}
	after := cfg.AfterRelease
	cfg.AfterRelease = func(c *pgx.Conn) bool {
		keep := d.keep(c)
		if after != nil && !after(c) {
			return false
		}
		return keep
	}
}

// writable reports whether conn's server accepts writes now: not a standby
// (pg_is_in_recovery) and not fenced read-only
// (default_transaction_read_only). The verdict listener asks it while
// idle, since LISTEN alone works on either and a notification never comes
// from a server that takes no writes.
func writable(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ro bool
	err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'`).Scan(&ro)
	return !ro, err
}
