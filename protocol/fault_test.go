package protocol_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// failingOrders is the real store with one fault: reading an order fails,
// on its own or in a nonce's round trip.
type failingOrders struct{ store.Store }

var errDiskOnFire = errors.New("disk on fire at sector 7")

func (failingOrders) OrderByID(context.Context, string) (*store.Order, error) {
	return nil, errDiskOnFire
}

func (f failingOrders) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	got, err := f.Store.NonceConsume(ctx, uses)
	for i, u := range uses {
		if err == nil && u.Lookup.Kind == store.LookupOrder && (got[i].Found != nil || got[i].FoundErr != nil) {
			got[i].Found, got[i].FoundErr = nil, errDiskOnFire
		}
	}
	return got, err
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestInternalErrorsAreHidden: a store failure renders serverInternal with a
// fixed sentence; the cause goes to the log, never to the client.
func TestInternalErrorsAreHidden(t *testing.T) {
	t.Parallel()
	wrap := func(s store.Store) store.Store { return failingOrders{s} }
	var logs syncBuffer
	withWrappedStores(t, nil, wrap, &logs, func(t *testing.T, e *env) {
		a := e.register(t)
		_, loc := e.newOrder(t, a, dnsIDs("fault.example"))
		r := e.post(t, a, loc, nil)
		p := wantProblem(t, e, r, acme.ProblemServerInternal, http.StatusInternalServerError)
		if p.Detail != "the server hit an internal error; try again later" || strings.Contains(string(r.body), "disk on fire") {
			t.Errorf("internal problem leaks or changed its detail: %s", r.body)
		}
		if !strings.Contains(logs.String(), "disk on fire at sector 7") {
			t.Errorf("the cause was not logged; log:\n%s", logs.String())
		}
	})
}

// unavailableStore is the real store whose reads after the nonce fail as a
// dialect reports an outage (store.ErrUnavailable wrapping the driver's
// error) once down is set: the account by key, an order (on its own or in
// a nonce's round trip), the newest CRL, and a ping.
type unavailableStore struct {
	store.Store
	down *atomic.Bool
}

var errRefused = fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connect: %w", store.ErrUnavailable, syscall.ECONNREFUSED)

func (u unavailableStore) fail() bool { return u.down.Load() }

func (u unavailableStore) AccountByThumbprint(ctx context.Context, thumb string) (*store.Account, error) {
	if u.fail() {
		return nil, errRefused
	}
	return u.Store.AccountByThumbprint(ctx, thumb)
}

func (u unavailableStore) OrderByID(ctx context.Context, id string) (*store.Order, error) {
	if u.fail() {
		return nil, errRefused
	}
	return u.Store.OrderByID(ctx, id)
}

func (u unavailableStore) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	got, err := u.Store.NonceConsume(ctx, uses)
	for i, use := range uses {
		if err == nil && u.fail() && use.Lookup.Kind == store.LookupOrder {
			got[i].Found, got[i].FoundErr = nil, errRefused
		}
	}
	return got, err
}

func (u unavailableStore) CRLShardLatest(ctx context.Context, issuer string, shard int) (*store.CRL, error) {
	if u.fail() {
		return nil, errRefused
	}
	return u.Store.CRLShardLatest(ctx, issuer, shard)
}

func (u unavailableStore) Ping(ctx context.Context) error {
	if u.fail() {
		return errRefused
	}
	return u.Store.Ping(ctx)
}

// TestUnavailableIs503: a store call that fails with store.ErrUnavailable
// past the nonce, whichever endpoint made it, is 503 serverInternal with
// Retry-After and a detail naming the database, never a bare 500; /readyz
// is 503 meanwhile, and both recover when the store does.
func TestUnavailableIs503(t *testing.T) {
	t.Parallel()
	wrap := func(s store.Store) store.Store { return unavailableStore{s, new(atomic.Bool)} }
	withWrappedStores(t, nil, wrap, nil, func(t *testing.T, e *env) {
		down := e.st.(unavailableStore).down
		a := e.register(t)
		_, orderURL := e.newOrder(t, a, dnsIDs("unavailable.example"))
		down.Store(true)
		calls := []outageCall{
			{"newAccount", func(t *testing.T) *response {
				return e.post(t, newKey(t), e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
			}},
			{"order", func(t *testing.T) *response { return e.post(t, a, orderURL, nil) }},
			{"crl", func(t *testing.T) *response { return e.get(t, http.MethodGet, "/crl/"+issuerID) }},
		}
		for _, call := range calls {
			wantOutage(t, e, call.name, call.do(t), "the CA's database is unavailable; retry after 2 seconds")
		}
		wantStatus(t, e.get(t, http.MethodGet, "/readyz"), http.StatusServiceUnavailable)
		down.Store(false)
		wantStatus(t, e.get(t, http.MethodGet, "/readyz"), http.StatusOK)
		wantStatus(t, e.post(t, a, orderURL, nil), http.StatusOK)
	})
}
