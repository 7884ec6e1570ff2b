package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/jobs"
)

func jobsCommand() *cli.Command {
	idArg := "<job id>"
	return &cli.Command{
		Name:  "jobs",
		Usage: "watch the job queue; retry or abandon a job",
		Subcommands: []*cli.Command{
			{Name: "list", Usage: "list jobs, newest first", Flags: []cli.Flag{
				&cli.StringSliceFlag{Name: "kind", Usage: "only jobs of this kind (challenge_validate, signer_issue, signer_revoke, crl_generate, housekeeping); repeatable"},
				&cli.StringSliceFlag{Name: "state", Usage: "only jobs in this state (available, scheduled, running, retryable, completed, cancelled, discarded, pending); repeatable"},
				limitFlag, jsonFlag,
			}, Action: withSession(jobsList)},
			{Name: "show", Usage: "show a job and its attempt log", ArgsUsage: idArg, Flags: []cli.Flag{jsonFlag}, Action: withSession(jobsShow)},
			{Name: "retry", Usage: "run a job again now (a running job is left alone)", ArgsUsage: idArg, Flags: []cli.Flag{jsonFlag}, Action: withSession(jobsRetry)},
			{Name: "abandon", Usage: "cancel a job and fail its challenge or order, so no client polls forever", ArgsUsage: idArg, Flags: []cli.Flag{
				&cli.StringFlag{Name: "detail", Usage: "the sentence the client sees in the serverInternal problem"},
				jsonFlag,
			}, Action: withSession(jobsAbandon)},
		},
	}
}

// jobKinds are the kinds --kind accepts: a misspelt kind would list
// nothing and look like an empty queue.
var jobKinds = map[string]bool{jobs.KindChallengeValidate: true, jobs.KindSignerIssue: true, jobs.KindSignerRevoke: true,
	jobs.KindCRLGenerate: true, jobs.KindHousekeeping: true, jobs.KindUpstreamRenewal: true, jobs.KindNotifySend: true,
	jobs.KindPerspectiveCheck: true}

var jobStates = map[string]bool{"available": true, "scheduled": true, "running": true, "retryable": true, "completed": true, "cancelled": true, "discarded": true, "pending": true}

type attemptRow struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

type jobRow struct {
	ID          int64           `json:"id"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	State       string          `json:"state"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	Subject     string          `json:"subject,omitempty"`
	Args        json.RawMessage `json:"args"`
	CreatedAt   time.Time       `json:"created_at"`
	ScheduledAt time.Time       `json:"scheduled_at"`
	AttemptedAt *time.Time      `json:"attempted_at,omitempty"`
	FinalizedAt *time.Time      `json:"finalized_at,omitempty"`
	AttemptedBy []string        `json:"attempted_by"`
	Errors      []attemptRow    `json:"errors"`
	// Deferred counts the runs deferred for an unavailable backend (no
	// attempt used); Deferrals are the latest.
	Deferred  int          `json:"deferred"`
	Deferrals []attemptRow `json:"deferrals"`
}

func jobRowOf(j jobs.JobInfo) jobRow {
	r := jobRow{ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Subject: jobSubject(j), Args: j.Args, CreatedAt: j.CreatedAt.UTC(), ScheduledAt: j.ScheduledAt.UTC(),
		AttemptedAt: j.AttemptedAt, FinalizedAt: j.FinalizedAt, AttemptedBy: j.AttemptedBy, Errors: []attemptRow{}}
	if r.AttemptedBy == nil {
		r.AttemptedBy = []string{}
	}
	if len(r.Args) == 0 {
		r.Args = json.RawMessage("{}")
	}
	for _, e := range j.Errors {
		r.Errors = append(r.Errors, attemptRow{Attempt: e.Attempt, At: e.At.UTC(), Error: e.Error})
	}
	r.Deferred, r.Deferrals = j.Deferred, []attemptRow{}
	for _, e := range j.Deferrals {
		r.Deferrals = append(r.Deferrals, attemptRow{Attempt: e.Attempt, At: e.At.UTC(), Error: e.Error})
	}
	return r
}

// jobSubject names what a job works on: "order <id>", "challenge <id>",
// "certificate <serial>", "issuer <id>".
func jobSubject(j jobs.JobInfo) string {
	if sub, ok := operator.SubjectOf(j); ok {
		if sub.Kind == jobs.KindChallengeValidate {
			return "challenge " + sub.ID
		}
		return "order " + sub.ID
	}
	var a struct {
		Serial   string `json:"serial"`
		IssuerID string `json:"issuer_id"`
	}
	_ = json.Unmarshal(j.Args, &a)
	switch {
	case a.Serial != "":
		return "certificate " + a.Serial
	case a.IssuerID != "":
		return "issuer " + a.IssuerID
	}
	return ""
}

