package signer

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// RevokedEntry is one revoked certificate on a CRL.
type RevokedEntry struct {
	Serial    *big.Int
	RevokedAt time.Time
	// Reason is the RFC 5280 §5.3.1 CRLReason; 0 (unspecified) is written
	// as no reasonCode extension at all, as CABF BR §7.2.2 requires.
	Reason int
}

// oidIssuingDistributionPoint is id-ce-issuingDistributionPoint (RFC 5280 §5.2.5).
var oidIssuingDistributionPoint = asn1.ObjectIdentifier{2, 5, 29, 28}

// issuingDistributionPoint is the part of RFC 5280 §5.2.5 Hallmark writes:
//
//	IssuingDistributionPoint ::= SEQUENCE {
//	     distributionPoint          [0] DistributionPointName OPTIONAL,
//	     onlyContainsUserCerts      [1] BOOLEAN DEFAULT FALSE,
//	     onlyContainsCACerts        [2] BOOLEAN DEFAULT FALSE, ... }
//	DistributionPointName ::= CHOICE { fullName [0] GeneralNames, ... }
type issuingDistributionPoint struct {
	DistributionPoint     distributionPointName `asn1:"optional,tag:0"`
	OnlyContainsUserCerts bool                  `asn1:"optional,tag:1"`
	OnlyContainsCACerts   bool                  `asn1:"optional,tag:2"`
}

type distributionPointName struct {
	FullName []asn1.RawValue `asn1:"optional,tag:0"`
}

// idpExtension is the issuingDistributionPoint of a CRL published at url:
// of end-entity certificates, or of CA certificates when caCerts (a root's).
func idpExtension(url string, caCerts bool) (pkix.Extension, error) {
	val, err := asn1.Marshal(issuingDistributionPoint{
		DistributionPoint: distributionPointName{
			// GeneralName uniformResourceIdentifier [6] IA5String
			FullName: []asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(url)}},
		},
		OnlyContainsUserCerts: !caCerts,
		OnlyContainsCACerts:   caCerts,
	})
	if err != nil {
		return pkix.Extension{}, err
	}
	// RFC 5280 §5.2.5: "this extension MUST be critical".
	return pkix.Extension{Id: oidIssuingDistributionPoint, Critical: true, Value: val}, nil
}

// validReason reports whether r is a CRLReason allowed on a full CRL of
// end-entity certificates: RFC 5280 §5.3.1 leaves 7 unused, and
// removeFromCRL (8) belongs only on delta CRLs, which Hallmark does not make.
func validReason(r int) bool {
	return r >= 0 && r <= 10 && r != 7 && r != 8
}

// SignCRL signs a full CRL of end-entity certificates (onlyContainsUserCerts)
// for this issuer: number is the CRL number (RFC 5280 §5.2.3), which the caller
// keeps monotonic (the crl_generate job holds the issuer's lease); idpURL is
// where it is published, written into the issuingDistributionPoint extension
// and matching the certificates' CRL distribution point. The CRL is linted,
// signed by a throwaway key, before the issuer's key signs the same
// tbsCertList.
func (i *Issuer) SignCRL(number int64, thisUpdate, nextUpdate time.Time, entries []RevokedEntry, idpURL string) ([]byte, error) {
	return i.signList(number, thisUpdate, nextUpdate, entries, idpURL, false)
}

// SignARL is SignCRL for a root's CRL of the CA certificates it signed
// (onlyContainsCACerts), linted as one: its nextUpdate may be up to 12
// months away.
func (i *Issuer) SignARL(number int64, thisUpdate, nextUpdate time.Time, entries []RevokedEntry, idpURL string) ([]byte, error) {
	return i.signList(number, thisUpdate, nextUpdate, entries, idpURL, true)
}

func (i *Issuer) signList(number int64, thisUpdate, nextUpdate time.Time, entries []RevokedEntry, idpURL string, caCerts bool) ([]byte, error) {
	if number < 0 {
		return nil, acme.Internal(fmt.Errorf("signing CRL for issuer %s: CRL number %d is negative", i.ID, number))
	}
	if !nextUpdate.After(thisUpdate) {
		return nil, acme.Internal(fmt.Errorf("signing CRL for issuer %s: nextUpdate %s is not after thisUpdate %s", i.ID, nextUpdate, thisUpdate))
	}
	if idpURL == "" {
		return nil, acme.Internal(errors.New("signing CRL for issuer " + i.ID + ": the CRL URL is empty; set ca.crl_url or server.base_url"))
	}
	idp, err := idpExtension(idpURL, caCerts)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("encoding the issuingDistributionPoint: %w", err))
	}
	list := make([]x509.RevocationListEntry, len(entries))
	for n, e := range entries {
		if !validReason(e.Reason) {
			return nil, acme.Internal(fmt.Errorf("signing CRL for issuer %s: serial %x has reason code %d, which RFC 5280 §5.3.1 does not allow on a full CRL", i.ID, e.Serial, e.Reason))
		}
		list[n] = x509.RevocationListEntry{SerialNumber: e.Serial, RevocationTime: e.RevokedAt.UTC(), ReasonCode: e.Reason}
	}
	sigAlg, err := signatureAlgorithm(i.Signer.Public())
	if err != nil {
		return nil, acme.Internal(err)
	}
	tmpl := &x509.RevocationList{
		SignatureAlgorithm:        sigAlg,
		Number:                    big.NewInt(number),
		ThisUpdate:                thisUpdate.UTC(),
		NextUpdate:                nextUpdate.UTC(),
		RevokedCertificateEntries: list,
		ExtraExtensions:           []pkix.Extension{idp},
	}
	log := i.logger().With("issuer", i.ID, "crl_number", number, "entries", len(entries))
	registry := lintRegistry
	if caCerts {
		registry = caLintRegistry
	}
	// The standard library adds the authorityKeyIdentifier from the issuer's
	// SubjectKeyId (RFC 5280 §5.2.1) and the cRLNumber.
	tbs, err := i.lintCRL(tmpl, registry)
	if err != nil {
		log.Error("pre-signing lint refused the CRL; nothing was signed with the issuer key", "err", err)
		return nil, err
	}
	log.Info("signing CRL", "this_update", tmpl.ThisUpdate, "next_update", tmpl.NextUpdate)
	der, err := i.signLinted(tbs, sigAlg)
	if err != nil {
		log.Error("signing CRL", "err", err)
		return nil, acme.Internal(fmt.Errorf("signing CRL for issuer %s: %w", i.ID, err))
	}
	log.Info("signed CRL", "bytes", len(der))
	return der, nil
}
