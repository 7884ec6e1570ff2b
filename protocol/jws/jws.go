package jws

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// MinRSABits is the smallest RSA account key accepted.
const MinRSABits = 2048

// maxRSABits bounds the work an attacker can make us do verifying a
// signature with a huge modulus. It is go-jose's own bound
// (jose.MaxRSAModulusBits), which refuses a larger modulus while decoding
// the JWK, before checkKey could: saying 8192 here would promise keys that
// can never arrive. Boulder accepts the same range for account keys.
const maxRSABits = 4096

// acceptedKeys is what a badPublicKey detail tells a client to use instead.
var acceptedKeys = fmt.Sprintf("use an RSA key of %d to %d bits (RS256), an ECDSA key on P-256 (ES256) or P-384 (ES384), or an Ed25519 key (EdDSA)", MinRSABits, maxRSABits)

// maxJWKBytes bounds the JSON of a "jwk" header. The largest key allowed,
// a 4096-bit RSA key (maxRSABits), is about 720 bytes of JWK (its 512-byte
// modulus is 683 base64url characters, plus kty and e); 8 KiB leaves room for
// whitespace and the members a client may add (kid, alg, use, even one
// certificate in x5c). Anything larger is no key Hallmark would accept, and
// is refused before go-jose decodes it (parsing any x5c certificates) and
// before it reaches the store or the caches (protocol/keys.go).
const maxJWKBytes = 8 << 10

// Algorithms are the JWS "alg" values Hallmark accepts, in the order the
// badSignatureAlgorithm detail lists them. RFC 8555 §6.2: servers MUST NOT
// accept "none" or a MAC-based algorithm.
var Algorithms = []string{string(jose.ES256), string(jose.ES384), string(jose.RS256), string(jose.EdDSA)}

// Message is a parsed flattened JWS whose shape has been checked but whose
// signature has not: call Verify before trusting anything but the header.
type Message struct {
	// Alg, KeyID, Nonce and URL come from the protected header. KeyID is the
	// "kid" (an account URL); it is empty when the header carried "jwk".
	Alg, KeyID, Nonce, URL string
	// JWK is set iff the protected header carried "jwk".
	JWK *jose.JSONWebKey

	sig *jose.JSONWebSignature
}

// header is the protected header as RFC 8555 §6.2 uses it. The pointers
// tell "absent" from "empty".
type header struct {
	Alg, Nonce, URL, KID *string
	JWK, B64, Crit       json.RawMessage
}

// parseHeader reads the protected header with exact, case-sensitive member
// names and no duplicates, even but for case or nested in "jwk", so that no
// other JSON parser can read it differently.
func parseHeader(raw []byte) (header, error) {
	var h header
	m, err := members(raw)
	if err == nil {
		err = uniqueWithin(m)
	}
	if err != nil {
		return h, err
	}
	for name, dst := range map[string]**string{"alg": &h.Alg, "nonce": &h.Nonce, "url": &h.URL, "kid": &h.KID} {
		v, ok := m[name]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return h, fmt.Errorf("%q must be a string", name)
		}
		*dst = &s
	}
	h.JWK, h.B64, h.Crit = m["jwk"], m["b64"], m["crit"]
	return h, nil
}

// rules are the differences between an outer request JWS and keyChange's
// inner one (RFC 8555 §7.3.5).
type rules struct {
	inner bool
}

// Parse reads a request body as a flattened JSON JWS (RFC 7515 §7.2.2) and
// checks it against RFC 8555 §6.2: "The JWS MUST NOT have multiple
// signatures", "The JWS Unprotected Header MUST NOT be used", the "alg" must be
// one of Algorithms and never "none" or a MAC, and the protected header MUST
// carry "alg", "nonce", "url" and exactly one of "jwk" and "kid". A "jwk" that
// is private, malformed, weak or of a type that does not fit "alg" is refused
// with badPublicKey. The nonce's value is the caller's to redeem.
func Parse(body []byte) (*Message, error) {
	return parse(body, rules{})
}

// ParseInner parses and verifies the inner JWS of a keyChange request (RFC
// 8555 §7.3.5): it "MUST have a "jwk" header parameter containing the public
// key of the new key", "MUST omit the "nonce" header parameter", and must be
// signed by that key. It returns the message and its verified payload; the
// caller checks that the inner "url" equals the outer one and the payload's
// "account" and "oldKey".
func ParseInner(body []byte) (*Message, []byte, error) {
	m, err := parse(body, rules{inner: true})
	if err != nil {
		return nil, nil, err
	}
	payload, err := m.Verify(m.JWK)
	if err != nil {
		return nil, nil, err
	}
	return m, payload, nil
}

