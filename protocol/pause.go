package protocol

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/store"
)

// Pausing (store.Pauses): an account whose validations of an identifier
// have failed for [limits] pause_after_days with no success between, at
// least pause_min_failures times, is refused newOrder and newAuthz for it
// (rateLimited), with a link to the unpause page (unpause.go), as
// Boulder pauses "zombie" clients. The order's own transaction checks
// (store.NewOrder.Pause), so neither path, folded or not, reads first.

// pauseStore is what pausing reads and writes (pause.go, unpause.go).
type pauseStore interface {
	PausesList(ctx context.Context, rule store.PauseRule, f store.PauseFilter, p store.Page) ([]store.Pause, string, error)
	PauseLift(ctx context.Context, accountID string, ident *acme.Identifier, ev store.AuditEvent) (int64, error)
}

const (
	// pathUnpause is the subscriber's unpause page (unpause.go).
	pathUnpause = "/unpause"
	// unpauseAudience is the unpause link's token's audience (jws.Token).
	unpauseAudience = "hallmark unpause"
	// unpauseLinkLifetime is how long an unpause link works; a refused
	// newOrder hands out a fresh one each time.
	unpauseLinkLifetime = 14 * 24 * time.Hour
)

// pauseRule is [limits]' pausing as the store applies it.
func (s *Server) pauseRule() store.PauseRule {
	after, least := s.cfg.Limits.Pause()
	return store.PauseRule{After: after, MinFailures: int64(least)}
}

// pausedFor is the problem for acctID asking for ids: nil when it is
// paused for none of them.
func (s *Server) pausedFor(ctx context.Context, acctID string, ids []acme.Identifier) error {
	rule := s.pauseRule()
	if !rule.On() {
		return nil
	}
	ps, _, err := s.st.pauses.PausesList(ctx, rule, store.PauseFilter{AccountID: acctID}, store.Page{Limit: 1000})
	if err != nil {
		return s.storeErr(err, "reading the account's pauses")
	}
	var hit []store.Pause
	for _, p := range ps {
		if slices.ContainsFunc(ids, func(id acme.Identifier) bool { return id.Base() == p.Identifier }) {
			hit = append(hit, p)
		}
	}
	if len(hit) == 0 {
		return nil
	}
	return s.pausedProblem(acctID, hit)
}

// orderPaused answers a newOrder the store refused with store.ErrPaused.
func (s *Server) orderPaused(ctx context.Context, acctID string, ids []acme.Identifier) error {
	if err := s.pausedFor(ctx, acctID, ids); err != nil {
		return err
	}
	// Lifted between the order's transaction and this read.
	return acme.RateLimited(time.Second, "account %s was paused for an identifier of this order a moment ago and is no longer; send the order again", acctID)
}

// pausedProblem is rateLimited naming each paused identifier, with the
// unpause link in its detail (as Boulder's), which only this account's
// signed request is answered with.
func (s *Server) pausedProblem(acctID string, hit []store.Pause) error {
	names := make([]string, len(hit))
	first := hit[0].FirstFailed
	var failures int64
	for i, p := range hit {
		names[i] = p.Identifier.String()
		failures += p.Failures
		if p.FirstFailed.Before(first) {
			first = p.FirstFailed
		}
	}
	link, err := s.unpauseLink(acctID, names)
	if err != nil {
		return acme.Internal(err)
	}
	prob := acme.Problem{Type: acme.ProblemRateLimited, Detail: fmt.Sprintf(
		"account %s is paused for %s: all %d validations since %s failed, none succeeded; fix what makes them fail, then unpause the account at %s",
		acctID, strings.Join(names, ", "), failures, rfc3339(first), link)}
	if len(hit) == 1 {
		prob.Identifier = &hit[0].Identifier
	} else {
		for i := range hit {
			prob.Subproblems = append(prob.Subproblems, acme.Problem{Type: acme.ProblemRateLimited, Identifier: &hit[i].Identifier,
				Detail: fmt.Sprintf("%d failed validations since %s", hit[i].Failures, rfc3339(hit[i].FirstFailed))})
		}
	}
	return &acme.Error{Problem: prob}
}

// unpauseKey is the unpause links' key, the same on every frontend.
func (s *Server) unpauseKey() []byte { return s.nonces.Derive("unpause link") }

// unpauseLink is the unpause page's URL for acctID, naming names.
func (s *Server) unpauseLink(acctID string, names []string) (string, error) {
	tok, err := jws.SignToken(s.unpauseKey(), jws.Token{Audience: unpauseAudience, Subject: acctID, Identifiers: names,
		Expiry: time.Now().Add(unpauseLinkLifetime)})
	if err != nil {
		return "", fmt.Errorf("signing an unpause link: %w", err)
	}
	return s.base + pathUnpause + "?" + url.Values{"jwt": {tok}}.Encode(), nil
}

// unpauseToken is the account an unpause link's token names.
func (s *Server) unpauseToken(tok string) (jws.Token, error) {
	t, err := jws.ParseToken(s.unpauseKey(), tok, unpauseAudience, time.Now())
	if err != nil {
		return t, errors.New("this unpause link is malformed, altered or expired; order again and follow the link in the refusal, which is fresh")
	}
	return t, nil
}
