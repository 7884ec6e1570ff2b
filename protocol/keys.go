package protocol

import (
	"encoding/json"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/protocol/jws"
)

// publicKey is an account key as protocol/jws takes it. This file is the only
// place the frontend names go-jose's type: protocol/jws owns the library, but
// keys stored as JSON must be read back into its type to verify with them.
type publicKey = jose.JSONWebKey

// parseKey reads a stored account key (store.Account.KeyJWK).
func parseKey(raw []byte) (*publicKey, error) {
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("parsing stored jwk: %w", err)
	}
	if !k.IsPublic() {
		return nil, fmt.Errorf("stored jwk is not a public key")
	}
	return &k, nil
}

// keyCache holds parsed account keys by their stored JSON. Every request
// signed with "kid" would otherwise decode and validate its account's key
// again. An entry cannot go stale: a parsed key never changes, and a key
// change stores different JSON, which is a different entry.
type keyCache struct{ memo[*publicKey] }

func (c *keyCache) parse(raw []byte) (*publicKey, error) {
	if k, ok := c.get(string(raw)); ok {
		return k, nil
	}
	k, err := parseKey(raw)
	if err != nil {
		return nil, err
	}
	c.put(string(raw), k)
	return k, nil
}

// jwkIdentity is what the store keeps of a key: its public JWK as JSON and
// its RFC 7638 thumbprint.
//
// The JSON holds the key and nothing else: the members RFC 7638 §3.2
// requires for its type (EC: crv, kty, x, y; RSA: e, kty, n; OKP: crv,
// kty, x), in go-jose's order, which is what Hallmark always stored for a
// key sent without extras. Whatever else the client's "jwk" carried (kid,
// alg, use, x5c, x5t, any unknown member) is dropped: it says nothing about
// the key, and kept, a client could make its account row, read with every
// nonce, and what the frontend caches per account (keyCache's key and
// parsed key, Server.lastKeys) as large as its request body. Accounts
// stored before this were rewritten the same way by migration 0007.
func jwkIdentity(k *publicKey) ([]byte, string, error) {
	thumb, err := jws.Thumbprint(k)
	if err != nil {
		return nil, "", err
	}
	pub := k.Public()
	raw, err := json.Marshal(jose.JSONWebKey{Key: pub.Key})
	if err != nil {
		return nil, "", fmt.Errorf("encoding jwk: %w", err)
	}
	return raw, thumb, nil
}
