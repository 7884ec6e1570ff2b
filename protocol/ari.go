package protocol

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"math/big"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/renewal"
	"github.com/hallmark-ca/hallmark/store"
)

// ARI (RFC 9773) paths. renewalInfo is read with plain GET: it is public
// information about a certificate anyone holding it may ask for.
const (
	pathRenewalInfo        = "/acme/renewal-info/"
	pathRenewalExplanation = "/renewal-explanation/"
)

// certID is an ARI certificate identifier (RFC 9773 §4.1): the authority
// key identifier and the serial number's DER content octets, each
// base64url without padding, joined by ".".
type certID struct {
	aki    []byte
	serial string // lower-case hex as the store keeps it
	raw    string
}

// parseCertID reads a certID; malformed for anything else.
func parseCertID(s string) (certID, error) {
	akiPart, serialPart, ok := strings.Cut(s, ".")
	if !ok || akiPart == "" || serialPart == "" || strings.Contains(serialPart, ".") {
		return certID{}, acme.Malformed("the certificate identifier %q is not base64url(authority key identifier) \".\" base64url(serial) (RFC 9773 §4.1)", s)
	}
	aki, err1 := base64.RawURLEncoding.DecodeString(akiPart)
	ser, err2 := base64.RawURLEncoding.DecodeString(serialPart)
	if err1 != nil || err2 != nil {
		return certID{}, acme.Malformed("the certificate identifier %q is not unpadded base64url (RFC 9773 §4.1)", s)
	}
	if len(ser) > 20 || len(ser) == 0 || ser[0]&0x80 != 0 {
		// RFC 5280 §4.1.2.2: positive, at most 20 octets.
		return certID{}, acme.Malformed("the serial in certificate identifier %q is not a positive serial of at most 20 octets", s)
	}
	return certID{aki: aki, serial: hex.EncodeToString(new(big.Int).SetBytes(ser).Bytes()), raw: s}, nil
}

// certificateByCertID finds the certificate a certID names, checking its
// authority key identifier too (the serial alone is unique here, but a
// client asking about another CA's certificate must get "not found").
func (s *Server) certificateByCertID(ctx context.Context, id certID) (*store.Certificate, error) {
	c, err := s.st.certs.CertificateBySerial(ctx, id.serial)
	if errors.Is(err, store.ErrNotFound) && strings.HasPrefix(id.serial, "0") {
		// A store serial written with %x has no leading zero nibble.
		c, err = s.st.certs.CertificateBySerial(ctx, strings.TrimPrefix(id.serial, "0"))
	}
	if err != nil {
		return nil, s.readErr(err, "certificate", id.raw)
	}
	leaf, err := x509.ParseCertificate(c.DER)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("certificate %s is unreadable: %w", c.Serial, err))
	}
	if !bytes.Equal(leaf.AuthorityKeyId, id.aki) {
		return nil, notFound("certificate", id.raw)
	}
	return c, nil
}

