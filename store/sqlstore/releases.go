package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// releasesVersion is the migration that creates schema_releases.
const releasesVersion = 15

// Release names the binary that migrated a database, as it reports itself
// (`hallmark version`).
type Release struct {
	Version string // git describe
	Commit  string
	Built   string // the build date
}

// ReleaseRecord is one row of schema_releases.
type ReleaseRecord struct {
	Release
	Schema     int // the newest migration applied when it ran
	MigratedAt time.Time
}

// RecordRelease notes that rel migrated the database, now at its newest
// applied migration, unless the newest record already says so. It reports
// whether it added a row; a database without schema_releases (not
// migrated that far) is an error.
func RecordRelease(ctx context.Context, c Conn, d *Dialect, rel Release) (bool, error) {
	added := false
	err := c.InTx(ctx, func(raw Tx) error {
		t := &txn{raw: raw, d: d, c: c}
		applied, err := appliedVersions(ctx, t)
		if err != nil {
			return err
		}
		if !slices.Contains(applied, releasesVersion) {
			return fmt.Errorf("the database is not migrated to version %d, which records releases: run `hallmark migrate`", releasesVersion)
		}
		schema := applied[len(applied)-1]
		last, ok, err := lastRelease(ctx, t)
		if err != nil || (ok && last.Release == rel && last.Schema == schema) {
			return err
		}
		_, err = t.exec(ctx, `INSERT INTO schema_releases (version, commit_hash, built, schema_version, migrated_at) VALUES ($1, $2, $3, $4, {now})`,
			rel.Version, rel.Commit, rel.Built, schema)
		added = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("recording the release that migrated the database: %w", err)
	}
	return added, nil
}

// lastRelease is the newest row of schema_releases; ok is false when there
// is none.
func lastRelease(ctx context.Context, t *txn) (ReleaseRecord, bool, error) {
	var r ReleaseRecord
	var schema int64
	err := t.queryRow(ctx, `SELECT version, commit_hash, built, schema_version, migrated_at FROM schema_releases ORDER BY id DESC LIMIT 1`).
		Scan(&r.Version, &r.Commit, &r.Built, &schema, ts(&r.MigratedAt))
	if errors.Is(err, store.ErrNotFound) {
		return r, false, nil
	}
	r.Schema = int(schema)
	return r, err == nil, err
}
