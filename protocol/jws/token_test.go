package jws_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/jws"
)

// TestToken: a token reads back under its key and audience until it
// expires; another key, another audience, an altered token, one past its
// expiry, or one signed with "none" is ErrBadToken.
func TestToken(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	tok, err := jws.SignToken(key, jws.Token{Audience: "unpause", Subject: "acct-1", Identifiers: []string{"dns:a.example"}, Expiry: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := jws.ParseToken(key, tok, "unpause", now)
	if err != nil || got.Subject != "acct-1" || len(got.Identifiers) != 1 || got.Identifiers[0] != "dns:a.example" {
		t.Fatalf("ParseToken = %+v, %v", got, err)
	}
	parts := strings.Split(tok, ".")
	unsigned := "eyJhbGciOiJub25lIn0." + parts[1] + "."
	for name, tc := range map[string]struct {
		key      []byte
		tok, aud string
		at       time.Time
	}{
		"another key":      {[]byte("another key, just as long as it...."), tok, "unpause", now},
		"another audience": {key, tok, "login", now},
		"expired":          {key, tok, "unpause", now.Add(61 * time.Minute)},
		"altered payload":  {key, parts[0] + "." + parts[1] + "x." + parts[2], "unpause", now},
		"alg none":         {key, unsigned, "unpause", now},
		"garbage":          {key, "not a token", "unpause", now},
	} {
		if _, err := jws.ParseToken(tc.key, tc.tok, tc.aud, tc.at); !errors.Is(err, jws.ErrBadToken) {
			t.Errorf("%s: err = %v, want ErrBadToken", name, err)
		}
	}
}
