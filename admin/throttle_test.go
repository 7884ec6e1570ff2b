package admin

import (
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

const (
	throttleToken = "throttle-operator-token-0123456789"
	wrongToken    = "not-the-operator-token-9876543210"
)

// fakeClock is the panel's clock in these tests: the window passes without
// sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// throttlePanel is a panel over a real SQLite store whose clock the test
// moves and whose log it reads.
func throttlePanel(t *testing.T) (*Server, *fakeClock, *syncBuffer) {
	t.Helper()
	db := testdb.Open(t, "sqlite")
	logs := &syncBuffer{}
	s, err := New(Options{Store: db.Store, Queue: db.Queue, Token: throttleToken,
		Revoker: revocation.New(db.Store, map[string]profile.Profile{"default": profile.Default()}),
		Logger:  slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Now()}
	s.auth.now = clk.now
	return s, clk, logs
}

// serve sends req to the panel as if from addr.
func serve(s *Server, req *http.Request, addr string) *http.Response {
	req.RemoteAddr = addr + ":40000"
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

var throttleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// formSignIn loads the sign-in form from addr and submits it with tok.
func formSignIn(t *testing.T, s *Server, addr, tok string) *http.Response {
	t.Helper()
	page := serve(s, httptest.NewRequest("GET", "/login", nil), addr)
	body, _ := io.ReadAll(page.Body)
	m := throttleCSRF.FindSubmatch(body)
	if m == nil || len(page.Cookies()) == 0 {
		t.Fatalf("no sign-in form: %d\n%s", page.StatusCode, body)
	}
	form := url.Values{"user": {"alice"}, "token": {tok}, "csrf": {string(m[1])}}
	req := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range page.Cookies() {
		req.AddCookie(c)
	}
	return serve(s, req, addr)
}

func bearer(t *testing.T, s *Server, addr, tok string) *http.Response {
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	return serve(s, req, addr)
}

func basic(t *testing.T, s *Server, addr, tok string) *http.Response {
	req := httptest.NewRequest("GET", "/jobs", nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:"+tok)))
	return serve(s, req, addr)
}

// TestAuthFailuresThrottled: after MaxAuthFailures wrong tokens from one
// address, that address's token checks are refused with 429 and Retry-After
// — the right token too — by the sign-in form and by bearer and basic
// credentials alike, until the oldest failure leaves the window; another
// address is unaffected, and every failure is logged with the address and
// without a token.
func TestAuthFailuresThrottled(t *testing.T) {
	t.Parallel()
	const attacker, other = "192.0.2.1", "198.51.100.7"
	for _, tc := range []struct {
		name string
		try  func(t *testing.T, s *Server, addr, tok string) *http.Response
		ok   int // the right token's answer
	}{
		{"sign-in form", formSignIn, http.StatusSeeOther},
		{"bearer", bearer, http.StatusOK},
		{"basic", basic, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, clk, logs := throttlePanel(t)
			expect := func(step string, resp *http.Response, status int, retry string) {
				t.Helper()
				if resp.StatusCode != status || resp.Header.Get("Retry-After") != retry {
					t.Fatalf("%s: %d Retry-After %q, want %d Retry-After %q", step, resp.StatusCode, resp.Header.Get("Retry-After"), status, retry)
				}
			}

			// One failure a second; another address signing in meanwhile
			// resets nothing.
			for i := 1; i <= MaxAuthFailures; i++ {
				if i == MaxAuthFailures/2 {
					expect("the other address, right token", tc.try(t, s, other, throttleToken), tc.ok, "")
				}
				expect("wrong token "+strconv.Itoa(i), tc.try(t, s, attacker, wrongToken), http.StatusUnauthorized, "")
				if i < MaxAuthFailures {
					clk.add(time.Second)
				}
			}
			wait := AuthFailureWindow - time.Duration(MaxAuthFailures-1)*time.Second
			secs := strconv.Itoa(int(wait / time.Second))
			expect("right token after the limit", tc.try(t, s, attacker, throttleToken), http.StatusTooManyRequests, secs)
			expect("wrong token after the limit", tc.try(t, s, attacker, wrongToken), http.StatusTooManyRequests, secs)
			expect("another address, right token", tc.try(t, s, other, throttleToken), tc.ok, "")
			expect("another address, wrong token", tc.try(t, s, other, wrongToken), http.StatusUnauthorized, "")

			clk.add(wait - time.Second)
			expect("a second before the oldest failure leaves", tc.try(t, s, attacker, throttleToken), http.StatusTooManyRequests, "1")
			clk.add(time.Second)
			expect("once the oldest failure has left", tc.try(t, s, attacker, throttleToken), tc.ok, "")
			// The window slides: one more failure fills it again until the
			// next oldest (a second younger) leaves.
			expect("one more wrong token", tc.try(t, s, attacker, wrongToken), http.StatusUnauthorized, "")
			expect("full again", tc.try(t, s, attacker, throttleToken), http.StatusTooManyRequests, "1")

			log := logs.String()
			if strings.Contains(log, throttleToken) || strings.Contains(log, wrongToken) {
				t.Fatalf("the log holds a token:\n%s", log)
			}
			var fromAttacker, refusing int
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "remote="+attacker) {
					fromAttacker++
					if strings.Contains(line, "refusing") {
						refusing++
					}
				}
			}
			// The refused attempts are not failures: only the checked ones
			// are logged, and each time the limit is reached it says so.
			if fromAttacker != MaxAuthFailures+1 || refusing != 2 {
				t.Fatalf("%d warnings naming %s (%d saying it is refused), want %d (2):\n%s", fromAttacker, attacker, refusing, MaxAuthFailures+1, log)
			}
			if n := strings.Count(log, "remote="+other); n != 1 {
				t.Fatalf("%d warnings naming %s, want 1:\n%s", n, other, log)
			}
		})
	}
}

// TestThrottledAddressKeepsItsSession: a browser already signed in from an
// address keeps working while that address's token checks are refused (a
// session cookie is not a guess at the token).
func TestThrottledAddressKeepsItsSession(t *testing.T) {
	t.Parallel()
	s, _, _ := throttlePanel(t)
	const addr = "203.0.113.9"
	signedIn := formSignIn(t, s, addr, throttleToken)
	if signedIn.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", signedIn.StatusCode)
	}
	for range MaxAuthFailures {
		bearer(t, s, addr, wrongToken)
	}
	if resp := bearer(t, s, addr, throttleToken); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("bearer after the limit: %d, want 429", resp.StatusCode)
	}
	req := httptest.NewRequest("GET", "/", nil)
	for _, c := range signedIn.Cookies() {
		req.AddCookie(c)
	}
	if resp := serve(s, req, addr); resp.StatusCode != http.StatusOK {
		t.Fatalf("the signed-in browser: %d, want 200", resp.StatusCode)
	}
}

// TestLimiterMemoryBounded: the limiter tracks at most cap addresses,
// forgetting first those whose failures have left the window, then the one
// that failed longest ago.
func TestLimiterMemoryBounded(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Now()}
	l := newLimiter(clk.now)
	l.cap = 3
	fail := func(addr string) { l.check(addr, func() bool { return false }) }
	for _, a := range []string{"a", "b", "c"} {
		fail(a)
		clk.add(time.Second)
	}
	fail("d") // "a" failed longest ago
	if _, ok := l.fails["a"]; ok || len(l.fails) != 3 {
		t.Fatalf("tracked %v, want b, c, d", l.fails)
	}
	clk.add(AuthFailureWindow)
	fail("e") // b, c and d have all left the window
	if len(l.fails) != 1 {
		t.Fatalf("tracked %v, want e alone", l.fails)
	}
}
