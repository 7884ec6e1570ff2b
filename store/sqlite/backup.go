package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Backup is what Backup wrote.
type Backup struct {
	Path          string    // the copy, absolute
	Bytes         int64     // its size
	SchemaVersion int       // its newest migration (schema_migrations)
	At            time.Time // the database's clock when the copy's snapshot was read
}

// BackupTo writes a consistent copy of the database db has open to path,
// while the frontend and the worker go on using it. VACUUM INTO reads one
// snapshot in a read transaction, which in WAL mode neither waits for the
// writers nor holds them up, and writes a compact database with every
// committed row and no WAL of its own. The copy is written beside path
// under a temporary name readable by its owner alone, checked (PRAGMA integrity_check, and its schema
// version read), synced, and renamed into place with its directory synced:
// path is the old file or a whole, checked copy, never a partial one.
// Overwriting path is the caller's decision; the database's own file (db's,
// at from) is refused.
func BackupTo(ctx context.Context, db *sql.DB, from, path string) (Backup, error) {
	out := Backup{}
	abs, err := filepath.Abs(path)
	if err != nil {
		return out, fmt.Errorf("backing up to %s: %w", path, err)
	}
	out.Path = abs
	main, err := filepath.Abs(from)
	if err != nil {
		return out, err
	}
	if same, _ := sameFile(main, abs); same || main == abs {
		return out, fmt.Errorf("backing up to %s: that is the database's own file; name another", abs)
	}
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return out, err
	}
	tmp := filepath.Join(filepath.Dir(abs), "."+filepath.Base(abs)+".partial-"+hex.EncodeToString(suffix))
	defer os.Remove(tmp) // gone once renamed; left over only on failure

	// The clock first: the snapshot is read after it, so it holds at
	// least everything committed by then.
	var now string
	if err := db.QueryRowContext(ctx, `SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`).Scan(&now); err != nil {
		return out, fmt.Errorf("reading the database's clock: %w", err)
	}
	if out.At, err = time.Parse("2006-01-02T15:04:05.999Z", now); err != nil {
		return out, fmt.Errorf("reading the database's clock %q: %w", now, err)
	}
	// Empty and the owner's alone before SQLite writes it (VACUUM INTO
	// takes an empty file): the copy holds the database's secrets too.
	if err := createPrivate(tmp); err != nil {
		return out, fmt.Errorf("creating the copy %s: %w", tmp, err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return out, fmt.Errorf("copying the database to %s: %w", tmp, err)
	}
	if out.SchemaVersion, err = checkCopy(ctx, tmp); err != nil {
		return out, err
	}
	if err := syncFile(tmp); err != nil {
		return out, fmt.Errorf("syncing the copy %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, abs); err != nil {
		return out, fmt.Errorf("moving the copy into place at %s: %w", abs, err)
	}
	if err := syncFile(filepath.Dir(abs)); err != nil {
		return out, fmt.Errorf("syncing the directory of %s: %w", abs, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return out, err
	}
	out.Bytes = fi.Size()
	return out, nil
}

// checkCopy opens the copy at path read-only (it writes nothing: no WAL,
// no journal) and returns its schema version if SQLite finds it whole.
func checkCopy(ctx context.Context, path string) (int, error) {
	copyDB, err := sql.Open(driverName, "file:"+path+"?mode=ro")
	if err != nil {
		return 0, fmt.Errorf("opening the copy %s: %w", path, err)
	}
	defer copyDB.Close()
	var verdict string
	if err := copyDB.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&verdict); err != nil {
		return 0, fmt.Errorf("checking the copy %s: %w", path, err)
	}
	if verdict != "ok" {
		return 0, fmt.Errorf("checking the copy %s: SQLite's integrity check says %q; the database itself may be damaged (run PRAGMA integrity_check on it)", path, verdict)
	}
	var v sql.NullInt64
	if err := copyDB.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the copy's schema version: %w", err)
	}
	if !v.Valid {
		return 0, errors.New("backing up: the database has no Hallmark schema yet (run hallmark migrate, or start it once)")
	}
	return int(v.Int64), nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// sameFile reports whether a and b name one file (a link, another
// spelling); false when either does not exist.
func sameFile(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}
