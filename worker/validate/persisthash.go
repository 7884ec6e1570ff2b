package validate

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// HashedAccountURI is draft-ietf-acme-dns-persist-02's hashed accounturi
// (§4.1): prefix, "sha-256/", and the unpadded base64url SHA-256 of one
// octet of domain's length, domain (the name the record is at, or "*" for
// every name), the account key's thumbprint (base64url, 43 octets) and the
// account URL. It binds the record to the key as well as the account.
func HashedAccountURI(prefix, domain, thumbprint, accountURL string) string {
	if len(domain) > 255 {
		return ""
	}
	h := sha256.New()
	h.Write([]byte{byte(len(domain))})
	h.Write([]byte(domain))
	h.Write([]byte(thumbprint))
	h.Write([]byte(accountURL))
	return prefix + "sha-256/" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// accountMatches reports whether a record's accounturi, found at domain,
// names r's account: its URL exactly (draft -01), or, when this CA
// advertises a hash prefix, a hashed URI for domain or for "*" of the
// account's current key or of a key it replaced, current first (draft -02
// §4.2). A value under the prefix that is not a well-formed sha-256 hashed
// URI is malformed (-02 §9.3.1).
func (v *Validator) accountMatches(value, domain string, r Request) (bool, error) {
	if value == r.AccountURI {
		return true, nil
	}
	prefix := v.cfg.AccountHashPrefix
	rest, ok := strings.CutPrefix(value, prefix)
	if prefix == "" || !ok {
		return false, nil
	}
	alg, digest, _ := strings.Cut(rest, "/")
	if alg != "sha-256" {
		return false, errors.New("its hashed accounturi uses " + truncate(alg, 32) + ", not sha-256, the one algorithm this CA accepts")
	}
	if len(digest) != 43 || strings.Trim(digest, base64URLAlphabet) != "" {
		return false, errors.New("its hashed accounturi is not 43 characters of base64url")
	}
	thumbs := append([]string{strings.TrimPrefix(r.KeyAuthorization, r.Token+".")}, r.PriorThumbprints...)
	for _, thumb := range thumbs {
		for _, d := range []string{domain, "*"} {
			if value == HashedAccountURI(prefix, d, thumb, r.AccountURI) {
				return true, nil
			}
		}
	}
	return false, nil
}
