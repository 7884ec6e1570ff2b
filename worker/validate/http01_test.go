package validate

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

const challengePath = "/.well-known/acme-challenge/" + testToken

// respond answers the challenge path with body and status; anything else 404s.
func respond(status int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != challengePath {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})
}

func redirectTo(loc string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loc, http.StatusFound)
	})
}

// redirectChain redirects /hop/N to /hop/N+1 n times, starting at the
// challenge path, then serves the key authorization.
func redirectChain(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hop := 0
		if rest, ok := strings.CutPrefix(r.URL.Path, "/hop/"); ok {
			hop, _ = strconv.Atoi(rest)
		} else if r.URL.Path != challengePath {
			http.NotFound(w, r)
			return
		}
		if hop < n {
			http.Redirect(w, r, "/hop/"+strconv.Itoa(hop+1), http.StatusMovedPermanently)
			return
		}
		fmt.Fprint(w, testKeyAuth)
	})
}

func TestHTTP01(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup starts servers, adds DNS records and adjusts cfg; it returns the identifier.
		setup    func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier
		want     acme.ProblemType
		mentions []string
		hops     int // number of Attempt records, when non-zero
	}{
		{
			name: "key authorization served",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, respond(200, testKeyAuth), false)
				return dnsID("example.test")
			},
			hops: 1,
		},
		{
			name: "trailing whitespace is ignored",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, respond(200, testKeyAuth+" \r\n\t\n"), false)
				return dnsID("example.test")
			},
		},
		{
			name: "leading whitespace is not ignored",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, respond(200, " "+testKeyAuth), false)
				return dnsID("example.test")
			},
			want: acme.ProblemUnauthorized,
		},
		{
			name: "wrong body",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, respond(200, "not-it"), false)
				return dnsID("example.test")
			},
			want:     acme.ProblemUnauthorized,
			mentions: []string{"127.0.0.1", "http://example.test:", challengePath, `expected "` + testKeyAuth + `"`, `got "not-it"`},
		},
		{
			name: "404",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, respond(404, "nope"), false)
				return dnsID("example.test")
			},
			want:     acme.ProblemUnauthorized,
			mentions: []string{"HTTP status 404", "127.0.0.1", challengePath},
		},
		{
			name: "body too large",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, respond(200, testKeyAuth+strings.Repeat("x", MaxBodyBytes)), false)
				return dnsID("example.test")
			},
			want:     acme.ProblemUnauthorized,
			mentions: []string{"larger than 8192 bytes"},
		},
		{
			name: "redirect to another name on the http port",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test", "other.test")
				cfg.HTTPPort = serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Host == "example.test:"+strconv.Itoa(cfg.HTTPPort) {
						http.Redirect(w, r, "http://other.test:"+strconv.Itoa(cfg.HTTPPort)+r.URL.Path, http.StatusFound)
						return
					}
					respond(200, testKeyAuth).ServeHTTP(w, r)
				}), false)
				return dnsID("example.test")
			},
			hops: 2,
		},
		{
			name: "redirect to https without a port uses the https port",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test", "secure.test")
				cfg.HTTPSPort = serveHTTP(t, respond(200, testKeyAuth), true)
				cfg.HTTPPort = serveHTTP(t, redirectTo("https://secure.test"+challengePath), false)
				return dnsID("example.test")
			},
			hops: 2,
		},
		{
			name: "redirect to a forbidden port",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				other := serveHTTP(t, respond(200, testKeyAuth), false)
				cfg.HTTPPort = serveHTTP(t, redirectTo("http://example.test:"+strconv.Itoa(other)+challengePath), false)
				return dnsID("example.test")
			},
			want:     acme.ProblemConnection,
			mentions: []string{"Redirect to", "rejected", "is not allowed", "127.0.0.1", challengePath},
		},
		{
			name: "redirect to a forbidden scheme",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, redirectTo("ftp://example.test/x"), false)
				return dnsID("example.test")
			},
			want:     acme.ProblemConnection,
			mentions: []string{`"ftp://example.test/x" rejected`, `only http and https`},
		},
		{
			name: "ten redirects are followed",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, redirectChain(MaxRedirects), false)
				return dnsID("example.test")
			},
			hops: MaxRedirects + 1,
		},
		{
			name: "eleven redirects are too many",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, redirectChain(MaxRedirects+1), false)
				return dnsID("example.test")
			},
			want:     acme.ProblemConnection,
			mentions: []string{"Too many redirects", "/hop/10"},
			hops:     MaxRedirects + 1,
		},
		{
			name: "redirect to a name that does not resolve",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				cfg.HTTPPort = serveHTTP(t, redirectTo("http://missing.test"+challengePath), false)
				return dnsID("example.test")
			},
			want:     acme.ProblemDNS,
			mentions: []string{"NXDOMAIN", "missing.test"},
		},
		{
			name: "connection refused",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.host(t, "example.test")
				return dnsID("example.test") // cfg.HTTPPort is a closed port
			},
			want:     acme.ProblemConnection,
			mentions: []string{"127.0.0.1", "Connection refused", challengePath},
		},
		{
			name: "name does not exist",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				return dnsID("nowhere.test")
			},
			want:     acme.ProblemDNS,
			mentions: []string{"NXDOMAIN looking up A for nowhere.test"},
		},
		{
			name: "resolver fails",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				d.rcode("broken.test", 2) // SERVFAIL
				return dnsID("broken.test")
			},
			want:     acme.ProblemDNS,
			mentions: []string{"SERVFAIL", "broken.test"},
		},
		{
			name: "IP identifier is used directly",
			setup: func(t *testing.T, d *testDNS, cfg *Config) acme.Identifier {
				cfg.HTTPPort = serveHTTP(t, respond(200, testKeyAuth), false)
				return ipID("127.0.0.1")
			},
			hops: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newTestDNS(t)
			cfg := testConfig(d)
			id := tc.setup(t, d, &cfg)
			res := New(cfg).Validate(t.Context(), Request{
				Identifier: id, Type: acme.ChallengeHTTP01, Token: testToken,
				KeyAuthorization: testKeyAuth, AccountURI: testAccount,
			})
			if res.Problem != nil {
				t.Logf("%s: %s", res.Problem.Type, res.Problem.Detail)
			}
			checkResult(t, res, tc.want, tc.mentions...)
			if tc.hops != 0 && len(res.Record) != tc.hops {
				t.Errorf("want %d attempts recorded, got %d: %+v", tc.hops, len(res.Record), res.Record)
			}
			if len(res.Record) == 0 {
				t.Fatal("no attempt recorded")
			}
			for _, att := range res.Record {
				if att.Port != cfg.HTTPPort && att.Port != cfg.HTTPSPort {
					t.Errorf("attempt %+v used a port other than %d or %d", att, cfg.HTTPPort, cfg.HTTPSPort)
				}
				// A relative redirect keeps the scheme, host and port it came from.
				if strings.Contains(att.URL, "/hop/") && !strings.HasPrefix(att.URL, "http://example.test:"+strconv.Itoa(cfg.HTTPPort)+"/hop/") {
					t.Errorf("relative redirect went to %s", att.URL)
				}
			}
			first := res.Record[0]
			wantURL := "http://" + hostPort(id.Value, cfg.HTTPPort, 80) + challengePath
			if first.URL != wantURL || first.Hostname != id.Value || first.Port != cfg.HTTPPort {
				t.Errorf("first attempt = %+v, want URL %s host %s port %d", first, wantURL, id.Value, cfg.HTTPPort)
			}
			if tc.want == "" && (first.AddressUsed != "127.0.0.1" || len(first.AddressesResolved) != 1 || first.AddressesResolved[0] != "127.0.0.1") {
				t.Errorf("first attempt = %+v, want 127.0.0.1 resolved and used", first)
			}
		})
	}
}