func parse(body []byte, r rules) (*Message, error) {
	what := "JWS"
	if r.inner {
		what = "inner JWS of keyChange"
	}
	protected, payload, signature, err := flattened(body, what)
	if err != nil {
		return nil, err
	}
	rawHeader, _ := base64.RawURLEncoding.DecodeString(protected)
	h, err := parseHeader(rawHeader)
	if err != nil {
		return nil, acme.Malformed("the %s protected header is not valid: %v", what, err)
	}
	if err := checkAlg(h, what); err != nil {
		return nil, err
	}
	hasJWK, hasKID, err := checkKeyAndURL(h, r, what)
	if err != nil {
		return nil, err
	}
	if err := checkNonce(h, r, what); err != nil {
		return nil, err
	}

	m := &Message{Alg: *h.Alg, URL: *h.URL}
	if h.Nonce != nil {
		m.Nonce = *h.Nonce
	}
	if hasKID {
		m.KeyID = *h.KID
	}
	if hasJWK {
		if m.JWK, err = parseJWK(h.JWK, m.Alg, what); err != nil {
			return nil, err
		}
	}

	// Hand go-jose exactly the members checked above, as the compact
	// serialization of the same three values, so that what it verifies
	// cannot differ from what was checked (duplicate keys, members go-jose
	// would read and we ignored). RFC 7515 signs the same input in both
	// serializations; the compact one spares go-jose a second JSON parse
	// of the whole body (about a quarter of Parse's time, BenchmarkParse).
	sig, err := jose.ParseSignedCompact(protected+"."+payload+"."+signature, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(m.Alg)})
	if err != nil {
		return nil, acme.Malformed("the %s cannot be parsed: %v", what, err)
	}
	if len(sig.Signatures) != 1 {
		return nil, acme.Malformed("the %s must have exactly one signature", what)
	}
	m.sig = sig
	return m, nil
}

// flattened reads body as the flattened JSON serialization with one
// signature and no unprotected header, and returns its three members, each
// checked to be base64url; the protected header is not empty.
func flattened(body []byte, what string) (protected, payload, signature string, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return "", "", "", acme.Malformed("the request body is empty; ACME requests are JWS in the flattened JSON serialization")
	}
	if trimmed[0] != '{' {
		return "", "", "", acme.Malformed("the %s must use the flattened JSON serialization (RFC 8555 §6.2); compact serialization is not accepted", what)
	}
	outer, err := members(trimmed)
	if err != nil {
		return "", "", "", acme.Malformed("the %s is not a JSON object: %v", what, err)
	}
	if err := uniqueWithin(outer); err != nil {
		return "", "", "", acme.Malformed("the %s is not valid: %v; send each member once", what, err)
	}
	if _, ok := outer["signatures"]; ok {
		return "", "", "", acme.Malformed("the %s must use the flattened JSON serialization with exactly one signature; the general serialization (\"signatures\") is not accepted", what)
	}
	if _, ok := outer["header"]; ok {
		return "", "", "", acme.Malformed("the %s must not have an unprotected header (RFC 8555 §6.2); put every header parameter in \"protected\"", what)
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"protected", &protected}, {"payload", &payload}, {"signature", &signature}} {
		raw, ok := outer[p.name]
		if !ok {
			return "", "", "", acme.Malformed("the %s must have \"protected\", \"payload\" and \"signature\" members; %q is missing", what, p.name)
		}
		if err := json.Unmarshal(raw, p.dst); err != nil {
			return "", "", "", acme.Malformed("the %s member %q must be a string", what, p.name)
		}
		if _, err := base64.RawURLEncoding.DecodeString(*p.dst); err != nil {
			return "", "", "", acme.Malformed("the %s member %q is not base64url without padding", what, p.name)
		}
	}
	if protected == "" {
		return "", "", "", acme.Malformed("the %s has an empty protected header", what)
	}
	return protected, payload, signature, nil
}

