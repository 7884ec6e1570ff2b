package workerconf

import (
	"errors"
	"fmt"
	"regexp"
)

// Perspectives is [challenge.perspectives]: the remote network
// perspectives that must corroborate the primary's validation and CAA
// check (CA/B BR §3.2.2.9). Empty Names, the default, asks none.
type Perspectives struct {
	// Names are the perspectives asked, each served by workers started
	// with worker.perspective = that name.
	Names []string `toml:"names"`
	// MaxFailures is how many may not corroborate (disagree, fail to run,
	// or not answer in time) with the validation still valid; -1, the
	// default, follows the BR table (MaxFailuresFor).
	MaxFailures int `toml:"max_failures"`
	// DeadlineMS bounds the wait for the perspectives' answers, from the
	// primary's own answer; a perspective silent by then does not
	// corroborate.
	DeadlineMS int `toml:"deadline_ms"`
}

// DefaultPerspectives asks no perspective; when some are named, the BR
// table decides and each has 15 s to answer.
func DefaultPerspectives() Perspectives { return Perspectives{MaxFailures: -1, DeadlineMS: 15000} }

// MaxFailuresFor is the BR §3.2.2.9 table: with 2 to 5 remote
// perspectives one may fail to corroborate, with 6 or more two; with one,
// none.
func MaxFailuresFor(n int) int {
	switch {
	case n <= 1:
		return 0
	case n <= 5:
		return 1
	default:
		return 2
	}
}

// Allowed is how many perspectives may fail to corroborate.
func (p Perspectives) Allowed() int {
	if p.MaxFailures < 0 {
		return MaxFailuresFor(len(p.Names))
	}
	return p.MaxFailures
}

var perspectiveName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// ValidPerspectiveName reports a problem with name as a perspective's.
func ValidPerspectiveName(key, name string) error {
	if !perspectiveName.MatchString(name) || name == "primary" {
		return fmt.Errorf("%s: %q must be 1 to 40 of a-z, 0-9, '_' and '-', starting with a letter or digit, and not \"primary\"", key, name)
	}
	return nil
}

// Validate reports the problems of [challenge.perspectives].
func (p Perspectives) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, n := range p.Names {
		if err := ValidPerspectiveName("challenge.perspectives.names", n); err != nil {
			errs = append(errs, err)
		}
		if seen[n] {
			errs = append(errs, fmt.Errorf("challenge.perspectives.names: %q is named twice", n))
		}
		seen[n] = true
	}
	if p.MaxFailures < -1 || (len(p.Names) > 0 && p.MaxFailures >= len(p.Names)) {
		errs = append(errs, fmt.Errorf("challenge.perspectives.max_failures: must be -1 (the BR table) or 0 to one less than the %d perspectives named, got %d", len(p.Names), p.MaxFailures))
	}
	if p.DeadlineMS < 100 {
		errs = append(errs, errors.New("challenge.perspectives.deadline_ms: must be at least 100"))
	}
	return errors.Join(errs...)
}
