package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/redact"
)

// MinTokenLength is the shortest operator token accepted: 16 bytes of
// anything is still guessable only by brute force against a constant-time
// compare, and anything shorter is a password someone chose.
const MinTokenLength = 16

const (
	sessionCookie = "hallmark_admin_session"
	loginCookie   = "hallmark_admin_login" // binds the login form's CSRF token
	flashCookie   = "hallmark_admin_flash" // the notice for the page a form redirects to
	sessionTTL    = 12 * time.Hour
	flashTTL      = time.Minute
	csrfField     = "csrf"
)

// LoadToken reads the operator token named by the [admin] section: the
// file's contents (trimmed) or else the environment variable's value.
func LoadToken(a adminconf.Config) (string, error) {
	var tok string
	switch {
	case a.TokenFile != "":
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return "", fmt.Errorf("reading admin.token_file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	case a.TokenEnv != "":
		tok = strings.TrimSpace(os.Getenv(a.TokenEnv))
		if tok == "" {
			return "", fmt.Errorf("admin.token_env names %s, which is empty or unset; export the operator token in it", a.TokenEnv)
		}
	default:
		return "", errors.New("the admin panel needs a token: set admin.token_file or admin.token_env")
	}
	if len(tok) < MinTokenLength {
		return "", fmt.Errorf("the admin token is %d bytes; use at least %d (e.g. `openssl rand -hex 32`)", len(tok), MinTokenLength)
	}
	redact.Add(tok)
	return tok, nil
}

// auth checks credentials and mints and checks sessions and CSRF tokens.
// Every secret is derived from the operator token, so every frontend
// replica with the same token accepts the same sessions, and changing the
// token logs everyone out.
type auth struct {
	tokenSum [32]byte // SHA-256 of the token: compared, never the token itself
	key      []byte   // HMAC key for sessions and CSRF tokens
	secure   bool     // cookies only over TLS
	off      bool     // the token is turned off: client certificates only
	now      func() time.Time
}

func newAuth(token string, secure bool) *auth {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("hallmark admin session key v1"))
	return &auth{tokenSum: sha256.Sum256([]byte(token)), key: m.Sum(nil), secure: secure, now: time.Now}
}

// tokenOK compares in constant time; hashing first makes the comparison
// independent of the presented token's length too.
func (a *auth) tokenOK(presented string) bool {
	sum := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

// principal is an authenticated operator for one request. seed binds the
// CSRF token: the session id for a browser session, the user for header
// credentials. session is the id of a browser session ("" for header
// credentials), which must also be live in the store (sessionKey).
type principal struct {
	user    string
	seed    string
	session string
	role    string // store.RoleViewer, RoleOperator or RoleAdmin
	// cred is the operators table's credential of a session begun through
	// OpenID Connect (adminconf.OIDCIdentity); authed takes the role from
	// that row on every request. "" for the token's sessions, admin.
	cred string
}

// authenticate accepts "Authorization: Bearer <token>", basic auth with the
// token as password (the user name is recorded as the operator), or a
// session cookie minted by the login form.
//
// With the token off only sessions begun through OpenID Connect remain.
func (a *auth) authenticate(r *http.Request) (principal, bool) {
	if a.off {
		if c, err := r.Cookie(sessionCookie); err == nil && r.Header.Get("Authorization") == "" {
			if p, ok := a.parseSession(c.Value); ok && p.cred != "" {
				return p, true
			}
		}
		return principal{}, false
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			if a.tokenOK(strings.TrimSpace(tok)) {
				return principal{user: "token", seed: "header:token", role: store.RoleAdmin}, true
			}
			return principal{}, false
		}
		if user, pass, ok := r.BasicAuth(); ok {
			user = cleanUser(user)
			if a.tokenOK(pass) {
				return principal{user: user, seed: "header:" + user, role: store.RoleAdmin}, true
			}
		}
		return principal{}, false
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return a.parseSession(c.Value)
	}
	return principal{}, false
}

