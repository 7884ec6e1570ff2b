package protocol

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/store"
)

// crl serves the newest CRL of an issuer's shard as DER (RFC 5280 §5; the
// URL the worker writes into certificates is base_url + "/crl/" + issuer
// id for shard 0, which certificates issued before sharding name, and
// + "/" + shard for the others). The worker signs CRLs; this only reads
// the stored one.
func (s *Server) crl(w http.ResponseWriter, r *http.Request) error {
	issuer := mux.Vars(r)["issuer"]
	shard := 0
	if v, ok := mux.Vars(r)["shard"]; ok {
		// Digits only, no sign or leading zero: one URL per shard.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || strconv.Itoa(n) != v {
			return notFound("CRL shard", v)
		}
		shard = n
	}
	c, err := s.st.certs.CRLShardLatest(r.Context(), issuer, shard)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("CRL for issuer", issuer+" shard "+strconv.Itoa(shard))
	}
	if err != nil {
		return s.storeErr(err, "reading the CRL")
	}
	h := w.Header()
	h.Set("Content-Type", "application/pkix-crl")
	h.Set("Content-Length", strconv.Itoa(len(c.DER)))
	if !c.ThisUpdate.IsZero() {
		h.Set("Last-Modified", c.ThisUpdate.UTC().Format(http.TimeFormat))
	}
	// Relying parties may cache it, but not past nextUpdate and not for
	// long: a new revocation produces a new CRL at once.
	maxAge := 300
	if left := int(time.Until(c.NextUpdate).Seconds()); !c.NextUpdate.IsZero() && left < maxAge {
		maxAge = max(left, 0)
	}
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(maxAge))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(c.DER)
	}
	return nil
}

// issuerCert serves an issuing CA's certificate as DER (RFC 5280 §4.2.2.1:
// the AIA caIssuers URL the signer writes into certificates), as published
// by the worker that mounts it.
func (s *Server) issuerCert(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["issuer"]
	der, err := s.st.certs.IssuerCert(r.Context(), id)
	if err != nil {
		return s.readErr(err, "issuer certificate", id)
	}
	h := w.Header()
	h.Set("Content-Type", "application/pkix-cert")
	h.Set("Content-Length", strconv.Itoa(len(der)))
	h.Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(der)
	}
	return nil
}
