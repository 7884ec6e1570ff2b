package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/redact"
)

func backupCommand() *cli.Command {
	return &cli.Command{
		Name:      "backup",
		Usage:     "copy the SQLite database, consistent, while the CA runs",
		ArgsUsage: "FILE",
		Description: "Writes every committed row of the embedded SQLite database to FILE as one snapshot, while the frontend\n" +
			"and the worker go on (VACUUM INTO), checks the copy and moves it into place whole. It holds no keys:\n" +
			"back up the CA's key files (or its PKCS#11 token) on their own. PostgreSQL is backed up with its own\n" +
			"tools (exit 2). docs/operations.md, Backups, says how to restore and what a restore loses.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Usage: "replace FILE if it exists"},
			jsonFlag,
		},
		Action: withSession(backup),
	}
}

type backupReport struct {
	Database      string    `json:"database"`
	File          string    `json:"file"`
	Bytes         int64     `json:"bytes"`
	SchemaVersion int       `json:"schema_version"`
	At            time.Time `json:"at"`
}

func backup(ctx context.Context, s *session, c *cli.Context) error {
	file, err := oneArg(c, "FILE")
	if err != nil {
		return err
	}
	if _, err := os.Stat(file); err == nil && !c.Bool("force") {
		return usage("%s exists; name a new file, or pass --force to replace it", file)
	}
	b, err := s.db.Backup(ctx, file)
	if errors.Is(err, open.ErrBackupElsewhere) {
		return usage("%v", err)
	}
	if err != nil {
		return err
	}
	rep := backupReport{Database: redact.URL(s.cfg.Database.URL), File: b.Path, Bytes: b.Bytes, SchemaVersion: b.SchemaVersion, At: b.At.UTC()}
	if s.json {
		return s.emit(rep)
	}
	fmt.Fprintf(s.out, "backed up %s to %s: %d bytes, schema version %d, as of %s (the database's clock)\n",
		rep.Database, rep.File, rep.Bytes, rep.SchemaVersion, rep.At.Format(time.RFC3339))
	fmt.Fprintln(s.out, "the copy holds no keys: keep the CA's key files (or its token) backed up as well")
	return nil
}
