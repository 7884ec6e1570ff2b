package main

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/version"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/redact"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "apply the database migrations (Hallmark's and the job queue's) and record this release in the database",
		Action: func(c *cli.Context) error {
			cfg, err := config.Load(c.String("config"))
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			db, err := migrate(c.Context, cfg.Database.URL)
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			defer db.Close()
			fmt.Println("database is up to date")
			// The operator setting up the database is the one to
			// tell; the frontend and the worker log the same.
			advice, err := db.Advice(c.Context)
			if err != nil {
				fmt.Fprintf(os.Stderr, "warning: could not review the database's settings: %s\n", redact.Text(err.Error()))
			}
			for _, a := range advice {
				fmt.Fprintf(os.Stderr, "warning: %s\n", a)
			}
			return nil
		},
		Subcommands: []*cli.Command{{
			Name:   "status",
			Usage:  "list applied and pending migrations, and the release that last migrated the database",
			Action: migrateStatus,
		}},
	}
}

// migrate opens url, applies every migration and records this binary as
// the release that migrated the database (schema_releases). The caller
// closes the database.
func migrate(ctx context.Context, url string) (*open.DB, error) {
	db, err := open.Open(ctx, url, 2)
	if err == nil {
		err = db.Migrate(ctx)
		if err == nil {
			v := version.Get()
			_, err = db.RecordRelease(ctx, open.Release{Version: v.Version, Commit: v.Commit, Built: v.Date})
		}
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("migrating %s: %v", redact.URL(url), err)
	}
	return db, nil
}

func migrateStatus(c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	st, err := open.Status(c.Context, cfg.Database.URL)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	fmt.Printf("dialect %s: schema version %d, this binary knows %d\n", st.Dialect, st.Current(), st.Latest)
	if r := st.MigratedBy; r != nil {
		fmt.Printf("migrated by hallmark %s (commit %s, built %s) at %s, to schema version %d\n",
			r.Version, r.Commit, r.Built, r.MigratedAt.UTC().Format("2006-01-02 15:04:05Z"), r.Schema)
	}
	for _, v := range st.Applied {
		fmt.Printf("  %04d applied\n", v)
	}
	for _, v := range st.Pending {
		fmt.Printf("  %04d pending\n", v)
	}
	if len(st.Pending) > 0 {
		return cli.Exit("migrations are pending: run `hallmark migrate`", 3)
	}
	return nil
}
