package protocol_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
)

func TestHostileRequests(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		a := e.register(t)
		b := e.register(t)
		newOrder := e.base + "/acme/new-order"
		order := map[string]any{"identifiers": dnsIDs("hostile.example")}

		t.Run("wrong content type", func(t *testing.T) {
			body := e.sign(t, a, newOrder, []byte(`{"identifiers":[{"type":"dns","value":"x.example"}]}`), signOpts{})
			for _, ct := range []string{"application/json", "", "text/plain"} {
				wantProblem(t, e, e.postRaw(t, newOrder, ct, body), acme.ProblemMalformed, http.StatusUnsupportedMediaType)
			}
		})
		t.Run("malformed JWS", func(t *testing.T) {
			for _, body := range []string{"", "not json", `{"protected":1}`, `[]`, `eyJhbGciOiJFUzI1NiJ9.e30.sig`} {
				wantProblem(t, e, e.postRaw(t, newOrder, "application/jose+json", []byte(body)), acme.ProblemMalformed, 400)
			}
		})
		t.Run("unsupported algorithm", func(t *testing.T) {
			// RFC 8555 §6.2: 400 badSignatureAlgorithm listing what the
			// server accepts, so the client can sign again with one.
			var m map[string]string
			if err := json.Unmarshal(e.sign(t, a, newOrder, []byte(`{}`), signOpts{}), &m); err != nil {
				t.Fatal(err)
			}
			for _, alg := range []string{"HS256", "none", "PS256"} {
				h, _ := base64.RawURLEncoding.DecodeString(m["protected"])
				h = []byte(strings.Replace(string(h), `"alg":"ES256"`, `"alg":"`+alg+`"`, 1))
				body, _ := json.Marshal(map[string]string{"protected": base64.RawURLEncoding.EncodeToString(h), "payload": m["payload"], "signature": m["signature"]})
				p := wantProblem(t, e, e.postRaw(t, newOrder, "application/jose+json", body), acme.ProblemBadSignatureAlgorithm, 400)
				if !slices.Equal(p.Algorithms, jws.Algorithms) {
					t.Errorf("%s: algorithms = %v, want %v", alg, p.Algorithms, jws.Algorithms)
				}
			}
		})
		t.Run("malformed JSON payload", func(t *testing.T) {
			wantProblem(t, e, e.post(t, a, newOrder, []byte(`{"identifiers": [`)), acme.ProblemMalformed, 400)
			wantProblem(t, e, e.post(t, a, newOrder, []byte(`{"identifiers": "dns:x.example"}`)), acme.ProblemMalformed, 400)
		})
		t.Run("a member named twice", func(t *testing.T) {
			// encoding/json keeps the last of two members, even two that
			// differ only in case; another parser may keep the first. Each
			// is sent twice, so a request the frontend would fold into one
			// transaction (claimnow.go) is refused as the ordinary one is.
			for body, detail := range map[string]string{
				`{"identifiers":[{"type":"dns","value":"one.example","value":"two.example"}]}`:                                `member "value" appears twice (in identifiers[0])`,
				`{"identifiers":[{"type":"dns","value":"one.example"}],"Identifiers":[{"type":"dns","value":"two.example"}]}`: `members "identifiers" and "Identifiers" differ only in letter case`,
			} {
				for range 2 {
					p := wantProblem(t, e, e.post(t, a, newOrder, []byte(body)), acme.ProblemMalformed, 400)
					if !strings.Contains(p.Detail, detail) {
						t.Errorf("detail %q does not say %q", p.Detail, detail)
					}
				}
			}
		})
		t.Run("oversized body", func(t *testing.T) {
			big := strings.Repeat("a", int(e.cfg.Server.MaxBodyBytes)+1)
			p := wantProblem(t, e, e.post(t, a, newOrder, map[string]any{"identifiers": dnsIDs("x.example"), "pad": big}), acme.ProblemMalformed, http.StatusRequestEntityTooLarge)
			if !strings.Contains(p.Detail, "request body too large") {
				t.Errorf("detail = %q", p.Detail)
			}
		})
		t.Run("replayed nonce", func(t *testing.T) {
			n := e.nonce(t)
			wantStatus(t, e.post(t, a, newOrder, order, signOpts{nonce: n}), http.StatusCreated)
			r := e.post(t, a, newOrder, order, signOpts{nonce: n})
			wantProblem(t, e, r, acme.ProblemBadNonce, 400)
			if fresh := r.header.Get("Replay-Nonce"); fresh == "" || fresh == n {
				t.Errorf("badNonce Replay-Nonce = %q, want a fresh one", fresh)
			}
			// The fresh nonce works.
			wantStatus(t, e.post(t, a, newOrder, order, signOpts{nonce: r.header.Get("Replay-Nonce")}), http.StatusCreated)
		})
		t.Run("forged nonce", func(t *testing.T) {
			wantProblem(t, e, e.post(t, a, newOrder, order, signOpts{nonce: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}), acme.ProblemBadNonce, 400)
		})
		t.Run("url mismatch", func(t *testing.T) {
			wantProblem(t, e, e.post(t, a, newOrder, order, signOpts{url: e.base + "/acme/new-account"}), acme.ProblemUnauthorized, 403)
			wantProblem(t, e, e.post(t, a, newOrder, order, signOpts{url: "https://evil.example/acme/new-order"}), acme.ProblemUnauthorized, 403)
		})
		t.Run("signature by another key", func(t *testing.T) {
			impostor := newKey(t)
			impostor.kid = a.kid
			wantProblem(t, e, e.post(t, impostor, newOrder, order), acme.ProblemMalformed, 400)
			// A route whose read is made while the nonce is consumed
			// (ahead.go) refuses it just the same.
			_, loc := e.newOrder(t, a, dnsIDs("impostor.example"))
			wantProblem(t, e, e.post(t, impostor, loc, nil), acme.ProblemMalformed, 400)
		})
		t.Run("kid of another account's resource", func(t *testing.T) {
			o, loc := e.newOrder(t, a, dnsIDs("mine.example"))
			az := e.authz(t, a, o.Authorizations[0])
			for _, u := range []string{loc, loc + "/finalize", o.Authorizations[0], az.Challenges[0].URL, a.kid, a.kid + "/orders"} {
				wantProblem(t, e, e.post(t, b, u, nil), acme.ProblemUnauthorized, 403)
			}
		})
		t.Run("kid or URL no account or row can have", func(t *testing.T) {
			// A NUL or invalid UTF-8 reaches the store only as "no such
			// account" or "no such row": PostgreSQL would refuse the text,
			// and with it the batch of every request sharing the nonce's
			// round trip.
			for _, kid := range []string{a.kid + "\x00", a.kid[:strings.LastIndex(a.kid, "/")+1] + "\x00", a.kid + "\xff"} {
				impostor := newKey(t)
				impostor.kid = kid
				wantProblem(t, e, e.post(t, impostor, newOrder, order), acme.ProblemAccountDoesNotExist, 400)
			}
			_, loc := e.newOrder(t, a, dnsIDs("odd-url.example"))
			for _, u := range []string{loc + "%00", loc + "%FF", loc + "%2F"} {
				wantStatus(t, e.post(t, a, u, nil), http.StatusNotFound)
			}
		})
		t.Run("POST-as-GET with a payload where none belongs", func(t *testing.T) {
			_, loc := e.newOrder(t, a, dnsIDs("x.example"))
			wantProblem(t, e, e.post(t, a, loc, map[string]any{"status": "valid"}), acme.ProblemMalformed, 400)
		})
	})
}

