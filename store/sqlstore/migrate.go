package sqlstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/hallmark-ca/hallmark/migrations"
	"github.com/hallmark-ca/hallmark/store"
)

// MigrationStatus is where a database stands against this binary's
// migrations.
type MigrationStatus struct {
	Dialect string
	Applied []int // versions recorded in schema_migrations, ascending
	Pending []int // versions this binary has and the database lacks
	Latest  int   // the newest version this binary knows
	// MigratedBy is the release that last migrated the database (nil
	// before migration 15, or when no binary recorded itself yet).
	MigratedBy *ReleaseRecord
}

// Current is the newest applied version (0 for an empty database).
func (m MigrationStatus) Current() int {
	if len(m.Applied) == 0 {
		return 0
	}
	return m.Applied[len(m.Applied)-1]
}

func appliedVersions(ctx context.Context, t *txn) ([]int, error) {
	var out []int
	err := collect(ctx, t, func(r Rows) error {
		var v int64
		if err := r.Scan(&v); err != nil {
			return err
		}
		out = append(out, int(v))
		return nil
	}, `SELECT version FROM schema_migrations ORDER BY version`)
	return out, err
}

// tooNew is store.ErrTooNew with the sentence an operator needs.
func tooNew(d *Dialect, applied []int, latest int) error {
	if len(applied) == 0 || applied[len(applied)-1] <= latest {
		return nil
	}
	return fmt.Errorf("%w: the %s database is at schema version %d but this binary knows only up to %d; "+
		"upgrade hallmark to the release that wrote version %d (migrations are forward-only, never downgrade)",
		store.ErrTooNew, d.Name, applied[len(applied)-1], latest, applied[len(applied)-1])
}

// Status reports applied and pending versions without changing anything.
// It returns store.ErrTooNew (with the status) when the database has a
// version this binary does not know.
func Status(ctx context.Context, c Conn, d *Dialect) (MigrationStatus, error) {
	files, err := migrations.Files(d.Name)
	if err != nil {
		return MigrationStatus{}, err
	}
	st := MigrationStatus{Dialect: d.Name}
	if len(files) > 0 {
		st.Latest = files[len(files)-1].Version
	}
	t := &txn{d: d, c: c}
	err = c.InTx(ctx, func(raw Tx) error {
		t.raw = raw
		var exists int64
		if err := t.queryRow(ctx, d.migrationsExists).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return nil
		}
		if st.Applied, err = appliedVersions(ctx, t); err != nil || !slices.Contains(st.Applied, releasesVersion) {
			return err
		}
		last, ok, err := lastRelease(ctx, t)
		if ok {
			st.MigratedBy = &last
		}
		return err
	})
	if err != nil {
		return st, fmt.Errorf("reading the schema version: %w", err)
	}
	for _, f := range files {
		if !slices.Contains(st.Applied, f.Version) {
			st.Pending = append(st.Pending, f.Version)
		}
	}
	return st, tooNew(d, st.Applied, st.Latest)
}

// Migrate applies the pending migrations in version order, each in its own
// transaction together with its schema_migrations row, and returns the
// versions it applied. Concurrent migrators are serialized (an advisory lock
// on PostgreSQL, BEGIN IMMEDIATE on SQLite), so each version runs once. It
// refuses, changing nothing, a database with a version this binary does not
// know (store.ErrTooNew).
func Migrate(ctx context.Context, c Conn, d *Dialect) ([]int, error) {
	files, err := migrations.Files(d.Name)
	if err != nil {
		return nil, err
	}
	latest := 0
	if len(files) > 0 {
		latest = files[len(files)-1].Version
	}
	var done []int
	for _, f := range files {
		err := c.InTx(ctx, func(raw Tx) error {
			t := &txn{raw: raw, d: d, c: c}
			if d.migrationLock != "" {
				if _, err := raw.Exec(ctx, d.migrationLock); err != nil {
					return fmt.Errorf("locking for migration: %w", err)
				}
			}
			if _, err := raw.Exec(ctx, d.migrationsTable); err != nil {
				return fmt.Errorf("creating schema_migrations: %w", err)
			}
			applied, err := appliedVersions(ctx, t)
			if err != nil {
				return err
			}
			if err := tooNew(d, applied, latest); err != nil {
				return err
			}
			if slices.Contains(applied, f.Version) {
				return nil
			}
			// Raw: migration text is not a store query and has no tokens.
			if _, err := raw.Exec(ctx, f.SQL); err != nil {
				return fmt.Errorf("applying migration %s/%s: %w", d.Name, f.Name, err)
			}
			if _, err := t.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, {now})`, f.Version, f.Name); err != nil {
				return fmt.Errorf("recording migration %s/%s: %w", d.Name, f.Name, err)
			}
			done = append(done, f.Version)
			return nil
		})
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
