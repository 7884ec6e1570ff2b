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

// Store is what the operator actions need of the store: each writes its
// audit event in the action's own transaction.
type Store interface {
	AccountByID(ctx context.Context, id string) (*store.Account, error)
	AccountDeactivateAudited(ctx context.Context, id string, ev store.AuditEvent) (*store.Account, error)
	JobAudited(ctx context.Context, do func(ctx context.Context, tx store.JobTx) (store.AuditEvent, error)) error
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
	a, err = st.AccountDeactivateAudited(ctx, id, store.AuditEvent{Actor: actor, Action: ActionAccountDeactivate, Subject: id, Detail: "account deactivated; its unfinished orders are invalid"})
	if err != nil {
		return nil, fmt.Errorf("deactivating account %s: %w", id, err)
	}
	if a.Status != acme.StatusDeactivated {
		return a, fmt.Errorf("account %s is %s: %w", id, a.Status, ErrNothingToDo)
	}
	return a, nil
}

// finished are the job states in which River will not run a job again
// unless it is retried.
var finished = map[string]bool{"completed": true, "cancelled": true, "discarded": true}

// RetryJob makes a job available to run now and records the audit event in
// the same transaction. A running job is ErrNothingToDo; an unknown id is
// jobs.ErrJobNotFound.
func RetryJob(ctx context.Context, st Store, q jobs.Queue, id int64, actor string) (jobs.JobInfo, error) {
	j, err := jobs.Show(ctx, q, id)
	if err != nil {
		return j, err
	}
	if j.State == "running" {
		return j, fmt.Errorf("job %d is running on a worker now; wait for its outcome: %w", id, ErrNothingToDo)
	}
	before := j.State
	err = st.JobAudited(ctx, func(ctx context.Context, tx store.JobTx) (store.AuditEvent, error) {
		if j, err = jobs.RetryTx(ctx, q, tx.Jobs(), id); err != nil {
			return store.AuditEvent{}, err
		}
		return store.AuditEvent{Actor: actor, Action: ActionJobRetry, Subject: jobSubject(id),
			Detail: fmt.Sprintf("%s job was %s, now %s", j.Kind, before, j.State)}, nil
	})
	return j, err
}

// AbandonJob cancels a job that has not finished and records a
// serverInternal failure on its subject (a challenge or an order still
// processing becomes invalid), so no client polls forever, with the audit
// event that says what changed, all in one transaction. why is the
// operator's sentence, shown to the client in the problem detail. failed
// reports whether the subject was failed: a subject that already has its
// verdict is left as it is. When nothing changes (the job already finished
// and its subject has its verdict, or it has none) the result is
// ErrNothingToDo and nothing is audited.
func AbandonJob(ctx context.Context, st Store, q jobs.Queue, id int64, actor, why string) (j jobs.JobInfo, failed bool, err error) {
	j, err = jobs.Show(ctx, q, id)
	if err != nil {
		return j, false, err
	}
	_, hasSubject := SubjectOf(j)
	if finished[j.State] && !hasSubject {
		return j, false, fmt.Errorf("job %d is already %s and has no subject a client polls: %w", id, j.State, ErrNothingToDo)
	}
	if why == "" {
		why = "an operator abandoned the work; try again"
	}
	before, shown := j.State, j
	err = st.JobAudited(ctx, func(ctx context.Context, tx store.JobTx) (store.AuditEvent, error) {
		j, failed = shown, false
		if !finished[before] {
			if j, err = jobs.CancelTx(ctx, q, tx.Jobs(), id); err != nil {
				return store.AuditEvent{}, err
			}
		}
		detail, err := abandonSubject(ctx, tx, j, before, why, &failed)
		if err != nil {
			return store.AuditEvent{}, err
		}
		return store.AuditEvent{Actor: actor, Action: ActionJobAbandon, Subject: jobSubject(id), Detail: detail}, nil
	})
	if err != nil {
		return j, false, err
	}
	return j, failed, nil
}

// abandonSubject fails j's subject, if it has one still processing, in tx,
// and returns the audit event's detail; ErrNothingToDo when the job was
// finished and its subject has its verdict.
func abandonSubject(ctx context.Context, tx store.JobTx, j jobs.JobInfo, before, why string, failed *bool) (string, error) {
	detail := fmt.Sprintf("%s job was %s, now %s", j.Kind, before, j.State)
	sub, ok := SubjectOf(j)
	if !ok {
		return detail, nil
	}
	var err error
	*failed, err = tx.Abandon(ctx, sub, acme.Problem{Type: acme.ProblemServerInternal, Detail: why})
	switch {
	case err != nil:
		return "", fmt.Errorf("recording the failure on %s %s: %w", subjectNoun(sub), sub.ID, err)
	case *failed:
		return detail + fmt.Sprintf("; %s %s failed with %q", subjectNoun(sub), sub.ID, why), nil
	case finished[before]:
		return "", fmt.Errorf("job %d is already %s and %s %s already has its verdict: %w",
			j.ID, before, subjectNoun(sub), sub.ID, ErrNothingToDo)
	}
	return detail + fmt.Sprintf("; %s %s already had its verdict and was left as it is", subjectNoun(sub), sub.ID), nil
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
