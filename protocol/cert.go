package protocol

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// certAhead is the certificate route's read, made while the nonce is
// consumed.
var certAhead = lookupOf(store.LookupCert, "serial")

// cert answers POST-as-GET of a certificate with its PEM chain (RFC 8555
// §7.4.2). Only the account that ordered it may fetch it.
func (s *Server) cert(w http.ResponseWriter, p *post) error {
	if !p.isGet() {
		return acme.Malformed("a certificate is read with POST-as-GET: send an empty payload")
	}
	serial := mux.Vars(p.r)["serial"]
	c, err := owned(s, p, certAhead, "certificate", serial, s.certURL(serial), func(c *store.Certificate) string { return c.AccountID })
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/pem-certificate-chain")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.ChainPEM)
	return nil
}
