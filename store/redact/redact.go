// Package redact masks secrets in text before a Hallmark binary prints or
// logs it: passwords in database URLs and keyword/value DSNs, PEM private
// keys, and the values a process registers with Add (the database
// password, a PKCS#11 PIN, the admin token). It imports only the standard
// library, so every binary can link it.
package redact

import (
	"io"
	"net/url"
	"regexp"
	"strings"
)

// Mask is what a secret is replaced with.
const Mask = "xxxxx"

// secretKey says whether a query or DSN key names a secret.
func secretKey(k string) bool {
	return secretKeyRE.MatchString(k)
}

var secretKeyRE = regexp.MustCompile(`(?i)^[a-z0-9_]*(password|passwd|pin|secret|token)$`)

// URL is a database URL ("postgres://user:pw@host/db?sslpassword=...") or a
// keyword/value DSN ("host=h password='pw'") with every password masked; a
// URL that parses keeps its form, its userinfo as net/url.URL.Redacted writes it.
func URL(s string) string {
	if u, err := url.Parse(s); err == nil && strings.Contains(s, "://") {
		changed := false
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
			changed = true
		}
		if q, ok := maskQuery(u.RawQuery); ok {
			u.RawQuery, changed = q, true
		}
		if changed {
			s = u.String()
		}
	} else if !strings.Contains(s, "://") {
		s = dsnRE.ReplaceAllString(s, "${1}"+Mask)
	}
	return Text(s)
}

// maskQuery masks the values of secret keys in a raw query, keeping the
// order and encoding of the rest.
func maskQuery(raw string) (string, bool) {
	if raw == "" {
		return raw, false
	}
	parts := strings.Split(raw, "&")
	changed := false
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if uk, err := url.QueryUnescape(k); err == nil && secretKey(uk) {
			parts[i], changed = k+"="+Mask, true
		}
	}
	return strings.Join(parts, "&"), changed
}

// dsnRE is a secret's value in a keyword/value DSN: quoted (libpq's
// backslash escapes) or up to the next space.
var dsnRE = regexp.MustCompile(`(?i)((?:^|[^a-z0-9_])[a-z0-9_]*(?:password|passwd|pin|secret|token)\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s]*)`)

// kvRE is dsnRE for free text, where a value also ends at a URL query's
// '&' or a quote.
var kvRE = regexp.MustCompile(`(?i)((?:^|[^a-z0-9_])[a-z0-9_]*(?:password|passwd|pin|secret|token)\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&"'` + "`" + `]*)`)

// pemRE is a PEM private key block, or what is left of one cut short.
var pemRE = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)

// Text masks every secret it can find in free text (a log line, an error):
// the registered values (Add), the password of any URL's userinfo,
// password=, sslpassword=, pin=, secret= and token= values, and PEM private
// key blocks.
func Text(s string) string {
	s = maskRegistered(s)
	s = maskUserinfo(s)
	s = kvRE.ReplaceAllString(s, "${1}"+Mask)
	return pemRE.ReplaceAllString(s, "-----BEGIN ${1}----- "+Mask+" -----END ${1}-----")
}

// maskUserinfo masks the password of every scheme://user:password@host in
// s. A URL's authority ends at '/', '?', '#', a space or a quote; its
// userinfo at the last '@' in it (as net/url reads it), its user name at
// the first ':'.
func maskUserinfo(s string) string {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		start := i + 3
		end := start + strings.IndexFunc(rest[start:], func(r rune) bool {
			return strings.ContainsRune("/?#\"'`<> \t\r\n", r)
		})
		if end < start {
			end = len(rest)
		}
		auth := rest[start:end]
		at := strings.LastIndexByte(auth, '@')
		colon := strings.IndexByte(auth, ':')
		if at < 0 || colon < 0 || colon > at {
			b.WriteString(rest[:end])
			rest = rest[end:]
			continue
		}
		b.WriteString(rest[:start+colon+1])
		b.WriteString(Mask)
		b.WriteString(rest[start+at : end])
		rest = rest[end:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(rest)
	return b.String()
}

// Writer masks secrets (Text) in each Write to w: for urfave/cli's
// ErrWriter, whose exit messages are written whole, one Write each.
func Writer(w io.Writer) io.Writer { return writer{w} }

type writer struct{ w io.Writer }

func (w writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
