package admin

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The sign-in limiter brakes guessing of the operator token (OWASP
// Authentication Cheat Sheet: throttle failed attempts and log them). It
// counts failed token checks — the sign-in form and bearer or basic
// credentials — per client address. Session cookies are not token guesses
// (each is an HMAC the panel minted) and pass unthrottled, so an operator
// already signed in keeps working while their address is refused.
const (
	// MaxAuthFailures failed token checks from one address within
	// AuthFailureWindow make the panel refuse that address's token checks,
	// right or wrong, with 429 until the oldest failure is that old.
	MaxAuthFailures   = 10
	AuthFailureWindow = 5 * time.Minute
	// maxTrackedAddrs bounds the limiter's memory (at most MaxAuthFailures
	// times per address).
	maxTrackedAddrs = 4096
)

// limiter is a sliding window of failure times per address, kept in this
// process only: each frontend replica counts its own.
//
// It is not golang.org/x/time/rate: a token bucket refills continuously (one
// more guess every window/max once blocked) and must be drawn from before the
// outcome is known, while this counts failures only and refuses exactly until
// the oldest failure leaves the window. Ten times per address need no more.
type limiter struct {
	max    int
	window time.Duration
	cap    int
	now    func() time.Time

	mu    sync.Mutex
	fails map[string][]time.Time // oldest first, only times inside the window
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{max: MaxAuthFailures, window: AuthFailureWindow, cap: maxTrackedAddrs, now: now, fails: map[string][]time.Time{}}
}

// check runs try, one comparison of a presented token, for addr. When addr
// already has max failures in the window, try does not run and wait is how
// long until the oldest of them leaves it. A false try is recorded; n is
// addr's failures in the window, counting it.
//
// The lock is held across try (a hash and a constant-time compare), so
// parallel requests cannot all pass the check before any failure is counted.
func (l *limiter) check(addr string, try func() bool) (ok bool, n int, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.live(addr, now)
	if len(f) >= l.max {
		return false, len(f), f[0].Add(l.window).Sub(now)
	}
	if try() {
		return true, len(f), 0
	}
	if len(f) == 0 && len(l.fails) >= l.cap {
		l.evict(now)
	}
	l.fails[addr] = append(f, now)
	return false, len(f) + 1, 0
}

// live drops addr's failures that have left the window and returns the rest.
func (l *limiter) live(addr string, now time.Time) []time.Time {
	f := l.fails[addr]
	i := 0
	for i < len(f) && !now.Before(f[i].Add(l.window)) {
		i++
	}
	if i == len(f) {
		delete(l.fails, addr)
		return nil
	}
	f = f[i:]
	l.fails[addr] = f
	return f
}

// evict makes room for one more address: it forgets every address whose
// failures have all left the window, or else the one whose newest failure is
// the oldest.
func (l *limiter) evict(now time.Time) {
	var stalest string
	var at time.Time
	for a, f := range l.fails {
		newest := f[len(f)-1]
		if !now.Before(newest.Add(l.window)) {
			delete(l.fails, a)
			continue
		}
		if stalest == "" || newest.Before(at) {
			stalest, at = a, newest
		}
	}
	if len(l.fails) >= l.cap {
		delete(l.fails, stalest)
	}
}

// clientAddr is the limiter's key: the host of the connection's address. The
// panel has no setting naming a trusted proxy, so X-Forwarded-For is never
// read (anyone could write it); behind a proxy every client is the proxy.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// headerCredential names the token-bearing credential r carries ("bearer",
// "basic"), as authenticate reads it, or "" for none.
func headerCredential(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if h == "" {
		return ""
	}
	if strings.HasPrefix(h, "Bearer ") {
		return "bearer"
	}
	if _, _, ok := r.BasicAuth(); ok {
		return "basic"
	}
	return ""
}

// tokenCheck runs try, one check of a token r presents as credential, through
// the limiter for r's client address, and logs a failure at Warn with the
// address (never the token). wait > 0 means the address is refused and try
// did not run.
func (s *Server) tokenCheck(r *http.Request, credential string, try func() bool) (ok bool, wait time.Duration) {
	addr := clientAddr(r)
	ok, n, wait := s.limit.check(addr, try)
	if !ok && wait == 0 {
		msg := "admin: authentication failed: wrong token"
		if n >= s.limit.max {
			msg += "; refusing this address's token checks until its oldest failure leaves the window"
		}
		s.log.Warn(msg, "remote", addr, "credential", credential, "path", r.URL.Path,
			"failures", n, "limit", s.limit.max, "window", s.limit.window)
	}
	return ok, wait
}

// retryAfter sets Retry-After (RFC 9110 §10.2.3, whole seconds) for wait.
func retryAfter(w http.ResponseWriter, wait time.Duration) int {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return secs
}
