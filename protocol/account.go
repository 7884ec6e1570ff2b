package protocol

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/mail"
	"net/url"
	"strings"

	"github.com/gorilla/mux"
	"golang.org/x/net/idna"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/store"
)

// maxContacts bounds the contact list of an account.
const maxContacts = 10

// accountDoc is the account object (RFC 8555 §7.1.2).
type accountDoc struct {
	Status               acme.Status `json:"status"`
	Contact              []string    `json:"contact,omitempty"`
	TermsOfServiceAgreed bool        `json:"termsOfServiceAgreed,omitempty"`
	Orders               string      `json:"orders"`
}

func (s *Server) accountDoc(a *store.Account) accountDoc {
	return accountDoc{Status: a.Status, Contact: a.Contact, TermsOfServiceAgreed: a.TermsAgreed, Orders: s.accountURL(a.ID) + "/orders"}
}

// newAccountReq is the newAccount payload (RFC 8555 §7.3).
type newAccountReq struct {
	Contact                []string        `json:"contact"`
	TermsOfServiceAgreed   bool            `json:"termsOfServiceAgreed"`
	OnlyReturnExisting     bool            `json:"onlyReturnExisting"`
	ExternalAccountBinding json.RawMessage `json:"externalAccountBinding"`
}

// newAccount finds or creates the account of the JWS key (RFC 8555 §7.3,
// §7.3.1).
func (s *Server) newAccount(w http.ResponseWriter, p *post) error {
	var req newAccountReq
	if err := decodePayload(p, "newAccount", &req); err != nil {
		return err
	}
	ctx := p.r.Context()
	existing, err := s.st.accounts.AccountByThumbprint(ctx, p.thumb)
	switch {
	case err == nil:
		return s.existingAccount(w, existing)
	case !errors.Is(err, store.ErrNotFound):
		return s.storeErr(err, "looking up the account by key")
	}
	if req.OnlyReturnExisting {
		return acme.New(acme.ProblemAccountDoesNotExist, "no account exists for this key; to create one, send newAccount without onlyReturnExisting")
	}
	// A key reported compromised, or one anyone can factor, makes no new
	// account (badPublicKey, as Boulder refuses both): whoever holds it may
	// not be its owner. One read, only for a key with no account yet: the
	// key the request was verified with.
	if err := s.accountKeyRefused(ctx, p.jwk, "this account key"); err != nil {
		return err
	}
	// RFC 8555 §7.3.4; a binding sent when none is required is verified and
	// kept too, so an operator's limits apply to it (protocol/eab.go). A
	// JSON null is no binding: client libraries write absent optional
	// members so.
	var eabKey string
	sent := len(req.ExternalAccountBinding) > 0 && string(req.ExternalAccountBinding) != "null"
	if s.cfg.Server.ExternalAccountRequired || sent {
		if eabKey, err = s.verifyEAB(ctx, req.ExternalAccountBinding, p); err != nil {
			return err
		}
	}
	if tos := s.cfg.Server.TermsOfService; tos != "" && !req.TermsOfServiceAgreed {
		// RFC 8555 §7.3: the server MAY require termsOfServiceAgreed; like
		// Boulder and Pebble we refuse with malformed and say what to do.
		return acme.Malformed("you must agree to the terms of service at %s: set termsOfServiceAgreed to true", tos)
	}
	if err := checkContacts(req.Contact); err != nil {
		return err
	}
	acct, err := s.createAccount(ctx, &store.Account{
		KeyJWK: p.rawJWK, Thumbprint: p.thumb, Contact: req.Contact,
		Status: acme.StatusValid, TermsAgreed: req.TermsOfServiceAgreed,
	}, eabKey)
	if errors.Is(err, store.ErrConflict) && acct != nil {
		// Another request created it first with the same key.
		return s.existingAccount(w, acct)
	}
	if err != nil {
		return s.storeErr(err, "creating the account")
	}
	w.Header().Set("Location", s.accountURL(acct.ID))
	return writeJSON(w, http.StatusCreated, s.accountDoc(acct))
}

// existingAccount answers newAccount for a key that has an account: 200 with
// its Location (RFC 8555 §7.3.1), unless it is deactivated.
func (s *Server) existingAccount(w http.ResponseWriter, a *store.Account) error {
	if a.Status != acme.StatusValid {
		return acme.Deactivated("the account %s of this key is %s and can no longer make requests", s.accountURL(a.ID), a.Status)
	}
	w.Header().Set("Location", s.accountURL(a.ID))
	return writeJSON(w, http.StatusOK, s.accountDoc(a))
}

