package protocol_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// TestAuthzListsDecidingChallenge: RFC 8555 §7.1.4, an authorization's
// "challenges": a pending one (also while a challenge is processing)
// lists every challenge the client can fulfil; a valid one "the challenge
// that was validated"; an invalid one "the challenge that was attempted
// and failed", with its error, not its siblings invalidated with it.
func TestAuthzListsDecidingChallenge(t *testing.T) {
	t.Parallel()
	failed := &acme.Problem{Type: acme.ProblemConnection, Detail: "connecting to 192.0.2.1:80: connection refused"}
	withStores(t, nil, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			name    string
			answer  string         // the challenge type the client answers; "" none
			verdict *store.Verdict // the worker's verdict on it; nil none yet
			status  acme.Status
			want    []challJSON // type, status and error of each listed (URL and token not compared)
		}{
			{"pending", "", nil, acme.StatusPending, []challJSON{
				{Type: "http-01", Status: acme.StatusPending}, {Type: "dns-01", Status: acme.StatusPending}, {Type: "tls-alpn-01", Status: acme.StatusPending}}},
			{"processing", "dns-01", nil, acme.StatusPending, []challJSON{
				{Type: "http-01", Status: acme.StatusPending}, {Type: "dns-01", Status: acme.StatusProcessing}, {Type: "tls-alpn-01", Status: acme.StatusPending}}},
			{"valid", "dns-01", &store.Verdict{Status: acme.StatusValid}, acme.StatusValid, []challJSON{
				{Type: "dns-01", Status: acme.StatusValid}}},
			{"invalid", "tls-alpn-01", &store.Verdict{Status: acme.StatusInvalid, Error: failed}, acme.StatusInvalid, []challJSON{
				{Type: "tls-alpn-01", Status: acme.StatusInvalid, Error: failed}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := e.register(t)
				o, _ := e.newOrder(t, a, dnsIDs("listed-"+tc.name+".example"))
				az := e.authz(t, a, o.Authorizations[0])
				for _, c := range az.Challenges {
					if c.Type != tc.answer {
						continue
					}
					wantStatus(t, e.post(t, a, c.URL, map[string]any{}), http.StatusOK)
					if tc.verdict != nil {
						v := *tc.verdict
						v.ChallengeID = lastSegment(c.URL)
						if err := e.st.ChallengeVerdict(context.Background(), v); err != nil {
							t.Fatalf("ChallengeVerdict: %v", err)
						}
					}
				}
				az = e.authz(t, a, o.Authorizations[0])
				if az.Status != tc.status {
					t.Errorf("authorization is %s, want %s", az.Status, tc.status)
				}
				got := make([]challJSON, len(az.Challenges))
				for i, c := range az.Challenges {
					if c.URL == "" || c.Token == "" {
						t.Errorf("challenge %d has no url or token: %+v", i, c)
					}
					got[i] = challJSON{Type: c.Type, Status: c.Status, Error: c.Error}
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("challenges listed:\n%+v\nwant\n%+v", got, tc.want)
				}
			})
		}
	})
}

// TestExpiredAuthzReadsExpired: an authorization past its expiry that
// housekeeping has not moved yet reads as expired (RFC 8555 §7.1.6:
// pending and valid both become expired), so a client polling it stops
// instead of waiting on a pending one for ever, and it can no longer be
// deactivated or answered.
func TestExpiredAuthzReadsExpired(t *testing.T) {
	t.Parallel()
	withStores(t, nil, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			name     string
			validate bool
		}{
			{"pending", false},
			{"valid", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := e.register(t)
				o, _ := e.newOrder(t, a, dnsIDs("lapsed-"+tc.name+".example"))
				if tc.validate {
					e.validate(t, a, o)
				}
				u := o.Authorizations[0]
				before := e.authz(t, a, u)
				e.expire(t, "authorizations", lastSegment(u))
				az := e.authz(t, a, u)
				if az.Status != acme.StatusExpired {
					t.Errorf("an authorization %s past its expiry reads %s, want expired", tc.name, az.Status)
				}
				if len(az.Challenges) == 0 {
					t.Errorf("the expired authorization lists no challenges")
				}
				r := e.post(t, a, u, map[string]any{"status": "deactivated"})
				p := wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest)
				if want := "the authorization is expired; only a pending or valid authorization can be deactivated"; p.Detail != want {
					t.Errorf("deactivating it: %q, want %q", p.Detail, want)
				}
				if !tc.validate {
					r := e.post(t, a, before.Challenges[0].URL, map[string]any{})
					p := wantProblem(t, e, r, acme.ProblemMalformed, http.StatusBadRequest)
					if !strings.Contains(p.Detail, "expired") {
						t.Errorf("answering its challenge: %q, want it to say the authorization expired", p.Detail)
					}
				}
			})
		}
	})
}
