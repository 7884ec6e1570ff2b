package protocol_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// BenchmarkNewOrder is one newOrder request through the whole frontend
// handler: admission, JWS parse and verify, nonce redeemed, account looked
// up, policy, the order with its authorizations and challenges written,
// the response rendered. On a real SQLite file and a fresh PostgreSQL
// database; no network (the handler is called directly). names=100 is an
// order of 100 names, each needing a new authorization.
//
//	go test ./protocol -run '^$' -bench NewOrder -benchtime 2s
func BenchmarkNewOrder(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, names := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/names=%d", kind, names), func(b *testing.B) {
				db := testdb.Open(b, kind)
				cfg := testConfig()
				cfg.Server.BaseURL = "http://127.0.0.1:1"
				srv, err := protocol.New(cfg, db.Store, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				c := &benchClient{h: srv.Handler(), base: cfg.Server.BaseURL}
				if c.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
					b.Fatal(err)
				}
				res := c.post(b, "/acme/new-account", `{"termsOfServiceAgreed":true}`)
				if res.Code != http.StatusCreated {
					b.Fatalf("newAccount: %d %s", res.Code, res.Body)
				}
				c.kid = res.Header().Get("Location")
				for b.Loop() {
					ids := make([]map[string]string, names)
					for i := range ids {
						name := make([]byte, 8)
						_, _ = rand.Read(name)
						ids[i] = map[string]string{"type": "dns", "value": hex.EncodeToString(name) + ".example.com"}
					}
					payload, _ := json.Marshal(map[string]any{"identifiers": ids})
					if res := c.post(b, "/acme/new-order", string(payload)); res.Code != http.StatusCreated {
						b.Fatalf("newOrder: %d %s", res.Code, res.Body)
					}
				}
			})
		}
	}
}

// benchClient signs requests for one account and keeps the last nonce.
type benchClient struct {
	h         http.Handler
	base      string
	key       *ecdsa.PrivateKey
	kid       string
	lastNonce string
}

func (c *benchClient) post(b *testing.B, path, payload string) *httptest.ResponseRecorder {
	b.Helper()
	if c.lastNonce == "" {
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, c.base+"/acme/new-nonce", nil))
		c.lastNonce = rec.Header().Get("Replay-Nonce")
	}
	opts := &jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{"nonce": c.lastNonce, "url": c.base + path}}
	sk := jose.SigningKey{Algorithm: jose.ES256, Key: c.key}
	if c.kid == "" {
		opts.EmbedJWK = true
	} else {
		sk.Key = jose.JSONWebKey{Key: c.key, KeyID: c.kid}
	}
	signer, err := jose.NewSigner(sk, opts)
	if err != nil {
		b.Fatal(err)
	}
	sig, err := signer.Sign([]byte(payload))
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, c.base+path, strings.NewReader(sig.FullSerialize()))
	req.Header.Set("Content-Type", "application/jose+json")
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	c.lastNonce = rec.Header().Get("Replay-Nonce")
	return rec
}