// checkContacts accepts only mailto: URLs with one plain address each and no
// header fields (RFC 8555 §7.3: the server MAY limit the schemes;
// unsupportedContact for the scheme, invalidContact for the address).
func checkContacts(contacts []string) error {
	if len(contacts) > maxContacts {
		return acme.New(acme.ProblemInvalidContact, "at most %d contacts are allowed, got %d", maxContacts, len(contacts))
	}
	for _, c := range contacts {
		addr, ok := strings.CutPrefix(c, "mailto:")
		if !ok {
			return acme.New(acme.ProblemUnsupportedContact, "contact %q is not supported: only mailto: contacts are accepted", c)
		}
		switch {
		case addr == "":
			return acme.New(acme.ProblemInvalidContact, "contact %q has no address", c)
		case strings.ContainsAny(addr, "?"):
			return acme.New(acme.ProblemInvalidContact, "contact %q has header fields (?...); give a plain address", c)
		case strings.ContainsAny(addr, ",;"):
			return acme.New(acme.ProblemInvalidContact, "contact %q has more than one address; give one address per mailto: URL", c)
		case len(addr) > 254:
			return acme.New(acme.ProblemInvalidContact, "contact %q is longer than an email address may be", c)
		}
		parsed, err := mail.ParseAddress(addr)
		if err != nil || parsed.Address != addr || parsed.Name != "" {
			return acme.New(acme.ProblemInvalidContact, "contact %q is not a valid email address", c)
		}
		if err := checkContactDomain(c, addr); err != nil {
			return err
		}
	}
	return nil
}

// checkContactDomain refuses a contact whose domain is not a DNS name as
// Hallmark accepts one in an identifier (policy.DomainSyntax), as Let's
// Encrypt does: a non-ASCII domain is refused, naming its A-label form
// when it has one, rather than stored in a form mail servers may not take.
func checkContactDomain(c, addr string) error {
	at := strings.LastIndexByte(addr, '@')
	domain := addr[at+1:]
	why := policy.DomainSyntax(domain)
	if why == "" {
		return nil
	}
	if a, err := idna.Lookup.ToASCII(domain); err == nil && a != domain && policy.DomainSyntax(a) == "" {
		return acme.New(acme.ProblemInvalidContact, "contact %q: its domain %s; write it as %q", c, why, "mailto:"+addr[:at+1]+a)
	}
	return acme.New(acme.ProblemInvalidContact, "contact %q: its domain %s", c, why)
}

// ownAccount checks that the account URL in the path is the signer's.
func (s *Server) ownAccount(p *post) error {
	if id := mux.Vars(p.r)["id"]; id != p.acct.ID {
		return acme.Unauthorized("the request is signed by account %s, not by %s", s.accountURL(p.acct.ID), s.accountURL(id))
	}
	return nil
}

// accountUpdateReq is the payload of a POST to the account URL (RFC 8555
// §7.3.2, §7.3.6).
type accountUpdateReq struct {
	Status  acme.Status `json:"status"`
	Contact *[]string   `json:"contact"`
}

// account reads, updates (contact) or deactivates the account.
func (s *Server) account(w http.ResponseWriter, p *post) error {
	if err := s.ownAccount(p); err != nil {
		return err
	}
	w.Header().Set("Location", s.accountURL(p.acct.ID))
	if p.isGet() {
		return writeJSON(w, http.StatusOK, s.accountDoc(p.acct))
	}
	var req accountUpdateReq
	if err := decodePayload(p, "account update", &req); err != nil {
		return err
	}
	ctx := p.r.Context()
	acct := p.acct
	switch req.Status {
	case "":
	case acme.StatusDeactivated:
		a, err := s.st.accounts.AccountDeactivate(ctx, acct.ID)
		if err != nil {
			return s.storeErr(err, "deactivating the account")
		}
		return writeJSON(w, http.StatusOK, s.accountDoc(a))
	default:
		return acme.Malformed("an account's status can only be changed to \"deactivated\", not %q", req.Status)
	}
	if req.Contact != nil {
		if err := checkContacts(*req.Contact); err != nil {
			return err
		}
		a, err := s.st.accounts.AccountUpdate(ctx, acct.ID, *req.Contact)
		if err != nil {
			return s.storeErr(err, "updating the account's contacts")
		}
		acct = a
	}
	return writeJSON(w, http.StatusOK, s.accountDoc(acct))
}

// ordersPage is how many order URLs one page of an account's orders list
// carries.
const ordersPage = 100

