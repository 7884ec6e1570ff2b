package jobs

import "github.com/riverqueue/river"

// KindPerspectiveCheck asks one network perspective to run a challenge's
// check (and its CAA check) from where it sits (CA/B BR §3.2.2.9).
const KindPerspectiveCheck = "perspective_check"

// PerspectiveQueue is the queue of one perspective's checks: only workers
// started with worker.perspective = name work it, and any number may.
func PerspectiveQueue(name string) string { return "perspective_" + name }

// PerspectiveCheckArgs asks the perspective Perspective to check a
// challenge and record its answer. It is no subject's job: a perspective
// that breaks or never answers only fails to corroborate, and the primary
// decides at its deadline. Unique while outstanding, so a perspective is
// not asked twice at once.
type PerspectiveCheckArgs struct {
	ChallengeID string `json:"challenge_id" river:"unique"`
	Perspective string `json:"perspective" river:"unique"`
}

func (PerspectiveCheckArgs) Kind() string { return KindPerspectiveCheck }

func (a PerspectiveCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: PerspectiveQueue(a.Perspective), UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: outstanding}}
}