// renewalInfoDoc is the RenewalInfo object (RFC 9773 §4.2).
type renewalInfoDoc struct {
	SuggestedWindow struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"suggestedWindow"`
	ExplanationURL string `json:"explanationURL,omitempty"`
}

// renewalInfo answers GET renewalInfo/<certID> (RFC 9773 §4.2): the
// window chosen by suggestedWindow; Retry-After says when to ask again
// (§4.3).
func (s *Server) renewalInfo(w http.ResponseWriter, r *http.Request) error {
	id, err := parseCertID(mux.Vars(r)["certid"])
	if err != nil {
		return err
	}
	ctx := r.Context()
	c, err := s.certificateByCertID(ctx, id)
	if err != nil {
		return err
	}
	doc, err := s.suggestedWindow(ctx, c)
	if err != nil {
		return err
	}
	w.Header().Set("Retry-After", retryAfter(s.cfg.Server.RenewalInfoRetryAfter()))
	return writeJSON(w, http.StatusOK, doc)
}

// suggestedWindow is c's window as package renewal chooses it (the one
// rule the operator's views show), with the explanationURL a client
// follows: the operator's page for a move, the upstream's for its window.
func (s *Server) suggestedWindow(ctx context.Context, c *store.Certificate) (renewalInfoDoc, error) {
	var doc renewalInfoDoc
	prof, _ := s.orderProfile(c.Profile) // a removed profile: the zero profile's defaults
	win, err := renewal.Suggested(ctx, s.st.certs, c, prof)
	if err != nil {
		return doc, s.storeErr(err, "reading the renewal window")
	}
	doc.SuggestedWindow.Start, doc.SuggestedWindow.End = rfc3339(win.Start), rfc3339(win.End)
	switch win.Source {
	case renewal.FromOperator:
		doc.ExplanationURL = s.base + pathRenewalExplanation + c.Serial
	case renewal.FromUpstream:
		doc.ExplanationURL = win.ExplanationURL
	}
	return doc, nil
}

var explanationPage = template.Must(template.New("explanation").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Renew certificate {{.Serial}}</title></head>
<body>
<h1>Please renew certificate {{.Serial}}</h1>
<p>The operator of this certificate authority asked for this certificate to be renewed before {{.End}}.</p>
<p>Reason: {{.Reason}}</p>
<p>Moved {{.MovedAt}}.</p>
</body></html>
`))

// renewalExplanation serves the explanationURL page of a moved window: the
// operator's reason (RFC 9773 §4.2 explanationURL).
func (s *Server) renewalExplanation(w http.ResponseWriter, r *http.Request) error {
	serial := mux.Vars(r)["serial"]
	mw, err := s.st.certs.RenewalWindowBySerial(r.Context(), serial)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("renewal explanation", serial)
	}
	if err != nil {
		return s.storeErr(err, "reading the renewal window")
	}
	var buf bytes.Buffer
	if err := explanationPage.Execute(&buf, map[string]string{
		"Serial": mw.Serial, "End": rfc3339(mw.End), "Reason": mw.Reason, "MovedAt": rfc3339(mw.MovedAt),
	}); err != nil {
		return acme.Internal(err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
	return nil
}

// replacesSerial checks newOrder's "replaces" (RFC 9773 §5): the named
// certificate exists, was issued by this CA to this account, and shares
// at least one identifier with the order (ids). The store then marks it
// replaced in OrderCreate's transaction, refusing one that an order
// already replaces.
func (s *Server) replacesSerial(ctx context.Context, acct *store.Account, replaces string, ids []acme.Identifier) (string, error) {
	if replaces == "" {
		return "", nil
	}
	id, err := parseCertID(replaces)
	if err != nil {
		return "", err
	}
	c, err := s.certificateByCertID(ctx, id)
	var ae *acme.Error
	if errors.As(err, &ae) && ae.Problem.Status == http.StatusNotFound {
		return "", acme.Malformed("\"replaces\" names certificate %q, which this server did not issue", replaces)
	}
	if err != nil {
		return "", err
	}
	if c.AccountID != acct.ID {
		return "", acme.Unauthorized("\"replaces\" names certificate %q of another account", replaces)
	}
	// A SHOULD of §5: an order for other names is no renewal of it, and
	// marking the certificate replaced would refuse its real renewal.
	shared := slices.ContainsFunc(c.Names, func(n string) bool {
		return slices.ContainsFunc(ids, func(id acme.Identifier) bool { return strings.EqualFold(strings.TrimSuffix(n, "."), id.Value) })
	})
	if !shared {
		return "", acme.Malformed("\"replaces\" names certificate %q for %s, which shares no identifier with this order", replaces, strings.Join(c.Names, ", "))
	}
	return c.Serial, nil
}

// orderCreateErr maps OrderCreate's failures for an order that replaces a
// certificate.
func (s *Server) orderCreateErr(err error, replaces string) error {
	if replaces != "" && errors.Is(err, store.ErrConflict) {
		return acme.New(acme.ProblemAlreadyReplaced, "certificate %q is already being replaced by another order; finish or abandon that order", replaces)
	}
	return s.storeErr(err, "creating the order")
}
