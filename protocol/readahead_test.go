package protocol_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// aheadWatch is the real store watching one request at a time, once armed:
// its nonce's consumption waits (up to a second) for the route's read to
// start, which happens only if the read is made while the nonce is being
// consumed; and it counts the route's reads.
type aheadWatch struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	started chan struct{} // closed by the request's first read
	reads   int
	waited  bool // the nonce's consumption saw the read start
}

func (w *aheadWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.started, w.reads, w.waited = true, make(chan struct{}), 0, false
}

// disarm stops watching and reports the request's reads and whether the
// read was made ahead.
func (w *aheadWatch) disarm() (reads int, ahead bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	return w.reads, w.waited
}

func (w *aheadWatch) read() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return
	}
	if w.reads == 0 {
		close(w.started)
	}
	w.reads++
}

func (w *aheadWatch) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	w.mu.Lock()
	armed, started := w.armed, w.started
	w.mu.Unlock()
	if armed {
		select {
		case <-started:
			w.mu.Lock()
			w.waited = true
			w.mu.Unlock()
		case <-time.After(time.Second):
		}
	}
	return w.Store.NonceConsume(ctx, uses)
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

func (w *aheadWatch) CertificateBySerial(ctx context.Context, serial string) (*store.Certificate, error) {
	w.read()
	return w.Store.CertificateBySerial(ctx, serial)
}

// TestReadAhead: a POST-as-GET of an order, authorization, challenge or
// certificate reads its resource while its nonce is being consumed, not
// after, and only once: the handler takes the read made ahead.
func TestReadAhead(t *testing.T) {
	t.Parallel()
	wrap := func(s store.Store) store.Store { return &aheadWatch{Store: s} }
	withWrappedStores(t, nil, wrap, nil, func(t *testing.T, e *env) {
		watch := e.st.(*aheadWatch)
		a := e.register(t)
		o, loc := e.newOrder(t, a, dnsIDs("ahead.example"))
		az := e.authz(t, a, o.Authorizations[0])
		done := e.issue(t, a, "", "ahead-issued.example")
		for _, tc := range []struct{ name, url string }{
			{"order", loc},
			{"authorization", o.Authorizations[0]},
			{"challenge", az.Challenges[0].URL},
			{"certificate", done.certURL},
		} {
			watch.arm()
			r := e.post(t, a, tc.url, nil)
			reads, ahead := watch.disarm()
			wantStatus(t, r, http.StatusOK)
			if !ahead {
				t.Errorf("%s: the read was not made while the nonce was consumed", tc.name)
			}
			if reads != 1 {
				t.Errorf("%s: %d reads of the resource, want 1", tc.name, reads)
			}
		}
	})
}
