package protocol_test

import (
	"context"
	"crypto"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// block reports pub compromised, as an operator's hallmark keys block
// would.
func (e *env) block(t *testing.T, pub crypto.PublicKey) {
	t.Helper()
	h, err := store.PublicKeyHash(pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.KeyBlock(context.Background(), store.BlockedKey{SPKIHash: h, Why: "a test", Actor: "cli:test"}); err != nil {
		t.Fatal(err)
	}
}

// wantBlocked asserts badPublicKey (RFC 8555 §6.7) with a detail a client
// operator can act on.
func wantBlocked(t *testing.T, e *env, r *response, what string) {
	t.Helper()
	p := wantProblem(t, e, r, acme.ProblemBadPublicKey, http.StatusBadRequest)
	for _, want := range []string{what + " was reported compromised on ", "generate a new key"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q does not say %q", p.Detail, want)
		}
	}
}

// TestFinalizeRefusesBlockedKey: a CSR whose key was reported compromised
// is refused with badPublicKey (CA/B Forum BR §6.1.1.3) and claims
// nothing: no signer_issue job, the order stays ready, and a CSR for a new
// key then finalizes it. On PostgreSQL the folded finalize is tried and
// commits nothing (the claim's condition), and the ordinary path answers.
func TestFinalizeRefusesBlockedKey(t *testing.T) {
	t.Parallel()
	withFoldWatch(t, func(t *testing.T, e *env, watch *foldWatch, pg bool) {
		a := e.register(t)
		names := []string{"blocked-key.example"}
		o, loc := e.newOrder(t, a, dnsIDs(names...))
		e.validate(t, a, o)
		compromised := newKey(t).key
		e.block(t, compromised.Public())
		jobs := e.jobCount(t, "signer_issue")
		watch.reset()

		r := e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, compromised, names...))})
		wantBlocked(t, e, r, "the CSR's public key")
		watch.wantUnfolded(t, pg)
		if n := e.jobCount(t, "signer_issue") - jobs; n != 0 {
			t.Errorf("%d signer_issue jobs queued for a blocked key", n)
		}
		if got := e.getOrder(t, a, loc); got.Status != acme.StatusReady {
			t.Errorf("the order is %s after the refusal, want ready", got.Status)
		}

		r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, newKey(t).key, names...))})
		wantStatus(t, r, http.StatusOK)
	})
}

// TestAccountKeyBlocked: newAccount with a key reported compromised and a
// keyChange to one are refused with badPublicKey; no account is created,
// and the account keeps its key.
func TestAccountKeyBlocked(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		bad := newKey(t)
		e.block(t, bad.key.Public())
		accounts := e.count(t, "SELECT count(*) FROM accounts")
		r := e.post(t, bad, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true})
		wantBlocked(t, e, r, "this account key")
		if n := e.count(t, "SELECT count(*) FROM accounts"); n != accounts {
			t.Errorf("accounts = %d after a refused newAccount, want %d", n, accounts)
		}

		a := e.register(t)
		url := e.base + "/acme/key-change"
		raw, _ := json.Marshal(map[string]any{"account": a.kid, "oldKey": jose.JSONWebKey{Key: a.key.Public()}})
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: bad.alg, Key: bad.key},
			&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{"url": url}})
		if err != nil {
			t.Fatal(err)
		}
		sig, err := signer.Sign(raw)
		if err != nil {
			t.Fatal(err)
		}
		r = e.post(t, a, url, []byte(sig.FullSerialize()))
		wantBlocked(t, e, r, "the new account key")
		wantStatus(t, e.post(t, a, a.kid, nil), http.StatusOK) // the old key still signs
	})
}
