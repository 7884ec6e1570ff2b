package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/acme"
)

// TestLastUnitOneFrontend: with orders_per_account = 3 and an account
// holding 2 orders, 8 newOrders sent at once to one frontend admit exactly
// one, on either store; the other 7 are 429 rateLimited with Retry-After,
// and a ninth, after them, is refused too.
func TestLastUnitOneFrontend(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := startCA(t, d.URL(t), "[limits]\norders_per_account = 3\n")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			newClient := func() *acme.Client {
				return &acme.Client{Key: key, DirectoryURL: ca.BaseURL + "/directory", HTTPClient: ca.HTTPClient(), RetryBackoff: retryBadNonceOnly}
			}
			cl := newClient()
			acct, err := cl.Register(ctx, &acme.Account{}, acme.AcceptTOS)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if _, err := cl.AuthorizeOrder(ctx, acme.DomainIDs(fmt.Sprintf("before%d.limits.test", i))); err != nil {
					t.Fatalf("an order within the limit: %v", err)
				}
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			admitted, limited := 0, 0
			start := make(chan struct{})
			for i := 0; i < 8; i++ {
				p := newClient()
				p.KID = acme.KeyID(acct.URI)
				if _, err := p.Discover(ctx); err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, err := p.AuthorizeOrder(ctx, acme.DomainIDs(fmt.Sprintf("race%d.limits.test", i)))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						admitted++
					case isRateLimited(t, err):
						limited++
					default:
						t.Errorf("newOrder %d: %v, want an order or rateLimited", i, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if admitted != 1 || limited != 7 {
				t.Errorf("8 newOrders for the last unit: %d admitted, %d rateLimited; want 1 and 7", admitted, limited)
			}
			if _, err := cl.AuthorizeOrder(ctx, acme.DomainIDs("after.limits.test")); !isRateLimited(t, err) {
				t.Errorf("a newOrder after the race: %v, want rateLimited", err)
			}
		})
	}
}

// retryBadNonceOnly retries a badNonce at once (RFC 8555 §6.5) and nothing
// else, so a rateLimited answer reaches the test rather than a wait of
// hours.
func retryBadNonceOnly(_ int, _ *http.Request, res *http.Response) time.Duration {
	if res.StatusCode == http.StatusBadRequest {
		return 10 * time.Millisecond
	}
	return 0
}

// isRateLimited reports whether err is a 429 rateLimited problem; one
// without a Retry-After of at least a second fails t.
func isRateLimited(t *testing.T, err error) bool {
	var ae *acme.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests || ae.ProblemType != "urn:ietf:params:acme:error:rateLimited" {
		return false
	}
	if secs, perr := strconv.Atoi(ae.Header.Get("Retry-After")); perr != nil || secs < 1 {
		t.Errorf("a rateLimited answer without Retry-After: %q (%s)", ae.Header.Get("Retry-After"), ae.Detail)
	}
	return true
}
