package replicas

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// noRetryOnLimit retries a badNonce at once (RFC 8555 §6.5) and nothing
// else, so a rateLimited answer reaches the test rather than a wait of
// hours.
func noRetryOnLimit(_ int, _ *http.Request, res *http.Response) time.Duration {
	if res.StatusCode == http.StatusBadRequest {
		return 10 * time.Millisecond
	}
	return 0
}

// TestLastUnitAcrossFrontends: with orders_per_account = 3 and an account
// holding 2 orders, 8 newOrders sent at once, 4 to each of two frontends
// on one PostgreSQL, admit exactly one; the other 7 are 429 rateLimited
// with Retry-After, and the account has 3 orders.
func TestLastUnitAcrossFrontends(t *testing.T) {
	c := startCluster(t, testdb.Postgres(t), options{frontends: 2, workers: 0, tables: "[limits]\norders_per_account = 3\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := c.acmeClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := cl.AuthorizeOrder(ctx, acme.DomainIDs(fmt.Sprintf("before%d.limits.test", i))); err != nil {
			t.Fatalf("an order within the limit: %v", err)
		}
	}
	var clients []*acme.Client
	for i := 0; i < 8; i++ {
		p, _, err := c.pinned(ctx, cl, c.frontends[i%2])
		if err != nil {
			t.Fatal(err)
		}
		p.RetryBackoff = noRetryOnLimit
		if _, err := p.Discover(ctx); err != nil { // its nonce pool and directory, before the race
			t.Fatal(err)
		}
		clients = append(clients, p)
	}
	admitted, limited := raceNewOrders(t, ctx, clients)
	if admitted != 1 || limited != 7 {
		t.Errorf("8 newOrders for the last unit on two frontends: %d admitted, %d rateLimited; want 1 and 7", admitted, limited)
	}
	kid, err := cl.GetReg(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	acct := kid.URI[strings.LastIndex(kid.URI, "/")+1:]
	if n := queryInt(t, ctx, c.db(ctx), `SELECT count(*) FROM orders WHERE account_id = $1`, acct); n != 3 {
		t.Errorf("the account has %d orders, want 3", n)
	}
}

// raceNewOrders sends one newOrder from each client at once and counts the
// orders created and the 429 rateLimited answers with a Retry-After of at
// least a second; any other answer fails t.
func raceNewOrders(t *testing.T, ctx context.Context, clients []*acme.Client) (admitted, limited int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, p := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := p.AuthorizeOrder(ctx, acme.DomainIDs(fmt.Sprintf("race%d.limits.test", i)))
			mu.Lock()
			defer mu.Unlock()
			var ae *acme.Error
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &ae) && ae.StatusCode == http.StatusTooManyRequests && ae.ProblemType == "urn:ietf:params:acme:error:rateLimited":
				if secs, perr := strconv.Atoi(ae.Header.Get("Retry-After")); perr != nil || secs < 1 {
					t.Errorf("a rateLimited answer without Retry-After: %q (%s)", ae.Header.Get("Retry-After"), ae.Detail)
				}
				limited++
			default:
				t.Errorf("newOrder %d: %v, want an order or rateLimited", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return admitted, limited
}
