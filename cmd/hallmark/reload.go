package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// reloadCommand asks every frontend and worker sharing the database to
// reload the configuration, and reports what each did. The request goes
// through the database, which every process polls (cmd/internal/reload):
// processes on other hosts hear it too, and no pid file or signal
// permission is needed (docs/operations.md, "Reloading the configuration").
func reloadCommand() *cli.Command {
	return &cli.Command{
		Name:  "reload",
		Usage: "make every frontend and worker reload the configuration file, and report each one's outcome",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "wait", Value: 8 * time.Second, Usage: "how long to collect the processes' answers (each polls every 2s)"},
			&cli.IntFlag{Name: "expect", Usage: "stop waiting once `N` processes have answered"},
			jsonFlag,
		},
		Action: withSession(reloadRun),
	}
}

// reloadRow is one process's answer.
type reloadRow struct {
	Process string    `json:"process"`
	Outcome string    `json:"outcome"`
	At      time.Time `json:"at"`
}

func reloadRun(ctx context.Context, s *session, c *cli.Context) error {
	since, err := s.st.Now(ctx)
	if err != nil {
		return err
	}
	ev := store.AuditEvent{Actor: operator.CLIActor(), Action: store.ActionReloadRequested, Detail: "hallmark reload"}
	if err := s.st.AuditRecord(ctx, ev); err != nil {
		return fmt.Errorf("recording the reload request: %w", err)
	}
	// A request recorded after ours covers ours: processes answer the newest.
	id, err := s.st.ReloadRequested(ctx)
	if err != nil {
		return err
	}
	rows, err := reloadAnswers(ctx, s, id, since.Add(-time.Second), c.Duration("wait"), c.Int("expect"))
	if err != nil {
		return err
	}
	if s.json {
		if err := s.emit(rows); err != nil {
			return err
		}
	} else if len(rows) > 0 {
		table := make([][]string, len(rows))
		for i, r := range rows {
			table[i] = []string{r.Process, r.Outcome, r.At.UTC().Format(time.RFC3339)}
		}
		s.table([]string{"PROCESS", "OUTCOME", "AT"}, table)
	}
	if len(rows) == 0 {
		return cli.Exit(fmt.Sprintf("reload request %d recorded, but no frontend or worker answered within %s: are they running, on this database? (SIGHUP or `systemctl reload` reloads one directly)", id, c.Duration("wait")), exitError)
	}
	for _, r := range rows {
		if r.Outcome != "applied" {
			return cli.Exit("a process refused the reload and keeps its old configuration; its outcome above says why", exitNothing)
		}
	}
	return nil
}

// reloadAnswers polls the audit log until wait passes or expect processes
// have answered request id (or a newer one), the latest answer of each.
func reloadAnswers(ctx context.Context, s *session, id int64, since time.Time, wait time.Duration, expect int) ([]reloadRow, error) {
	deadline := time.Now().Add(wait)
	for {
		evs, err := store.Rows(1000, func(p store.Page) ([]store.AuditEvent, string, error) {
			return s.st.AuditFind(ctx, store.AuditFilter{Action: store.ActionReload, Since: since}, p)
		})
		if err != nil {
			return nil, err
		}
		latest := map[string]reloadRow{}
		for _, e := range evs {
			n, ok := strings.CutPrefix(e.Subject, "request:")
			if k, err := strconv.ParseInt(n, 10, 64); !ok || err != nil || k < id {
				continue
			}
			if r, seen := latest[e.Actor]; !seen || e.At.After(r.At) {
				latest[e.Actor] = reloadRow{Process: e.Actor, Outcome: e.Detail, At: e.At}
			}
		}
		if (expect > 0 && len(latest) >= expect) || !time.Now().Before(deadline) {
			rows := make([]reloadRow, 0, len(latest))
			for _, r := range latest {
				rows = append(rows, r)
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i].Process < rows[j].Process })
			return rows, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
