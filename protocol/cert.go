package protocol

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// certAhead is the certificate route's read, made while the nonce is
// consumed.
var certAhead = lookupOf(store.LookupCert, "serial")

// cert answers POST-as-GET of a certificate with its PEM chain (RFC 8555
// §7.4.2). Only the account that ordered it may fetch it. Its issuer's
// alternate chains (a cross-signed intermediate, a chain to a new root)
// are served at <url>/<n>, each linked from the others with
// rel="alternate".
func (s *Server) cert(w http.ResponseWriter, p *post) error {
	if !p.isGet() {
		return acme.Malformed("a certificate is read with POST-as-GET: send an empty payload")
	}
	serial := mux.Vars(p.r)["serial"]
	c, err := owned(s, p, certAhead, "certificate", serial, s.certURL(serial), func(c *store.Certificate) string { return c.AccountID })
	if err != nil {
		return err
	}
	chains, err := s.st.certs.IssuerChains(p.r.Context(), c.IssuerID)
	if err != nil {
		return err
	}
	body, alt := c.ChainPEM, 0
	if a := mux.Vars(p.r)["alt"]; a != "" {
		alt, err = strconv.Atoi(a)
		if err != nil || alt < 1 || alt > len(chains) {
			return malformedAs(http.StatusNotFound, "certificate %s has %d alternate chains; there is none numbered %s", s.certURL(serial), len(chains), a)
		}
		body = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.DER}), chains[alt-1]...)
	}
	for i := 0; i <= len(chains); i++ {
		switch {
		case i == alt:
		case i == 0:
			w.Header().Add("Link", fmt.Sprintf(`<%s>;rel="alternate"`, s.certURL(serial)))
		default:
			w.Header().Add("Link", fmt.Sprintf(`<%s/%d>;rel="alternate"`, s.certURL(serial), i))
		}
	}
	w.Header().Set("Content-Type", "application/pem-certificate-chain")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}
