package validate

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// dnsAccount01 is dns-01 at an account-scoped name
// (draft-ietf-acme-dns-account-label-02): the same TXT value, looked
// up at "_<label>._acme-challenge.<name>", so several clients with their
// own accounts can validate one name without overwriting each other's
// record. A wildcard's record is at its base name, as for dns-01.
func (v *Validator) dnsAccount01(ctx context.Context, r Request) ([]Attempt, *acme.Problem, error) {
	if r.AccountURI == "" {
		return nil, problem(acme.ProblemServerInternal, "dns-account-01 needs the account's URL, which the worker was not given"), nil
	}
	name := AccountLabel(r.AccountURI) + "._acme-challenge." + strings.TrimSuffix(r.Identifier.Value, ".")
	return v.keyAuthTXT(ctx, name, r)
}

// AccountLabel is the account-scoped label of dns-account-01: "_" and the
// lowercase, unpadded base32 of the first 10 octets of SHA-256 of the
// account URL (16 characters).
func AccountLabel(accountURL string) string {
	sum := sha256.Sum256([]byte(accountURL))
	return "_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
}
