package operator

import (
	"crypto/x509"
	"fmt"
	"math/big"

	"github.com/hallmark-ca/hallmark/store"
)

// CRLListing is what an issuer's newest CRL says about its revocations.
type CRLListing struct {
	// Entries is the number of revoked certificates the CRL lists.
	Entries int
	// Unlisted are the serials of revocations the CRL does not list: a
	// worker has not signed the CRL that lists them yet.
	Unlisted []string
}

// CRLUnlisted reads a CRL's DER and reports which of revs it does not
// list. It compares serials, not times, as the worker does before it
// decides a CRL is current (worker/crl.go, coversAll): on PostgreSQL a
// revocation whose transaction committed after the worker read the list
// can carry a revoked_at earlier than the CRL's thisUpdate and still be in
// no CRL. A CRL that does not parse is an error; the operator should treat
// every revocation as unlisted.
func CRLUnlisted(der []byte, revs []store.Revocation) (CRLListing, error) {
	rl, err := x509.ParseRevocationList(der)
	if err != nil {
		return CRLListing{}, fmt.Errorf("parsing the CRL: %w", err)
	}
	listed := make(map[string]bool, len(rl.RevokedCertificateEntries))
	for _, e := range rl.RevokedCertificateEntries {
		if e.SerialNumber != nil {
			listed[e.SerialNumber.Text(16)] = true
		}
	}
	out := CRLListing{Entries: len(rl.RevokedCertificateEntries), Unlisted: []string{}}
	for _, r := range revs {
		// Stored serials are hex, possibly with leading zeros ("0c01");
		// the CRL holds the integer.
		n, ok := new(big.Int).SetString(r.Serial, 16)
		if !ok || !listed[n.Text(16)] {
			out.Unlisted = append(out.Unlisted, r.Serial)
		}
	}
	return out, nil
}
