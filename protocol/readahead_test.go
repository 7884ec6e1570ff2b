package protocol_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// aheadWatch is the real store watching one request at a time, once armed:
// it records the lookups its nonce consumption carried and counts the
// route's reads made on their own.
type aheadWatch struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	lookups []store.Lookup
	found   int // lookups answered with a row
	reads   int
}

func (w *aheadWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.lookups, w.found, w.reads = true, nil, 0, 0
}

// disarm stops watching and reports what the request's nonce carried and
// how many reads it made on its own.
func (w *aheadWatch) disarm() (lookups []store.Lookup, found, reads int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	return w.lookups, w.found, w.reads
}

func (w *aheadWatch) read() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed {
		w.reads++
	}
}

func (w *aheadWatch) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	got, err := w.Store.NonceConsume(ctx, uses)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed {
		for i, u := range uses {
			if u.Lookup.Kind != store.LookupNone {
				w.lookups = append(w.lookups, u.Lookup)
				if err == nil && got[i].Found != nil {
					w.found++
				}
			}
		}
	}
	return got, err
}

func (w *aheadWatch) OrderByID(ctx context.Context, id string) (*store.Order, error) {
	w.read()
	return w.Store.OrderByID(ctx, id)
}

func (w *aheadWatch) AuthzByID(ctx context.Context, id string) (*store.Authorization, error) {
	w.read()
	return w.Store.AuthzByID(ctx, id)
}

func (w *aheadWatch) ChallengeWithAuthz(ctx context.Context, id string) (*store.ChallengeAuthz, error) {
	w.read()
	return w.Store.ChallengeWithAuthz(ctx, id)
}

func (w *aheadWatch) AuthzsReusable(ctx context.Context, accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) ([]*store.Authorization, error) {
	w.read()
	return w.Store.AuthzsReusable(ctx, accountID, keys, methods, minExpiry)
}

func (w *aheadWatch) CertificateBySerial(ctx context.Context, serial string) (*store.Certificate, error) {
	w.read()
	return w.Store.CertificateBySerial(ctx, serial)
}