// cleanUser keeps an operator name printable and short for the audit log.
func cleanUser(u string) string {
	u = strings.Map(func(r rune) rune {
		if r < 0x21 || r == 0x7f || r == '|' {
			return -1
		}
		return r
	}, u)
	if len(u) > 64 {
		u = u[:64]
	}
	if u == "" {
		u = "operator"
	}
	return u
}

func (a *auth) mac(parts ...string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomID() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// mintSession returns a session cookie value (user|session id|expiry, then
// its MAC) and the new session's id, which the store keeps (sessionKey).
func (a *auth) mintSession(user string) (cookie, id string) { return a.mintSessionFor(user, "") }

// mintSessionFor is mintSession for an operator row's credential (an
// OpenID Connect sign-in): the payload gains a fourth field, the
// credential, base64url.
func (a *auth) mintSessionFor(user, cred string) (cookie, id string) {
	id = randomID()
	payload := cleanUser(user) + "|" + id + "|" + strconv.FormatInt(a.now().Add(sessionTTL).Unix(), 10)
	if cred != "" {
		payload += "|" + base64.RawURLEncoding.EncodeToString([]byte(cred))
	}
	enc := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return enc + "." + a.mac("session", enc), id
}

// sessionKey is the store's id for a session: the SHA-256 of its id, so
// the table of live sessions holds nothing a browser could present.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte("hallmark admin session\x00" + id))
	return hex.EncodeToString(sum[:])
}

func (a *auth) parseSession(v string) (principal, bool) {
	enc, sig, ok := strings.Cut(v, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(a.mac("session", enc))) {
		return principal{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return principal{}, false
	}
	f := strings.Split(string(raw), "|")
	if len(f) != 3 && len(f) != 4 {
		return principal{}, false
	}
	exp, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || a.now().Unix() > exp {
		return principal{}, false
	}
	p := principal{user: f[0], seed: "session:" + f[1], session: f[1], role: store.RoleAdmin}
	if len(f) == 4 {
		cred, err := base64.RawURLEncoding.DecodeString(f[3])
		if err != nil || len(cred) == 0 {
			return principal{}, false
		}
		p.cred, p.role = string(cred), "" // authed reads the role from the operator's row
	}
	return p, true
}

// newFlash returns a flash cookie value carrying msg for the principal
// whose CSRF seed is seed: the message, its expiry and a MAC over both and
// the seed. Only the panel can mint one, and one minted for a session is
// shown to that session alone: a notice is never text someone else chose.
func (a *auth) newFlash(seed, msg string) string {
	enc := base64.RawURLEncoding.EncodeToString([]byte(msg))
	exp := strconv.FormatInt(a.now().Add(flashTTL).Unix(), 10)
	return enc + "." + exp + "." + a.mac("flash", seed, exp, enc)
}

// parseFlash returns the message of a flash cookie minted by newFlash for
// seed and not yet expired.
func (a *auth) parseFlash(seed, v string) (string, bool) {
	f := strings.Split(v, ".")
	if len(f) != 3 || !hmac.Equal([]byte(f[2]), []byte(a.mac("flash", seed, f[1], f[0]))) {
		return "", false
	}
	exp, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || a.now().Unix() > exp {
		return "", false
	}
	msg, err := base64.RawURLEncoding.DecodeString(f[0])
	if err != nil {
		return "", false
	}
	return string(msg), true
}

// csrfToken is the token every form of this principal carries: an HMAC of
// its seed, so it needs no server-side state and is useless to anyone
// without the session it belongs to.
func (a *auth) csrfToken(seed string) string { return a.mac("csrf", seed) }

// csrfOK checks a state-changing request: the form's token must match the
// seed's, and a browser's Origin (when sent) must be this panel.
func (a *auth) csrfOK(r *http.Request, seed string) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	got := r.PostFormValue(csrfField)
	return got != "" && hmac.Equal([]byte(got), []byte(a.csrfToken(seed)))
}

func (a *auth) cookie(name, value string, ttl time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteStrictMode}
	if ttl < 0 {
		c.MaxAge = -1
	} else if ttl > 0 {
		c.MaxAge = int(ttl.Seconds())
	}
	return c
}
