package protocol

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// Rate limits ([limits]) are counted in the database from the records
// themselves, so every frontend enforces the same limit; those on what a
// newOrder creates are reserved in its own transaction (orderLimits). A limited request
// gets rateLimited with Retry-After set to when a slot opens and a detail
// naming the limit. A limit read beforehand that cannot be read (the
// database failed) never blocks issuance: the request goes on and the
// failure is logged, because a broken counter must not become an outage. A
// reserved limit's count fails only with the order's own transaction.

const (
	defaultOrdersWindow = 3 * time.Hour
	defaultCertsWindow  = 7 * 24 * time.Hour
	failedWindow        = time.Hour
)

func seconds(n int, def time.Duration) time.Duration {
	if n <= 0 {
		return def
	}
	return time.Duration(n) * time.Second
}

// limited is the rateLimited problem for a count at or over limit; the slot
// opens at opens (at least a second from now).
func limited(rc store.RateCount, opens time.Time, format string, args ...any) error {
	wait := opens.Sub(rc.Now)
	if wait < time.Second {
		wait = time.Second
	}
	return acme.RateLimited(wait, "%s; retry after %s", fmt.Sprintf(format, args...), rfc3339(rc.Now.Add(wait)))
}

// counted reports whether the database counted limit (err is nil); one it
// could not count is logged, and lets the request through.
func (s *Server) counted(ctx context.Context, limit string, err error) bool {
	if err != nil {
		s.log.WarnContext(ctx, "rate limit could not be read; allowing the request", "limit", limit, "err", err)
	}
	return err == nil
}

// orderLimits are the limits a new order reserves its units of in its own
// transaction (store.OrderLimits): orders per account, and pending
// authorizations per account counting the ones the order creates. Racing
// newOrders on any number of frontends cannot pass them together.
func (s *Server) orderLimits() store.OrderLimits {
	l := s.cfg.Limits
	return store.OrderLimits{Orders: l.OrdersPerAccount, OrdersWindow: seconds(l.OrdersWindowSeconds, defaultOrdersWindow),
		PendingAuthzs: l.PendingAuthorizationsPerAccount}
}

// reservedLimit is the rateLimited problem for a request (what: "this
// order") that OrderCreate or AuthzCreate refused over one of its limits,
// nil for any other error.
func reservedLimit(err error, what string) error {
	var rl *store.RateLimited
	if !errors.As(err, &rl) {
		return nil
	}
	if rl.Limit == store.LimitPendingAuthzs {
		return limited(rl.Count, rl.Opens, "too many pending authorizations: the limit is %d per account, the account has %d and %s needs %d more; complete or deactivate pending ones",
			rl.Max, rl.Count.Count, what, rl.Fresh)
	}
	return limited(rl.Count, rl.Opens, "too many new orders: the limit is %d per account per %s", rl.Max, rl.Window)
}

// limitNewOrder applies the limits a new order meets that count what the
// worker creates, read before the order's transaction: failed validations
// per account and name, and certificates per registered domain, so a
// client learns before it validates anything. Orders and pending
// authorizations are reserved in the order's transaction (orderLimits).
func (s *Server) limitNewOrder(ctx context.Context, acctID string, no store.NewOrder) error {
	for _, id := range no.Identifiers {
		if err := s.limitFailedValidations(ctx, acctID, id); err != nil {
			return err
		}
	}
	return s.limitCertificates(ctx, no.Identifiers)
}

// limitFailedValidations applies failed validations per account and name
// per hour.
func (s *Server) limitFailedValidations(ctx context.Context, acctID string, id acme.Identifier) error {
	n := s.cfg.Limits.FailedValidationsPerHour
	if n <= 0 {
		return nil
	}
	base := id.Base()
	rc, err := s.st.limits.RateFailedValidations(ctx, acctID, base, failedWindow)
	if s.counted(ctx, "failed_validations_per_hour", err) && rc.Count >= n {
		return limited(rc, rc.Oldest.Add(failedWindow), "too many failed validations for %s: the limit is %d per account and name per hour", base.Value, n)
	}
	return nil
}

// limitCertificates applies certificates per registered domain: each
// distinct registered domain (eTLD+1 by the public suffix list) of ids.
func (s *Server) limitCertificates(ctx context.Context, ids []acme.Identifier) error {
	n := s.cfg.Limits.CertificatesPerDomain
	if n <= 0 {
		return nil
	}
	window := seconds(s.cfg.Limits.CertificatesWindowSeconds, defaultCertsWindow)
	for _, d := range registeredDomains(ids) {
		rc, err := s.st.limits.RateCertificates(ctx, d, window)
		if s.counted(ctx, "certificates_per_domain", err) && rc.Count >= n {
			return limited(rc, rc.Oldest.Add(window), "too many certificates for the registered domain %s: the limit is %d per %s", d, n, window)
		}
	}
	return nil
}

// registeredDomains are the distinct registered domains of ids, sorted: the
// public suffix list's eTLD+1 of each DNS name (a name that is itself a
// public suffix counts as its own), and each IP address as itself.
func registeredDomains(ids []acme.Identifier) []string {
	seen := map[string]bool{}
	for _, id := range ids {
		v := strings.ToLower(strings.TrimSuffix(id.Base().Value, "."))
		if id.Type == acme.IdentifierDNS && net.ParseIP(v) == nil {
			if d, err := publicsuffix.EffectiveTLDPlusOne(v); err == nil {
				v = d
			}
		}
		seen[v] = true
	}
	return slices.Sorted(maps.Keys(seen))
}