// TestHTTP01BlackHole proves one attempt ends at Config.Timeout when the
// server accepts the connection and never answers.
func TestHTTP01BlackHole(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.host(t, "example.test")
	cfg := testConfig(d)
	cfg.HTTPPort = blackHole(t)
	cfg.Timeout = time.Second
	start := time.Now()
	res := New(cfg).Validate(t.Context(), Request{
		Identifier: dnsID("example.test"), Type: acme.ChallengeHTTP01, Token: testToken, KeyAuthorization: testKeyAuth,
	})
	elapsed := time.Since(start)
	checkResult(t, res, acme.ProblemConnection, "127.0.0.1", "Timeout", challengePath)
	if elapsed < cfg.Timeout-100*time.Millisecond || elapsed > cfg.Timeout+2*time.Second {
		t.Fatalf("attempt took %v, want about %v", elapsed, cfg.Timeout)
	}
	t.Logf("black-holed attempt ended after %v (timeout %v)", elapsed, cfg.Timeout)
}

// TestDNSBlackHole proves a resolver that never answers is bounded too.
func TestDNSBlackHole(t *testing.T) {
	t.Parallel()
	d := newTestDNS(t)
	d.blackhole("_acme-challenge.silent.test")
	cfg := testConfig(d)
	cfg.Timeout = time.Second
	start := time.Now()
	res := New(cfg).Validate(t.Context(), Request{
		Identifier: dnsID("silent.test"), Type: acme.ChallengeDNS01, Token: testToken, KeyAuthorization: testKeyAuth,
	})
	elapsed := time.Since(start)
	checkResult(t, res, acme.ProblemDNS, "timed out", "_acme-challenge.silent.test")
	if elapsed > cfg.Timeout+2*time.Second {
		t.Fatalf("attempt took %v, want about %v", elapsed, cfg.Timeout)
	}
}