// accountOrders lists the account's orders, newest first, with Link
// rel="next" to the next page (RFC 8555 §7.1.2.1).
func (s *Server) accountOrders(w http.ResponseWriter, p *post) error {
	if err := s.ownAccount(p); err != nil {
		return err
	}
	if !p.isGet() {
		return acme.Malformed("the orders list is read with POST-as-GET: send an empty payload")
	}
	cursor := p.r.URL.Query().Get("cursor")
	ids, next, err := s.st.accounts.OrdersByAccount(p.r.Context(), p.acct.ID, store.Page{After: cursor, Limit: ordersPage})
	if errors.Is(err, store.ErrBadCursor) {
		return acme.Malformed("the cursor %q is not one this server handed out in a \"next\" link", cursor)
	}
	if err != nil {
		return s.storeErr(err, "listing the account's orders")
	}
	urls := make([]string, len(ids))
	for i, id := range ids {
		urls[i] = s.orderURL(id)
	}
	if next != "" {
		w.Header().Add("Link", link(s.accountURL(p.acct.ID)+"/orders?cursor="+url.QueryEscape(next), "next"))
	}
	return writeJSON(w, http.StatusOK, struct {
		Orders []string `json:"orders"`
	}{urls})
}

// keyChangeInner is the inner payload of keyChange (RFC 8555 §7.3.5).
type keyChangeInner struct {
	Account string          `json:"account"`
	OldKey  json.RawMessage `json:"oldKey"`
}

// keyChange rolls the account over to a new key (RFC 8555 §7.3.5).
func (s *Server) keyChange(w http.ResponseWriter, p *post) error {
	if p.isGet() {
		return acme.Malformed("keyChange needs an inner JWS as its payload")
	}
	inner, innerPayload, err := jws.ParseInner(p.payload)
	if err != nil {
		return err
	}
	// "Check that the "url" parameters of the inner and outer JWSs are the same."
	if inner.URL != p.url {
		return acme.Malformed("the inner JWS url %q must equal the outer JWS url %q", inner.URL, p.url)
	}
	var req keyChangeInner
	if err := json.Unmarshal(innerPayload, &req); err != nil {
		return acme.Malformed("the inner JWS payload must be {\"account\": ..., \"oldKey\": ...}: %v", jsonErr(err))
	}
	if err := jws.UniqueMembers(innerPayload); err != nil {
		return acme.Malformed("the inner JWS payload is not valid: %v; send each member once", err)
	}
	// "Check that the "account" field of the keyChange object contains the
	// URL for the account matching the old key (i.e., the "kid" field in
	// the outer JWS)."
	if req.Account != s.accountURL(p.acct.ID) {
		return acme.Unauthorized("the inner payload's account %q is not the signing account %s", req.Account, s.accountURL(p.acct.ID))
	}
	// "Check that the "oldKey" field of the keyChange object is the same as
	// the account key for the account in question."
	if len(req.OldKey) == 0 {
		return acme.Malformed("the inner payload has no oldKey")
	}
	oldKey, err := parseKey(req.OldKey)
	if err != nil {
		return acme.Malformed("the inner payload's oldKey is not a public JWK")
	}
	_, oldThumb, err := jwkIdentity(oldKey)
	if err != nil {
		return err
	}
	if oldThumb != p.acct.Thumbprint {
		return acme.Unauthorized("the inner payload's oldKey is not the account's current key")
	}
	newRaw, newThumb, err := jwkIdentity(inner.JWK)
	if err != nil {
		return err
	}
	if newThumb == oldThumb {
		return acme.Malformed("the new key is the account's current key")
	}
	ctx := p.r.Context()
	// The new key must not be one reported compromised or one anyone can
	// factor (badPublicKey).
	if err := s.accountKeyRefused(ctx, inner.JWK.Key, "the new account key"); err != nil {
		return err
	}
	// "If there is an existing account with the new key provided, then the
	// server SHOULD use status code 409 (Conflict) and provide the URL of
	// that account in the Location header field."
	if other, err := s.st.accounts.AccountByThumbprint(ctx, newThumb); err == nil {
		return s.keyInUse(w, other)
	} else if !errors.Is(err, store.ErrNotFound) {
		return s.storeErr(err, "looking up the new key")
	}
	acct, err := s.st.accounts.AccountKeyChange(ctx, p.acct.ID, oldThumb, newRaw, newThumb)
	if errors.Is(err, store.ErrConflict) {
		if other, err := s.st.accounts.AccountByThumbprint(ctx, newThumb); err == nil && other.ID != p.acct.ID {
			return s.keyInUse(w, other)
		}
		return acme.Unauthorized("the account's key changed while this request ran; sign with the current key and retry")
	}
	if err != nil {
		return s.storeErr(err, "changing the account key")
	}
	w.Header().Set("Location", s.accountURL(acct.ID))
	return writeJSON(w, http.StatusOK, s.accountDoc(acct))
}

// keyInUse is keyChange's 409 Conflict naming the account that has the key.
func (s *Server) keyInUse(w http.ResponseWriter, other *store.Account) error {
	return withLocation{url: s.accountURL(other.ID),
		err: malformedAs(http.StatusConflict, "the new key is already the key of another account (see Location)")}
}