// slowBody yields its first bytes, then blocks until released: a client
// trickling its body while its request holds an admission permit.
type slowBody struct {
	first   []byte
	release chan struct{}
}

func (s *slowBody) Read(p []byte) (int, error) {
	if len(s.first) > 0 {
		n := copy(p, s.first)
		s.first = s.first[n:]
		return n, nil
	}
	<-s.release
	return 0, io.EOF
}

func TestAdmission(t *testing.T) {
	t.Parallel()
	withStores(t, func(c *protocol.Config) { c.Server.MaxConcurrentRequests = 1 }, func(t *testing.T, e *env) {
		held := &slowBody{first: []byte(`{"protected":"`), release: make(chan struct{})}
		req, _ := http.NewRequest(http.MethodPost, e.base+"/acme/new-account", held)
		req.Header.Set("Content-Type", "application/jose+json")
		done := make(chan int, 1)
		go func() {
			res, err := e.hc.Do(req)
			if err != nil {
				done <- 0
				return
			}
			res.Body.Close()
			done <- res.StatusCode
		}()
		// Wait until the held request is inside a handler.
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(string(e.get(t, http.MethodGet, "/metrics").body), "hallmark_frontend_requests_in_flight 1") {
			if time.Now().After(deadline) {
				t.Fatal("the slow request never took its permit")
			}
			time.Sleep(10 * time.Millisecond)
		}

		start := time.Now()
		r := e.postRaw(t, e.base+"/acme/new-order", "application/jose+json", []byte("{}"))
		took := time.Since(start)
		t.Logf("%s: second request refused in %v while the permit was held", e.kind, took)
		p := wantProblem(t, e, r, acme.ProblemServerInternal, http.StatusServiceUnavailable)
		if r.header.Get("Retry-After") != "2" {
			t.Errorf("Retry-After = %q, want 2", r.header.Get("Retry-After"))
		}
		if !strings.Contains(p.Detail, "busy") {
			t.Errorf("detail = %q", p.Detail)
		}
		// Directory and nonces are not admission-controlled.
		wantStatus(t, e.get(t, http.MethodHead, "/acme/new-nonce"), http.StatusOK)

		close(held.release)
		if status := <-done; status != http.StatusBadRequest {
			t.Errorf("held request ended with %d, want 400 (its body was a truncated JWS)", status)
		}
		// The permit is free again.
		a := newKey(t)
		wantStatus(t, e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true}), http.StatusCreated)
		if !strings.Contains(string(e.get(t, http.MethodGet, "/metrics").body), "hallmark_frontend_admission_rejected_total 1") {
			t.Errorf("metrics do not count the rejection")
		}
	})
}
