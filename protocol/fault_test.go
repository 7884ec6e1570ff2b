package protocol_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
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