// checkAlg refuses an oversized "jwk", a missing or refused "alg", and the
// header parameters RFC 8555 §6.2 rules out.
func checkAlg(h header, what string) error {
	if len(h.JWK) > maxJWKBytes {
		return acme.Malformed("the %s \"jwk\" is %d bytes of JSON; this server accepts at most %d (an 8192-bit RSA key's is about 1,400): send the public key's members only", what, len(h.JWK), maxJWKBytes)
	}
	if h.Alg == nil || *h.Alg == "" {
		return acme.Malformed("the %s protected header has no \"alg\"", what)
	}
	if !allowedAlg(*h.Alg) {
		return &acme.Error{Problem: acme.Problem{
			Type:       acme.ProblemBadSignatureAlgorithm,
			Detail:     fmt.Sprintf("the %s is signed with algorithm %q, which this server does not accept; use one of %s", what, *h.Alg, strings.Join(Algorithms, ", ")),
			Algorithms: Algorithms,
		}}
	}
	// RFC 8555 §6.2: "the Unencoded Payload Option [RFC7797] MUST NOT be used".
	if h.B64 != nil {
		return acme.Malformed("the %s must not use the \"b64\" header parameter (RFC 8555 §6.2)", what)
	}
	if h.Crit != nil {
		return acme.Malformed("the %s has a \"crit\" header parameter; this server understands no critical extensions", what)
	}
	return nil
}

// checkKeyAndURL requires exactly one of "jwk" and "kid" ("jwk" for an
// inner JWS) and a "url".
func checkKeyAndURL(h header, r rules, what string) (hasJWK, hasKID bool, err error) {
	hasJWK = h.JWK != nil && !bytes.Equal(bytes.TrimSpace(h.JWK), []byte("null"))
	hasKID = h.KID != nil
	switch {
	case hasJWK && hasKID:
		return false, false, acme.Malformed("the %s protected header must carry exactly one of \"jwk\" and \"kid\", not both", what)
	case r.inner && hasKID:
		return false, false, acme.Malformed("the %s must identify the new key with \"jwk\", not \"kid\" (RFC 8555 §7.3.5)", what)
	case !hasJWK && !hasKID:
		if r.inner {
			return false, false, acme.Malformed("the %s must carry the new key in \"jwk\" (RFC 8555 §7.3.5)", what)
		}
		return false, false, acme.Malformed("the %s protected header must carry exactly one of \"jwk\" and \"kid\"", what)
	}
	if hasKID && *h.KID == "" {
		return false, false, acme.Malformed("the %s protected header has an empty \"kid\"; it must be the account URL", what)
	}
	if h.URL == nil || *h.URL == "" {
		return false, false, acme.Malformed("the %s protected header has no \"url\" (RFC 8555 §6.4)", what)
	}
	return hasJWK, hasKID, nil
}

// checkNonce requires a base64url "nonce" of an outer JWS and none of an
// inner one.
func checkNonce(h header, r rules, what string) error {
	if r.inner {
		if h.Nonce != nil {
			return acme.Malformed("the %s must not carry a \"nonce\" (RFC 8555 §7.3.5)", what)
		}
		return nil
	}
	// RFC 8555 §6.5: a request whose nonce is "unacceptable (or not
	// present)" is refused with badNonce; one whose value is not base64url
	// is "malformed" (§6.5.1).
	if h.Nonce == nil || *h.Nonce == "" {
		return acme.BadNonce("the JWS protected header has no \"nonce\"; get one from newNonce")
	}
	if !isBase64URL(*h.Nonce) {
		return acme.Malformed("the JWS \"nonce\" is not base64url (RFC 8555 §6.5.1)")
	}
	return nil
}

// parseJWK decodes the header's "jwk" and checks it fits alg.
func parseJWK(raw json.RawMessage, alg, what string) (*jose.JSONWebKey, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		if errors.Is(err, jose.ErrUnsupportedKeyType) {
			// go-jose's own words name no limit; this is also how an RSA
			// modulus above maxRSABits is refused.
			return nil, acme.New(acme.ProblemBadPublicKey, "the %s \"jwk\" is a key this server does not accept: %s", what, acceptedKeys)
		}
		return nil, acme.New(acme.ProblemBadPublicKey, "the %s \"jwk\" is not a usable public key: %v", what, err)
	}
	if err := checkKey(&k, alg); err != nil {
		return nil, err
	}
	return &k, nil
}

