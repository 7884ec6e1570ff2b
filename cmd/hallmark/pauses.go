package main

import (
	"context"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

func pausesCommand() *cli.Command {
	return &cli.Command{
		Name:  "pauses",
		Usage: "list and lift accounts paused for identifiers whose validations keep failing ([limits] pause_after_days)",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list paused accounts and identifiers, longest failing first", Flags: []cli.Flag{
				&cli.StringFlag{Name: "account", Usage: "only this account"},
				&cli.BoolFlag{Name: "all", Usage: "also the runs of failures not (yet) long enough to pause"},
				limitFlag, jsonFlag}, Action: withSession(pausesList)},
			{Name: "lift", Usage: "lift an account's pauses so it may order again", ArgsUsage: "<account id>", Flags: []cli.Flag{
				&cli.StringFlag{Name: "identifier", Usage: "only this identifier (dns:<name>, ip:<address>); default every one"},
				jsonFlag}, Action: withSession(pausesLift)},
		},
	}
}

// pauseRule is [limits]' pausing, as the frontend applies it.
func (s *session) pauseRule() store.PauseRule {
	after, least := s.cfg.Limits.Pause()
	return store.PauseRule{After: after, MinFailures: int64(least)}
}

func pausesList(ctx context.Context, s *session, c *cli.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	f := store.PauseFilter{AccountID: c.String("account"), All: c.Bool("all")}
	ps, err := store.Rows(limit, func(p store.Page) ([]store.Pause, string, error) { return s.st.PausesList(ctx, s.pauseRule(), f, p) })
	if err != nil {
		return err
	}
	out := make([]operator.PauseLine, len(ps))
	rows := make([][]string, len(ps))
	for i, p := range ps {
		out[i] = operator.PauseLineOf(p)
		rows[i] = []string{p.AccountID, p.Identifier.String(), strconv.FormatInt(p.Failures, 10), when(p.FirstFailed), when(p.LastFailed), yesNo(p.Paused)}
	}
	if s.json {
		return s.emit(out)
	}
	if !s.pauseRule().On() {
		s.printf("pausing is off ([limits] pause_after_days = 0): nobody is paused\n")
	}
	s.table([]string{"ACCOUNT", "IDENTIFIER", "FAILURES", "FAILING SINCE", "LAST FAILURE", "PAUSED"}, rows)
	return nil
}

func pausesLift(ctx context.Context, s *session, c *cli.Context) error {
	id, err := oneArg(c, "account id")
	if err != nil {
		return err
	}
	if !store.Storable(c.String("identifier")) {
		return usage("--identifier must be text")
	}
	n, err := operator.LiftPause(ctx, s.st, id, c.String("identifier"), operator.CLIActor())
	if err != nil {
		return err
	}
	if s.json {
		return s.emit(map[string]any{"account": id, "lifted": n})
	}
	s.printf("account %s: %d run(s) of failed validations cleared; it may order again\n", id, n)
	return nil
}
