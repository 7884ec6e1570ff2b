package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// PerspectivePrimary names the primary's own answer among a challenge's
// perspective answers; no remote perspective may take the name.
const PerspectivePrimary = "primary"

// The outcomes of a perspective's check.
const (
	PerspectiveValid   = "valid"   // it saw what the primary saw: the check passed
	PerspectiveInvalid = "invalid" // the check failed (Problem says how)
	PerspectiveError   = "error"   // the check could not run there (its resolvers failed)
)

// PerspectiveAnswer is one network perspective's answer for a challenge
// (CA/B BR §3.2.2.9): which perspective, what it saw, how long it took.
type PerspectiveAnswer struct {
	ChallengeID string
	Perspective string
	Outcome     string
	Problem     *acme.Problem
	Record      json.RawMessage // what it saw (addresses, URLs), as the validator records it
	Took        time.Duration
	At          time.Time // on the database's clock; set by the store
}

// Perspectives is multi-perspective validation's record (store/sqlstore
// perspectives.go): the primary asks, each perspective answers once.
type Perspectives interface {
	// PerspectivesAsk records the primary's own answer and queues a
	// perspective_check job for each of names, in one transaction. When the
	// primary's answer is already recorded (a retried job) nothing changes:
	// no perspective is asked twice, and asked is false.
	PerspectivesAsk(ctx context.Context, primary PerspectiveAnswer, names []string) (asked bool, err error)
	// PerspectiveAnswer records a perspective's answer; a second answer
	// from the same perspective is ignored (the first stands).
	PerspectiveAnswer(ctx context.Context, a PerspectiveAnswer) error
	// PerspectiveAnswers reads a challenge's answers, the primary's first,
	// and the database's clock in the same read.
	PerspectiveAnswers(ctx context.Context, challengeID string) ([]PerspectiveAnswer, time.Time, error)
	// AuthzProfiles are the profiles of the orders using authorization
	// authzID (none for one newAuthz made and no order reused), sorted:
	// whether its validation must be corroborated (profile.Perspectives).
	AuthzProfiles(ctx context.Context, authzID string) ([]string, error)
}
