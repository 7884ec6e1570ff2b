package redact

import (
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MinSecret is the shortest value Add registers: a shorter one (a
// four-digit PIN) would mask every number that happens to contain it.
// Such values are still masked where their shape gives them away
// (pin=..., a URL's password).
const MinSecret = 6

var (
	mu         sync.Mutex
	registered atomic.Pointer[[]string] // longest first
)

// Add registers values that must never be printed; Text masks them
// wherever they stand on their own (not inside a longer run of letters
// and digits, such as a serial number that happens to contain a numeric
// PIN). Values shorter than MinSecret are left to the structural rules.
func Add(values ...string) {
	mu.Lock()
	defer mu.Unlock()
	var list []string
	if p := registered.Load(); p != nil {
		list = slices.Clone(*p)
	}
	for _, v := range values {
		if len(v) >= MinSecret && !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(list, func(a, b string) int { return len(b) - len(a) })
	registered.Store(&list)
}

// AddURL registers the password of a database URL (its userinfo and its
// password and sslpassword query parameters): config.Load calls it, so the
// password is masked even where it appears without its URL around it. A
// password equal to the user name (postgres:postgres) hides nothing and
// would mask the user name everywhere, so it is left to the URL rules.
func AddURL(s string) {
	u, err := url.Parse(s)
	if err != nil {
		return
	}
	if p, ok := u.User.Password(); ok && p != u.User.Username() {
		Add(p)
	}
	for k, vs := range u.Query() {
		if secretKey(k) {
			Add(vs...)
		}
	}
}

// maskRegistered masks every registered value in s.
func maskRegistered(s string) string {
	p := registered.Load()
	if p == nil {
		return s
	}
	for _, secret := range *p {
		s = maskWord(s, secret)
	}
	return s
}

// maskWord masks each occurrence of secret in s unless a letter or digit
// continues it on a side where it starts or ends with one.
func maskWord(s, secret string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for from := 0; ; {
		i := strings.Index(s[from:], secret)
		if i < 0 {
			break
		}
		start, end := from+i, from+i+len(secret)
		glued := start > 0 && alnum(s[start-1]) && alnum(secret[0]) ||
			end < len(s) && alnum(s[end]) && alnum(secret[len(secret)-1])
		if glued {
			from = start + 1
			continue
		}
		b.WriteString(s[done:start])
		b.WriteString(Mask)
		done, from = end, end
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
