package protocol_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// Members named twice in what a JWS carries inside its payload: an
// external account binding and keyChange's inner JWS. encoding/json reads
// the last; each request below puts a wrong value first and the right one
// last, so without the check it would succeed.

// macBinding is an externalAccountBinding object written as raw JSON from
// its protected header, with the MAC computed over it, and members added
// to the object before "signature".
func macBinding(t *testing.T, header, payload string, mac []byte, extra string) string {
	t.Helper()
	protected, pl := b64([]byte(header)), b64([]byte(payload))
	m := hmac.New(sha256.New, mac)
	m.Write([]byte(protected + "." + pl))
	return `{"protected":"` + protected + `","payload":"` + pl + `",` + extra + `"signature":"` + b64(m.Sum(nil)) + `"}`
}

func TestEABRefusesDuplicateMembers(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) { c.Server.ExternalAccountRequired = true }, func(t *testing.T, e *env) {
		url := e.base + "/acme/new-account"
		mac := make([]byte, 32)
		_, _ = rand.Read(mac)
		if _, err := e.st.EABCreate(context.Background(), store.EABKey{ID: "kid-dup", MACKey: mac},
			store.AuditEvent{Actor: "test", Action: "eab.create", Subject: "kid-dup"}); err != nil {
			t.Fatal(err)
		}
		a := newKey(t)
		jwk, err := json.Marshal(jose.JSONWebKey{Key: a.key.Public()})
		if err != nil {
			t.Fatal(err)
		}
		header := `{"alg":"HS256","kid":"kid-dup","url":"` + url + `"}`
		post := func(binding string) *response {
			return e.post(t, a, url, []byte(`{"termsOfServiceAgreed":true,"externalAccountBinding":`+binding+`}`))
		}
		for name, binding := range map[string]string{
			"signature twice":        macBinding(t, header, string(jwk), mac, `"signature":"AAAA",`),
			"kid twice":              macBinding(t, `{"alg":"HS256","kid":"kid-none","url":"`+url+`","kid":"kid-dup"}`, string(jwk), mac, ""),
			"alg twice but for case": macBinding(t, `{"ALG":"HS512","alg":"HS256","kid":"kid-dup","url":"`+url+`"}`, string(jwk), mac, ""),
			"a key member twice":     macBinding(t, header, strings.TrimSuffix(string(jwk), "}")+`,"kty":"EC"}`, mac, ""),
		} {
			p := wantProblem(t, e, post(binding), acme.ProblemMalformed, http.StatusBadRequest)
			if !strings.Contains(p.Detail, "twice") && !strings.Contains(p.Detail, "letter case") {
				t.Errorf("%s: detail %q names no duplicate", name, p.Detail)
			}
		}
		// The same binding, each member once, binds.
		wantStatus(t, post(macBinding(t, header, string(jwk), mac, "")), http.StatusCreated)
	})
}

func TestKeyChangeRefusesDuplicateMembers(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		url := e.base + "/acme/key-change"
		a := e.register(t)
		next := newKey(t)
		old, err := json.Marshal(jose.JSONWebKey{Key: a.key.Public()})
		if err != nil {
			t.Fatal(err)
		}
		inner := func(payload string) []byte {
			return e.signJWK(t, next.alg, jose.JSONWebKey{Key: next.key}, url, []byte(payload), false)
		}
		r := e.post(t, a, url, inner(`{"account":"`+e.base+`/acme/acct/none","oldKey":`+string(old)+`,"account":"`+a.kid+`"}`))
		if p := wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest); !strings.Contains(p.Detail, `member "account" appears twice`) {
			t.Errorf("detail %q", p.Detail)
		}
		wantStatus(t, e.post(t, a, url, inner(`{"account":"`+a.kid+`","oldKey":`+string(old)+`}`)), http.StatusOK)
	})
}