// TestReadAhead: a POST-as-GET of an order, authorization, challenge or
// certificate reads its resource in its nonce's round trip (a Lookup of
// the right kind and ID) and makes no read of its own; a URL naming a
// resource that does not exist is still 404, and one whose ID this server
// could not have minted is read on its own, not in the shared batch.
func TestReadAhead(t *testing.T) {
	t.Parallel()
	wrap := func(s store.Store) store.Store { return &aheadWatch{Store: s} }
	withWrappedStores(t, nil, wrap, nil, func(t *testing.T, e *env) {
		watch := e.st.(*aheadWatch)
		a := e.register(t)
		o, loc := e.newOrder(t, a, dnsIDs("ahead.example"))
		az := e.authz(t, a, o.Authorizations[0])
		done := e.issue(t, a, "", "ahead-issued.example")
		last := func(u string) string { return u[strings.LastIndex(u, "/")+1:] }
		for _, tc := range []struct {
			name, url  string
			want       store.Lookup
			wantStatus int
		}{
			{"order", loc, store.Lookup{Kind: store.LookupOrder, ID: last(loc)}, http.StatusOK},
			{"authorization", o.Authorizations[0], store.Lookup{Kind: store.LookupAuthz, ID: last(o.Authorizations[0])}, http.StatusOK},
			{"challenge", az.Challenges[0].URL, store.Lookup{Kind: store.LookupChallenge, ID: last(az.Challenges[0].URL)}, http.StatusOK},
			{"certificate", done.certURL, store.Lookup{Kind: store.LookupCert, ID: last(done.certURL)}, http.StatusOK},
			{"missing order", loc + "x", store.Lookup{Kind: store.LookupOrder, ID: last(loc) + "x"}, http.StatusNotFound},
		} {
			watch.arm()
			r := e.post(t, a, tc.url, nil)
			lookups, found, reads := watch.disarm()
			wantStatus(t, r, tc.wantStatus)
			if len(lookups) != 1 || lookups[0].Kind != tc.want.Kind || lookups[0].ID != tc.want.ID {
				t.Errorf("%s: the nonce carried lookups %+v, want [%+v]", tc.name, lookups, tc.want)
			}
			if wantFound := b2i(tc.wantStatus == http.StatusOK); found != wantFound {
				t.Errorf("%s: %d lookups found a row, want %d", tc.name, found, wantFound)
			}
			if reads != 0 {
				t.Errorf("%s: %d reads of its own, want none", tc.name, reads)
			}
		}

		// An ID with a character no minted ID has: no lookup in the
		// batch, one read of the request's own, and a 404.
		watch.arm()
		r := e.post(t, a, loc+"%2A", nil)
		lookups, _, reads := watch.disarm()
		wantStatus(t, r, http.StatusNotFound)
		if len(lookups) != 0 || reads != 1 {
			t.Errorf("odd ID: lookups %+v and %d reads of its own, want none and 1", lookups, reads)
		}

		// newOrder: the account's reusable authorizations for the
		// identifiers as sent, read with the nonce; the valid one is
		// reused, the other is new.
		watch.arm()
		o2, _ := e.newOrder(t, a, dnsIDs("ahead-issued.example", "ahead-new.example"))
		lookups, found, reads := watch.disarm()
		wantKeys := []store.AuthzKey{
			{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "ahead-issued.example"}},
			{Identifier: acme.Identifier{Type: acme.IdentifierDNS, Value: "ahead-new.example"}},
		}
		if len(lookups) != 1 || lookups[0].Kind != store.LookupReusable || lookups[0].ID != last(a.kid) || !slices.Equal(lookups[0].Keys, wantKeys) {
			t.Errorf("newOrder: the nonce carried lookups %+v, want the account's reusable authorizations for %+v", lookups, wantKeys)
		}
		if found != 1 || reads != 0 {
			t.Errorf("newOrder: %d lookups answered and %d reads of its own, want 1 and none", found, reads)
		}
		if len(o2.Authorizations) != 2 || e.authz(t, a, o2.Authorizations[0]).Status != acme.StatusValid ||
			e.authz(t, a, o2.Authorizations[1]).Status != acme.StatusPending {
			t.Errorf("newOrder: order %+v, want the first authorization reused (valid) and the second new", o2)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestReuseAheadOutlivesOrder: the reusable authorizations read with the
// nonce are asked for with an expiry earlier than the order's (the
// database clock is not known yet), so the handler must drop those that
// do not outlive the order. With orders and authorizations both living an
// hour, a valid authorization never outlives a later order, and is not
// reused, though the read made ahead found it. A rate limit keeps the
// newOrder off the claim at once (newOrderAtOnce), which reads nothing ahead.
func TestReuseAheadOutlivesOrder(t *testing.T) {
	t.Parallel()
	hour := func(c *protocol.Config) {
		c.Server.OrderLifetimeHours, c.Server.AuthzLifetimeHours = 1, 1
		c.Limits.OrdersPerAccount = 1000
	}
	wrap := func(s store.Store) store.Store { return &aheadWatch{Store: s} }
	withWrappedStores(t, hour, wrap, nil, func(t *testing.T, e *env) {
		watch := e.st.(*aheadWatch)
		a := e.register(t)
		o, _ := e.newOrder(t, a, dnsIDs("short.example"))
		e.validate(t, a, o)
		watch.arm()
		o2, _ := e.newOrder(t, a, dnsIDs("short.example"))
		lookups, found, reads := watch.disarm()
		if len(lookups) != 1 || found != 1 || reads != 0 {
			t.Fatalf("lookups %+v (%d answered), %d reads of its own; want one answered lookup and no read", lookups, found, reads)
		}
		if o2.Status != acme.StatusPending || o2.Authorizations[0] == o.Authorizations[0] {
			t.Errorf("second order %+v reused authorization %s, which expires before it", o2, o.Authorizations[0])
		}
	})
}