func jobsList(ctx context.Context, s *session, c *cli.Context) error {
	limit, err := listLimit(c)
	if err != nil {
		return err
	}
	for _, st := range c.StringSlice("state") {
		if !jobStates[st] {
			return usage("--state %q is not a job state; use available, scheduled, running, retryable, completed, cancelled, discarded or pending", st)
		}
	}
	for _, k := range c.StringSlice("kind") {
		if !jobKinds[k] {
			return usage("--kind %q is not a job kind; use challenge_validate, signer_issue, signer_revoke, crl_generate or housekeeping", k)
		}
	}
	js, err := jobs.List(ctx, s.q, jobs.ListFilter{Kinds: c.StringSlice("kind"), States: c.StringSlice("state"), Limit: limit})
	if err != nil {
		return err
	}
	if s.json {
		out := make([]jobRow, len(js))
		for i, j := range js {
			out[i] = jobRowOf(j)
		}
		return s.emit(out)
	}
	rows := make([][]string, len(js))
	for i, j := range js {
		last := "-"
		if n := len(j.Errors); n > 0 {
			last = firstLine(j.Errors[n-1].Error)
		}
		rows[i] = []string{strconv.FormatInt(j.ID, 10), j.Kind, j.State, fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), orDash(jobSubject(j)), when(j.CreatedAt), last}
	}
	s.table([]string{"ID", "KIND", "STATE", "ATTEMPT", "SUBJECT", "CREATED", "LAST ERROR"}, rows)
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

func jobID(c *cli.Context) (int64, error) {
	arg, err := oneArg(c, "job id")
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return 0, usage("job id %q is not a positive number; `hallmark jobs list` shows the ids", arg)
	}
	return id, nil
}

func jobErr(id int64, err error) error {
	if isNotFound(err) {
		return notFound("job %d does not exist; `hallmark jobs list` shows the jobs (finished jobs are pruned after a while)", id)
	}
	return err
}

func jobsShow(ctx context.Context, s *session, c *cli.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	j, err := jobs.Show(ctx, s.q, id)
	if err != nil {
		return jobErr(id, err)
	}
	printJob(s, j)
	return nil
}

func printJob(s *session, j jobs.JobInfo) {
	if s.json {
		_ = s.emit(jobRowOf(j))
		return
	}
	s.fields([][2]string{
		{"id", strconv.FormatInt(j.ID, 10)}, {"kind", j.Kind}, {"queue", j.Queue}, {"state", j.State},
		{"attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts)}, {"subject", orDash(jobSubject(j))},
		{"args", string(j.Args)}, {"created", when(j.CreatedAt)}, {"scheduled", when(j.ScheduledAt)},
		{"last attempt", whenP(j.AttemptedAt)}, {"finalized", whenP(j.FinalizedAt)},
	})
	printDeferrals(s, j)
	s.printf("\nattempt log:\n")
	if len(j.AttemptedBy) == 0 && len(j.Errors) == 0 {
		s.printf("  no attempt yet\n")
		return
	}
	// River records the worker of every attempt and the error of every
	// failed one; attempt n's worker is AttemptedBy[n-1] while the list
	// is not capped.
	errs := map[int]jobs.AttemptError{}
	for _, e := range j.Errors {
		errs[e.Attempt] = e
	}
	n := max(j.Attempt, len(j.AttemptedBy))
	var rows [][]string
	for a := 1; a <= n; a++ {
		worker := "-"
		if i := a - 1 - (n - len(j.AttemptedBy)); i >= 0 && i < len(j.AttemptedBy) {
			worker = j.AttemptedBy[i]
		}
		at, outcome := "-", "ok"
		if e, ok := errs[a]; ok {
			at, outcome = when(e.At), firstLine(e.Error)
		} else if a == n && (j.State == "running" || j.State == "available") {
			outcome = j.State
		}
		rows = append(rows, []string{strconv.Itoa(a), worker, at, outcome})
	}
	s.table([]string{"ATTEMPT", "WORKER", "FAILED AT", "OUTCOME"}, rows)
}

// printDeferrals lists the latest runs deferred because the job's backend
// was unavailable: each reran the same attempt later, until the order's
// expiry.
func printDeferrals(s *session, j jobs.JobInfo) {
	if j.Deferred == 0 {
		return
	}
	s.printf("\ndeferred %d times, backend unavailable (no attempt used; latest %d):\n", j.Deferred, len(j.Deferrals))
	var rows [][]string
	for _, d := range j.Deferrals {
		line, _, _ := strings.Cut(d.Error, "\n")
		rows = append(rows, []string{when(d.At), "deferred: " + line})
	}
	s.table([]string{"AT", "REASON"}, rows)
}

func jobsRetry(ctx context.Context, s *session, c *cli.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	j, err := operator.RetryJob(ctx, s.st, s.q, id, operator.CLIActor())
	if err != nil {
		return jobErr(id, err)
	}
	if s.json {
		return s.emit(jobRowOf(j))
	}
	s.printf("job %d (%s) is %s: a worker will run it again\n", j.ID, j.Kind, j.State)
	return nil
}

func jobsAbandon(ctx context.Context, s *session, c *cli.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	j, failed, err := operator.AbandonJob(ctx, s.st, s.q, id, operator.CLIActor(), c.String("detail"))
	if err != nil {
		return jobErr(id, err)
	}
	if s.json {
		return s.emit(jobRowOf(j))
	}
	s.printf("job %d (%s) is %s", j.ID, j.Kind, j.State)
	if sub := jobSubject(j); sub != "" {
		if _, ok := operator.SubjectOf(j); ok && failed {
			s.printf("; %s is failed with serverInternal so its client stops polling", sub)
		} else if ok {
			s.printf("; %s already had its verdict and was left as it is", sub)
		}
	}
	s.printf("\n")
	return nil
}
