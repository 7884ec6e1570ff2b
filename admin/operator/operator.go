package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/user"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// The audit actions this package records.
const (
	ActionAccountDeactivate = "account.deactivate"
	ActionJobRetry          = "job.retry"
	ActionJobAbandon        = "job.abandon"
)

// ErrNothingToDo is returned (wrapped, with a sentence saying why) when the
// action would change nothing: the account is already deactivated, the job
// is running or already done.
var ErrNothingToDo = errors.New("nothing to do")

// Store is what the operator actions need of the store.
type Store interface {
	AccountByID(ctx context.Context, id string) (*store.Account, error)
	AccountDeactivate(ctx context.Context, id string) (*store.Account, error)
	Abandon(ctx context.Context, s jobs.Subject, p acme.Problem) (bool, error)
	AuditRecord(ctx context.Context, ev store.AuditEvent) error
}

// CLIActor is the audit actor of the CLI: "cli:<os user>".
func CLIActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return "cli:" + name
}

// DeactivateAccount deactivates an account (RFC 8555 §7.3.6: its
// authorizations stop authorizing and its unfinished orders become invalid)
// and records the audit event. An unknown account is store.ErrNotFound; an
// account that is not valid is ErrNothingToDo.
func DeactivateAccount(ctx context.Context, st Store, id, actor string) (*store.Account, error) {
	a, err := st.AccountByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading account %s: %w", id, err)
	}
	if a.Status != acme.StatusValid {
		return a, fmt.Errorf("account %s is already %s: %w", id, a.Status, ErrNothingToDo)
	}
	a, err = st.AccountDeactivate(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("deactivating account %s: %w", id, err)
	}
	return a, audit(ctx, st, store.AuditEvent{Actor: actor, Action: ActionAccountDeactivate, Subject: id, Detail: "account deactivated; its unfinished orders are invalid"})
}

// finished are the job states in which River will not run a job again
// unless it is retried.
var finished = map[string]bool{"completed": true, "cancelled": true, "discarded": true}

// RetryJob makes a job available to run now and records the audit event. A
// running job is ErrNothingToDo; an unknown id is jobs.ErrJobNotFound.
func RetryJob(ctx context.Context, st Store, q jobs.Queue, id int64, actor string) (jobs.JobInfo, error) {
	j, err := jobs.Show(ctx, q, id)
	if err != nil {
		return j, err
	}
	if j.State == "running" {
		return j, fmt.Errorf("job %d is running on a worker now; wait for its outcome: %w", id, ErrNothingToDo)
	}
	before := j.State
	if j, err = jobs.Retry(ctx, q, id); err != nil {
		return j, err
	}
	return j, audit(ctx, st, store.AuditEvent{Actor: actor, Action: ActionJobRetry, Subject: jobSubject(id),
		Detail: fmt.Sprintf("%s job was %s, now %s", j.Kind, before, j.State)})
}

// AbandonJob cancels a job that has not finished and records a
// serverInternal failure on its subject (a challenge or an order still
// processing becomes invalid), so no client polls forever; then the audit
// event, which says what changed. why is the operator's sentence, shown to
// the client in the problem detail. failed reports whether the subject was
// failed: a subject that already has its verdict is left as it is. When
// nothing changes (the job already finished and its subject has its
// verdict, or it has none) the result is ErrNothingToDo and nothing is
// audited.
func AbandonJob(ctx context.Context, st Store, q jobs.Queue, id int64, actor, why string) (j jobs.JobInfo, failed bool, err error) {
	j, err = jobs.Show(ctx, q, id)
	if err != nil {
		return j, false, err
	}
	sub, hasSubject := SubjectOf(j)
	if finished[j.State] && !hasSubject {
		return j, false, fmt.Errorf("job %d is already %s and has no subject a client polls: %w", id, j.State, ErrNothingToDo)
	}
	before := j.State
	if !finished[j.State] {
		if j, err = jobs.Cancel(ctx, q, id); err != nil {
			return j, false, err
		}
	}
	detail := fmt.Sprintf("%s job was %s, now %s", j.Kind, before, j.State)
	if hasSubject {
		if why == "" {
			why = "an operator abandoned the work; try again"
		}
		failed, err = st.Abandon(ctx, sub, acme.Problem{Type: acme.ProblemServerInternal, Detail: why})
		if err != nil {
			return j, false, fmt.Errorf("recording the failure on %s %s: %w", subjectNoun(sub), sub.ID, err)
		}
		if failed {
			detail += fmt.Sprintf("; %s %s failed with %q", subjectNoun(sub), sub.ID, why)
		} else if finished[before] {
			return j, false, fmt.Errorf("job %d is already %s and %s %s already has its verdict: %w",
				id, before, subjectNoun(sub), sub.ID, ErrNothingToDo)
		} else {
			detail += fmt.Sprintf("; %s %s already had its verdict and was left as it is", subjectNoun(sub), sub.ID)
		}
	}
	return j, failed, audit(ctx, st, store.AuditEvent{Actor: actor, Action: ActionJobAbandon, Subject: jobSubject(id), Detail: detail})
}

// SubjectOf names the record a job works on that a client polls (the
// challenge of challenge_validate, the order of signer_issue); false for
// other kinds.
func SubjectOf(j jobs.JobInfo) (jobs.Subject, bool) {
	switch j.Kind {
	case jobs.KindChallengeValidate:
		var a jobs.ChallengeValidateArgs
		if json.Unmarshal(j.Args, &a) == nil && a.ChallengeID != "" {
			return a.SubjectOf(), true
		}
	case jobs.KindSignerIssue:
		var a jobs.SignerIssueArgs
		if json.Unmarshal(j.Args, &a) == nil && a.OrderID != "" {
			return a.SubjectOf(), true
		}
	}
	return jobs.Subject{}, false
}

func subjectNoun(s jobs.Subject) string {
	if s.Kind == jobs.KindChallengeValidate {
		return "challenge"
	}
	return "order"
}

func jobSubject(id int64) string { return fmt.Sprint(id) }

// audit records ev after the action it describes has happened; a failure
// says so, because the action itself is not undone.
func audit(ctx context.Context, st Store, ev store.AuditEvent) error {
	if err := st.AuditRecord(ctx, ev); err != nil {
		return fmt.Errorf("%s on %s was done but its audit event was not recorded: %w", ev.Action, ev.Subject, err)
	}
	return nil
}
