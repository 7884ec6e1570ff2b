// Package renewal chooses the renewal window (RFC 9773, ACME Renewal
// Information) a certificate's clients are told: the one rule renewalInfo
// serves and the operator's views (`hallmark certs show`, the panel's
// certificate page) show, so what an operator reads is what clients get.
package renewal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/store"
)

// Store is what choosing a window reads.
type Store interface {
	RenewalWindowBySerial(ctx context.Context, serial string) (*store.RenewalWindow, error)
	UpstreamWindowBySerial(ctx context.Context, serial string) (*store.UpstreamWindow, error)
}

// Source says whose window a certificate's clients are told.
type Source string

const (
	// FromProfile: the profile's fractions of the validity period.
	FromProfile Source = "profile"
	// FromOperator: an operator moved it (`hallmark ari move`).
	FromOperator Source = "operator"
	// FromUpstream: a relay's upstream CA's own renewalInfo, as the worker
	// last fetched it.
	FromUpstream Source = "upstream"
)

// Window is the window a certificate's clients are told, and why.
type Window struct {
	Start, End time.Time
	Source     Source
	// Reason is the operator's, for FromOperator (their explanation page
	// shows it).
	Reason string
	// ExplanationURL is the upstream's, for FromUpstream; may be empty.
	ExplanationURL string
}

// Suggested chooses c's window; prof is c's profile (the zero profile for
// one no longer configured: the default fractions). Without a move it is
// the profile's fraction of the validity, or, for a relay's certificate
// whose upstream offers ARI, the upstream's window: the upstream may revoke
// the certificate, and its window is its warning. With an operator's move
// as well, the window that ends first is served, the operator's on a tie:
// a move is into the past to have clients renew now, and an upstream
// window ending sooner is the upstream's deadline, which no move of
// Hallmark's can push back.
func Suggested(ctx context.Context, st Store, c *store.Certificate, prof profile.Profile) (Window, error) {
	moved, err := st.RenewalWindowBySerial(ctx, c.Serial)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Window{}, fmt.Errorf("reading the renewal window of %s: %w", c.Serial, err)
	}
	up, err := upstream(ctx, st, c)
	if err != nil {
		return Window{}, err
	}
	switch {
	case moved != nil && (up == nil || !up.End.Before(moved.End)):
		return Window{Start: moved.Start, End: moved.End, Source: FromOperator, Reason: moved.Reason}, nil
	case up != nil:
		return Window{Start: up.Start, End: up.End, Source: FromUpstream, ExplanationURL: up.ExplanationURL}, nil
	}
	start, end := Default(c, prof)
	return Window{Start: start, End: end, Source: FromProfile}, nil
}

// upstream is the upstream's window of a relay's certificate; nil for
// another issuer's (no read), or when the upstream gave none (no ARI, not
// fetched yet, or it knows nothing of the certificate).
func upstream(ctx context.Context, st Store, c *store.Certificate) (*store.UpstreamWindow, error) {
	if !strings.HasPrefix(c.IssuerID, "relay:") {
		return nil, nil
	}
	up, err := st.UpstreamWindowBySerial(ctx, c.Serial)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the upstream's renewal window of %s: %w", c.Serial, err)
	}
	return up, nil
}

// Default is prof's window over c's validity period.
func Default(c *store.Certificate, prof profile.Profile) (start, end time.Time) {
	fs, fe := prof.RenewalWindow()
	life := c.NotAfter.Sub(c.NotBefore)
	start = c.NotBefore.Add(time.Duration(float64(life) * fs)).Truncate(time.Second)
	end = c.NotBefore.Add(time.Duration(float64(life) * fe)).Truncate(time.Second)
	return start, end
}
