package protocol_test

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// TestFinalizeRefusesAccountKey: a CSR whose public key is the account's
// own key is refused with badCSR (as Boulder refuses it), whatever the
// key's type, and nothing is queued. On PostgreSQL the folded finalize
// refuses it before its transaction (no fold reaches the store), and the
// ordinary path answers; the order stays ready.
func TestFinalizeRefusesAccountKey(t *testing.T) {
	t.Parallel()
	withFoldWatch(t, func(t *testing.T, e *env, watch *foldWatch, pg bool) {
		for _, tc := range []struct {
			name string
			key  func(t *testing.T) *account
		}{
			{"p256 account key", newKey},
			{"rsa account key", func(t *testing.T) *account {
				k, err := rsa.GenerateKey(rand.Reader, 2048)
				if err != nil {
					t.Fatal(err)
				}
				return &account{key: k, alg: jose.RS256}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := tc.key(t)
				r := e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
				wantStatus(t, r, http.StatusCreated)
				a.kid = r.header.Get("Location")
				names := []string{"same-key.example"}
				o, loc := e.newOrder(t, a, dnsIDs(names...)) // the frontend learns the key: the next finalize may fold
				e.validate(t, a, o)
				jobs := e.jobCount(t, "signer_issue")
				watch.reset()
				r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, a.key, names...))})
				p := wantProblem(t, e, r, acme.ProblemBadCSR, http.StatusBadRequest)
				want := acme.Problem{Type: acme.ProblemBadCSR, Status: http.StatusBadRequest,
					Detail: "the CSR's public key is the account key; the certificate's key must not be the account key: generate a new key for the certificate"}
				if p.Detail != want.Detail || p.Identifier != nil || len(p.Subproblems) != 0 {
					t.Errorf("problem = %+v, want %+v", p, want)
				}
				watch.wantUnfolded(t, false)
				if n := e.jobCount(t, "signer_issue") - jobs; n != 0 {
					t.Errorf("%d signer_issue jobs queued", n)
				}
				if got := e.getOrder(t, a, loc); got.Status != acme.StatusReady {
					t.Errorf("the order is %s after the refusal, want ready", got.Status)
				}
			})
		}
	})
}