// UnverifiedPayload is the payload as sent, before any signature check.
// Nothing in it may be trusted or acted on: it is for reads made ahead
// while the signature is checked (protocol/ahead.go), whose answers are
// used only once Verify has returned the same bytes.
func (m *Message) UnverifiedPayload() []byte {
	if m == nil || m.sig == nil {
		return nil
	}
	return m.sig.UnsafePayloadWithoutVerification()
}

// Verify checks the signature with key (the header's JWK for newAccount and
// keyChange's inner JWS, the account's key otherwise) and returns the
// payload, which is empty for POST-as-GET (RFC 8555 §6.3). The key must be
// public, strong enough and of the type "alg" names, else badPublicKey; a
// signature that does not verify is malformed, as RFC 8555 §6.2 asks.
func (m *Message) Verify(key *jose.JSONWebKey) ([]byte, error) {
	if m == nil || m.sig == nil {
		return nil, acme.Internal(fmt.Errorf("jws: Verify called on a message Parse did not return"))
	}
	if key == nil {
		return nil, acme.New(acme.ProblemBadPublicKey, "no key to verify the JWS with")
	}
	if err := checkKey(key, m.Alg); err != nil {
		return nil, err
	}
	payload, err := m.sig.Verify(key)
	if err != nil {
		return nil, acme.Malformed("JWS verification error: the signature does not match the key")
	}
	return payload, nil
}

// Thumbprint is the RFC 7638 SHA-256 thumbprint of key, base64url without
// padding: the account's identity in keyAuthorizations (RFC 8555 §8.1) and
// the store's key for finding an account by key.
func Thumbprint(key *jose.JSONWebKey) (string, error) {
	if key == nil || key.Key == nil {
		return "", acme.New(acme.ProblemBadPublicKey, "no key to compute a thumbprint of")
	}
	pub := key.Public()
	if pub.Key == nil {
		return "", acme.New(acme.ProblemBadPublicKey, "the key has no public part")
	}
	b, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", acme.New(acme.ProblemBadPublicKey, "cannot compute the key's thumbprint: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func allowedAlg(alg string) bool {
	for _, a := range Algorithms {
		if a == alg {
			return true
		}
	}
	return false
}

// checkKey refuses keys that are private, symmetric, weak, or of a type that
// cannot produce alg signatures. badPublicKey (RFC 8555 §6.7: "The JWS was
// signed by a public key the server does not support") rather than
// badSignatureAlgorithm: the algorithm itself is one we accept.
func checkKey(k *jose.JSONWebKey, alg string) error {
	if !k.Valid() {
		return acme.New(acme.ProblemBadPublicKey, "the JWS key is not a valid key")
	}
	if !k.IsPublic() {
		return acme.New(acme.ProblemBadPublicKey, "the JWS key must be a public key; never send a private key")
	}
	if k.Algorithm != "" && k.Algorithm != alg {
		return acme.New(acme.ProblemBadPublicKey, "the JWS key is marked for algorithm %q but the JWS uses %q", k.Algorithm, alg)
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		if alg != string(jose.RS256) {
			return mismatch(alg, "an RSA key")
		}
		if n := pub.N.BitLen(); n < MinRSABits || n > maxRSABits {
			return acme.New(acme.ProblemBadPublicKey, "the JWS key is a %d-bit RSA key; %s", n, acceptedKeys)
		}
		if pub.E < 3 || pub.E%2 == 0 {
			return acme.New(acme.ProblemBadPublicKey, "the JWS key has an invalid RSA public exponent")
		}
	case *ecdsa.PublicKey:
		switch {
		case pub.Curve == elliptic.P256() && alg == string(jose.ES256):
		case pub.Curve == elliptic.P384() && alg == string(jose.ES384):
		default:
			return mismatch(alg, "an ECDSA key on "+pub.Curve.Params().Name)
		}
	case ed25519.PublicKey:
		if alg != string(jose.EdDSA) {
			return mismatch(alg, "an Ed25519 key")
		}
	default:
		return acme.New(acme.ProblemBadPublicKey, "the JWS key type %T is not supported; use RSA, ECDSA P-256/P-384 or Ed25519", k.Key)
	}
	return nil
}

func mismatch(alg, what string) error {
	return acme.New(acme.ProblemBadPublicKey, "the JWS uses algorithm %q but its key is %s", alg, what)
}

func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
