package protocol_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// wantLimited asserts a rateLimited answer (429) whose Retry-After is within
// [lo, hi] seconds and whose detail names the limit.
func wantLimited(t *testing.T, e *env, r *response, lo, hi int, names string) {
	t.Helper()
	p := wantProblem(t, e, r, acme.ProblemRateLimited, http.StatusTooManyRequests)
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < lo || ra > hi {
		t.Errorf("Retry-After = %q, want %d..%d seconds", r.header.Get("Retry-After"), lo, hi)
	}
	if !strings.Contains(p.Detail, names) {
		t.Errorf("detail %q does not name the limit (%q)", p.Detail, names)
	}
}

// TestRateLimitOrdersPerAccount: the third order in the window is refused
// with Retry-After = when the oldest leaves the window; another account is
// not affected.
func TestRateLimitOrdersPerAccount(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) {
		c.Limits.OrdersPerAccount, c.Limits.OrdersWindowSeconds = 2, 600
	}, func(t *testing.T, e *env) {
		a, b := e.register(t), e.register(t)
		e.newOrder(t, a, dnsIDs("one.example"))
		e.newOrder(t, a, dnsIDs("two.example"))
		r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("three.example")})
		wantLimited(t, e, r, 590, 600, "2 per account per 10m0s")
		e.newOrder(t, b, dnsIDs("three.example"))
	})
}

// TestRateLimitCertificatesPerDomain: certificates count per registered
// domain by the public suffix list: a.example.co.uk and b.example.co.uk
// share example.co.uk; other.co.uk is its own.
func TestRateLimitCertificatesPerDomain(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) {
		c.Limits.CertificatesPerDomain, c.Limits.CertificatesWindowSeconds = 1, 3600
	}, func(t *testing.T, e *env) {
		a := e.register(t)
		// An order made before the first certificate may still finalize
		// only until the limit is reached.
		late, _ := e.newOrder(t, a, dnsIDs("c.example.co.uk"))
		e.issue(t, a, "", "a.example.co.uk")
		r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("b.example.co.uk")})
		wantLimited(t, e, r, 3590, 3600, "registered domain example.co.uk")
		e.newOrder(t, a, dnsIDs("other.co.uk"))

		e.validate(t, a, late)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		r = e.post(t, a, late.Finalize, map[string]any{"csr": b64(csrFor(t, key, "c.example.co.uk"))})
		wantLimited(t, e, r, 3590, 3600, "the limit is 1 per 1h0m0s")
	})
}

// TestRateLimitFailedValidations: after a failed validation for a name, the
// account's next order and challenge for it are refused for the hour.
func TestRateLimitFailedValidations(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) { c.Limits.FailedValidationsPerHour = 1 }, func(t *testing.T, e *env) {
		a, b := e.register(t), e.register(t)
		pending, _ := e.newOrder(t, a, dnsIDs("flaky.example"))
		o, _ := e.newOrder(t, a, dnsIDs("flaky.example", "fine.example"))
		az := e.authz(t, a, o.Authorizations[0])
		r := e.post(t, a, az.Challenges[0].URL, map[string]any{})
		wantStatus(t, r, http.StatusOK)
		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(az.Challenges[0].URL), Status: acme.StatusInvalid,
			Error: &acme.Problem{Type: acme.ProblemIncorrectResponse, Detail: "wrong"}}); err != nil {
			t.Fatal(err)
		}
		r = e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("flaky.example")})
		wantLimited(t, e, r, 3590, 3600, "failed validations for flaky.example")
		// The other pending authorization for the name cannot be tried
		// either; the limit is per account, so b is not affected.
		paz := e.authz(t, a, pending.Authorizations[0])
		r = e.post(t, a, paz.Challenges[0].URL, map[string]any{})
		wantLimited(t, e, r, 3590, 3600, "per account and name per hour")
		e.newOrder(t, b, dnsIDs("flaky.example"))
		e.newOrder(t, a, dnsIDs("fine-too.example"))
	})
}

