package store

import (
	"crypto/x509"
	"fmt"
	"math/big"
)

// CRLListing is what an issuer's newest CRL says about its revocations.
type CRLListing struct {
	// Entries is the number of revoked certificates the CRL lists.
	Entries int
	// Unlisted are the serials of revocations the CRL does not list: a
	// worker has not signed the CRL that lists them yet.
	Unlisted []string
}

// Unlisted reads the CRL's DER and reports which of revs it does not list.
// It compares serials, not times: on PostgreSQL a revocation whose
// transaction committed after the worker read the list can carry a
// revoked_at earlier than the CRL's thisUpdate and still be in no CRL. The
// worker asks it before deciding a CRL is current; `hallmark crl status`
// and the admin panel before calling one fresh. A CRL that does not parse
// is an error; every revocation is then unlisted.
func (c *CRL) Unlisted(revs []Revocation) (CRLListing, error) {
	rl, err := x509.ParseRevocationList(c.DER)
	if err != nil {
		return CRLListing{}, fmt.Errorf("parsing CRL %d of issuer %s: %w", c.Number, c.IssuerID, err)
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
