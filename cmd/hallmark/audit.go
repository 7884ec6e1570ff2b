package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "the audit log: operators' actions and the issuance trail",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list audit events, newest first", Flags: []cli.Flag{
				&cli.StringFlag{Name: "kind", Usage: "only `K`: trail (the issuance trail), operator (everything else), or one action (" + strings.Join(store.TrailActions, ", ") + ", revoke, ...)"},
				&cli.StringFlag{Name: "since", Usage: "only events at or after `T`: a duration back from now (90m, 24h, 7d), a date (2006-01-02) or RFC 3339"},
				&cli.StringFlag{Name: "request-id", Usage: "only the events of one request (its X-Request-Id)"},
				limitFlag, jsonFlag,
			}, Action: withSession(auditList)},
			{Name: "verify", Usage: "check the audit log's hash chains and report the first broken link (exit 7)",
				Flags: []cli.Flag{jsonFlag}, Action: withSession(auditVerify)},
			{Name: "export", Usage: "print the audit log as JSON lines, oldest first, for a SIEM",
				Flags:  []cli.Flag{&cli.Int64Flag{Name: "after", Usage: "only events with an id above `ID` (the last one exported)"}},
				Action: withSession(auditExport)},
		},
	}
}

func auditList(ctx context.Context, s *session, c *cli.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	f := store.AuditFilter{RequestID: c.String("request-id")}
	switch k := c.String("kind"); k {
	case "":
	case "trail", "operator":
		trail := k == "trail"
		f.Trail = &trail
	default:
		if strings.ContainsAny(k, " \t") {
			return usage("--kind %q is not trail, operator or an action name", k)
		}
		f.Action = k
	}
	if since := c.String("since"); since != "" {
		t, ok := parseSince(since, time.Now())
		if !ok {
			return usage("--since %q is neither a duration back from now (90m, 24h, 7d), a date (2006-01-02) nor RFC 3339", since)
		}
		f.Since = t
	}
	evs, err := store.Rows(limit, func(p store.Page) ([]store.AuditEvent, string, error) { return s.st.AuditFind(ctx, f, p) })
	if err != nil {
		return err
	}
	if s.json {
		out := make([]operator.AuditLine, len(evs))
		for i, e := range evs {
			out[i] = operator.AuditLineOf(e)
		}
		return s.emit(out)
	}
	rows := make([][]string, len(evs))
	for i, e := range evs {
		client := orDash(e.Origin.ClientAddr)
		if e.Origin.PTR != "" {
			client += " (" + e.Origin.PTR + ")"
		}
		rows[i] = []string{when(e.At), e.Actor, e.Action, orDash(e.Subject), client, orDash(e.Origin.RequestID),
			orDash(e.Origin.UserAgent), orDash(e.Detail)}
	}
	s.table([]string{"WHEN", "ACTOR", "ACTION", "SUBJECT", "CLIENT", "REQUEST", "USER AGENT", "DETAIL"}, rows)
	return nil
}

// parseSince reads --since: a duration back from now (Go's, or whole
// days as "7d"), or a date or time parseDate takes.
func parseSince(s string, now time.Time) (time.Time, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), true
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), true
	}
	return parseDate(s)
}

// auditVerify checks both chains (store.VerifyAudit) and exits 7 naming the
// first broken link. The heads it prints are worth keeping elsewhere: a
// chain rewritten from some row onwards verifies, but no longer ends there.
func auditVerify(ctx context.Context, s *session, c *cli.Context) error {
	rep, err := store.VerifyAudit(ctx, s.st)
	if err != nil {
		return err
	}
	if s.json {
		out := map[string]any{"ok": rep.Break == nil, "rows": rep.Rows, "unchained": rep.Unchained,
			"operators": rep.Operators, "trail": rep.Trail}
		if rep.Break != nil {
			out["break"] = map[string]any{"trail": rep.Break.Trail, "seq": rep.Break.Seq, "id": rep.Break.ID, "why": rep.Break.Why}
		}
		if err := s.emit(out); err != nil {
			return err
		}
	} else {
		s.fields([][2]string{
			{"rows verified", fmt.Sprint(rep.Rows)},
			{"operators' chain", fmt.Sprintf("seq %d, head %s", rep.Operators.Seq, rep.Operators.Hash)},
			{"trail's chain", fmt.Sprintf("seq %d, head %s (base %d: older rows pruned)", rep.Trail.Seq, rep.Trail.Hash, rep.Trail.BaseSeq)},
			{"unchained", fmt.Sprintf("%d (recorded before migration 0023)", rep.Unchained)},
		})
	}
	if rep.Break != nil {
		return cli.Exit(rep.Break.Error()+"; restore the log from a backup or an export and find who wrote to the database directly", exitBroken)
	}
	return nil
}

// auditExport prints every event after --after as one JSON object a line,
// oldest first, with its place in its chain (operator.ExportAudit, which
// the admin API's export serves too).
func auditExport(ctx context.Context, s *session, c *cli.Context) error {
	_, err := operator.ExportAudit(ctx, s.st, c.Int64("after"), s.out)
	return err
}
