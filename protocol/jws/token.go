package jws

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Token is what a link the frontend hands one account carries (the
// unpause page's): an HS256 JWT under the frontends' shared key, for one
// audience, valid until Expiry. Only the account's own signed request is
// answered with it, so holding it proves the account's key signed for it.
type Token struct {
	Audience    string
	Subject     string   // the account's ID
	Identifiers []string // what the link is about, to show
	Expiry      time.Time
}

type tokenClaims struct {
	jwt.Claims
	Identifiers []string `json:"identifiers,omitempty"`
}

// SignToken serializes t under key.
func SignToken(key []byte, t Token) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("building the token signer: %w", err)
	}
	c := tokenClaims{Claims: jwt.Claims{Subject: t.Subject, Audience: jwt.Audience{t.Audience}, Expiry: jwt.NewNumericDate(t.Expiry)}, Identifiers: t.Identifiers}
	return jwt.Signed(sig).Claims(c).Serialize()
}

// ErrBadToken is a token that is malformed, forged, for another audience
// or expired.
var ErrBadToken = errors.New("the link is malformed, altered or expired")

// ParseToken checks s under key for audience at now and returns it.
func ParseToken(key []byte, s, audience string, now time.Time) (Token, error) {
	if len(s) > 4096 {
		return Token{}, ErrBadToken
	}
	parsed, err := jwt.ParseSigned(s, []jose.SignatureAlgorithm{jose.HS256})
	if err != nil {
		return Token{}, ErrBadToken
	}
	var c tokenClaims
	if err := parsed.Claims(key, &c); err != nil {
		return Token{}, ErrBadToken
	}
	if err := c.ValidateWithLeeway(jwt.Expected{AnyAudience: jwt.Audience{audience}, Time: now}, 0); err != nil || c.Expiry == nil || c.Subject == "" {
		return Token{}, ErrBadToken
	}
	return Token{Audience: audience, Subject: c.Subject, Identifiers: c.Identifiers, Expiry: c.Expiry.Time()}, nil
}
