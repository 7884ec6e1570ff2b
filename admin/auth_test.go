package admin

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestSessionCookie: a session cookie is accepted only as minted, only by
// a panel with the same operator token, and only until it expires.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := newAuth("the-operator-token-0123456789", false)
	a.now = func() time.Time { return now }
	good, _ := a.mintSession("alice")
	enc, sig, _ := strings.Cut(good, ".")
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	// The same session claiming another operator, its MAC kept.
	asBob := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), "alice|", "bob|", 1))) + "." + sig
	other := newAuth("another-operator-token-98765", false)
	other.now = a.now

	tests := []struct {
		name   string
		auth   *auth
		cookie string
		at     time.Time
		want   bool
	}{
		{"as minted", a, good, now, true},
		{"just before expiry", a, good, now.Add(sessionTTL), true},
		{"expired", a, good, now.Add(sessionTTL + time.Second), false},
		{"payload changed, MAC kept", a, asBob, now, false},
		{"MAC changed", a, enc + "." + strings.Repeat("A", len(sig)), now, false},
		{"no MAC", a, enc, now, false},
		{"minted with another token", other, good, now, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.auth.now = func() time.Time { return tc.at }
			p, ok := tc.auth.parseSession(tc.cookie)
			if ok != tc.want {
				t.Fatalf("parseSession ok = %v, want %v", ok, tc.want)
			}
			if ok && p.user != "alice" {
				t.Fatalf("session of %q, want alice", p.user)
			}
		})
	}
}