// TestRateLimitPendingAuthorizations: an order or a pre-authorization that
// would take the account past its pending authorizations is refused; a
// pre-authorization counts like an order's.
func TestRateLimitPendingAuthorizations(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) {
		c.Limits.PendingAuthorizationsPerAccount = 2
		p := c.Profiles["default"]
		p.AllowPreAuthorization = true
		c.Profiles["default"] = p
	}, func(t *testing.T, e *env) {
		// A slot opens at the latest when the first pending one expires
		// (30 days by default).
		const lo, hi = 29 * 24 * 3600, 30 * 24 * 3600
		const names = "too many pending authorizations: the limit is 2 per account"
		newAuthz := func(a *account, name string) *response {
			return e.post(t, a, e.base+"/acme/new-authz", map[string]any{"identifier": dnsIDs(name)[0]})
		}

		a := e.register(t)
		e.newOrder(t, a, dnsIDs("p1.example", "p2.example"))
		r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("p3.example")})
		wantLimited(t, e, r, lo, hi, names)
		wantLimited(t, e, newAuthz(a, "p3.example"), lo, hi, names)

		// Pre-authorizations fill the same allowance, even for one name
		// asked again and again.
		b := e.register(t)
		wantStatus(t, newAuthz(b, "q.example"), http.StatusCreated)
		wantStatus(t, newAuthz(b, "q.example"), http.StatusCreated)
		wantLimited(t, e, newAuthz(b, "q.example"), lo, hi, names)
		r = e.post(t, b, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs("q2.example")})
		wantLimited(t, e, r, lo, hi, names)
	})
}

// failingLimits is the real store whose rate counts fail.
type failingLimits struct{ store.Store }

func (failingLimits) RateCertificates(context.Context, string, time.Duration) (store.RateCount, error) {
	return store.RateCount{}, errors.New("rate table on fire")
}

// TestRateLimitUnreadableAllows: a limit read before the order's
// transaction that the database cannot count never blocks issuance; the
// failure is logged. (The limits reserved in the order's transaction fail
// with the order's own write.)
func TestRateLimitUnreadableAllows(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	withWrappedStores(t, func(c *protocol.Config) { c.Limits.CertificatesPerDomain = 1 },
		func(s store.Store) store.Store { return failingLimits{s} }, &logs, func(t *testing.T, e *env) {
			a := e.register(t)
			e.newOrder(t, a, dnsIDs("x1.example"))
			e.newOrder(t, a, dnsIDs("x2.example"))
			if !strings.Contains(logs.String(), "rate table on fire") {
				t.Errorf("the unreadable limit was not logged; log:\n%s", logs.String())
			}
		})
}

// TestRateLimitPendingAuthorizationsRedraft: a newOrder whose
// authorization chosen for reuse is deactivated before the order is
// written (deactivatingReuse) is drafted again with one more fresh
// authorization, and that draft meets the pending-authorizations limit as
// the first did: over it, the order is refused with rateLimited and
// Retry-After and nothing is written. Before, the redraft was written
// unchecked, past the limit.
func TestRateLimitPendingAuthorizationsRedraft(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	armed.Store(true) // every reuse is deactivated as its order is written
	wrap := func(s store.Store) store.Store { return deactivatingReuse{s, &armed} }
	withWrappedStores(t, func(c *protocol.Config) { c.Limits.PendingAuthorizationsPerAccount = 3 }, wrap, nil, func(t *testing.T, e *env) {
		const lo, hi = 29 * 24 * 3600, 30 * 24 * 3600
		cases := []struct {
			name string
			// fresh are the order's names besides the reused one: the
			// first draft creates len(fresh) authorizations, the redraft
			// one more, beside the one pending already.
			fresh   []string
			limited bool
		}{
			{"redraft within the limit", []string{"n1.example"}, false},
			{"redraft over the limit", []string{"n1.example", "n2.example"}, true},
			{"first draft over the limit", []string{"n1.example", "n2.example", "n3.example"}, true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				a := e.register(t)
				acct := lastSegment(a.kid)
				o, _ := e.newOrder(t, a, dnsIDs("reused.example"))
				e.validate(t, a, o)
				e.newOrder(t, a, dnsIDs("waiting.example")) // one pending authorization
				pending := func() int {
					return e.count(t, "SELECT count(*) FROM authorizations WHERE account_id = $1 AND status = 'pending'", acct)
				}
				orders := func() int { return e.count(t, "SELECT count(*) FROM orders WHERE account_id = $1", acct) }
				before := orders()

				r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": dnsIDs(append([]string{"reused.example"}, tc.fresh...)...)})
				if tc.limited {
					wantLimited(t, e, r, lo, hi, "too many pending authorizations: the limit is 3 per account, the account has 1 and this order needs")
					if n := orders(); n != before {
						t.Errorf("%d orders after the refused newOrder, want %d", n, before)
					}
					if n := pending(); n != 1 {
						t.Errorf("%d pending authorizations after the refused newOrder, want 1", n)
					}
					return
				}
				wantStatus(t, r, http.StatusCreated)
				var got orderJSON
				r.json(t, &got)
				if got.Status != acme.StatusPending || slices.Contains(got.Authorizations, o.Authorizations[0]) {
					t.Errorf("the redrafted order %+v; want pending on fresh authorizations, not %s", got, o.Authorizations[0])
				}
				if n := pending(); n != 1+1+len(tc.fresh) {
					t.Errorf("%d pending authorizations, want %d", n, 2+len(tc.fresh))
				}
			})
		}
	})
}
