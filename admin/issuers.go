package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// issuerStore is what the issuers page reads and changes
// (store.IssuerRecords).
type issuerStore interface {
	operator.IssuerStore
	IssuerRecordsList(ctx context.Context) ([]store.IssuerRecord, error)
}

// issuerRow is one issuer on the page, with its CRL's health.
type issuerRow struct {
	store.IssuerRecord
	CRL store.CRLHealth
}

// issuersPage lists the managed issuers with their state, profiles,
// outstanding certificates and CRL freshness, a form that rotates a local
// profile and a button that retires each (operator.RotateIssuers and
// RetireIssuer, shared with `hallmark issuers`).
func (s *Server) issuersPage(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	recs, err := s.st.issuers.IssuerRecordsList(ctx)
	if err != nil {
		return pageErr(err)
	}
	now, err := s.st.pages.Now(ctx)
	if err != nil {
		return pageErr(err)
	}
	rows := make([]issuerRow, len(recs))
	for i, rec := range recs {
		rows[i].IssuerRecord = rec
		if h, err := store.JudgeIssuerCRL(ctx, s.st.pages, rec.ID, now); err == nil {
			rows[i].CRL = h
		}
	}
	var rotatable []string
	for name, prof := range s.live.Load().profs {
		if _, ok := prof.IssuerKeys(); ok {
			rotatable = append(rotatable, name)
		}
	}
	sort.Strings(rotatable)
	s.render(w, r, p, http.StatusOK, "issuers", map[string]any{"Issuers": rows, "Profiles": rotatable, "Now": now,
		"KeyTypes": operator.IssuerKeyTypes, "Tokens": s.tokens()})
	return nil
}

// createIssuerTimeout bounds `hallmark-worker ca intermediate`: an RSA-4096
// key takes seconds to generate, the rest milliseconds.
const createIssuerTimeout = 2 * time.Minute

// issuerCreate makes a new intermediate under the root of ca.dir, named
// and keyed as the form says, recorded active and named by no profile:
// operator.CreateIssuer runs `hallmark-worker ca intermediate`, as `hallmark
// issuers create` does, so the key is made, and the root's key used, in that
// child process and never in this one (the frontend links no signer and
// reads no key). The child audits issuer.create as this operator. It needs
// ca.dir and hallmark-worker on this host; where they are elsewhere, the
// notice says what failed and the CLI there does the same.
func (s *Server) issuerCreate(w http.ResponseWriter, r *http.Request, p principal) error {
	n := s.newIss
	n.Name, n.KeyType, n.Actor = strings.TrimSpace(r.PostFormValue("name")), r.PostFormValue("key_type"), "admin:"+p.user
	if n.PKCS11 = r.PostFormValue("pkcs11"); n.PKCS11 != "" && !slices.Contains(s.tokens(), n.PKCS11) {
		return errBadRequest("the form names no pkcs11 backend a profile signs with")
	}
	// Not cut short by the browser going away: killed between writing the
	// files and recording them, the child would leave an unrecorded issuer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), createIssuerTimeout)
	defer cancel()
	id, _, err := operator.CreateIssuer(ctx, n)
	where := ""
	if n.PKCS11 != "" {
		where = ", on the token of " + n.PKCS11
	}
	msg := "Created issuer " + id + " (" + n.Name + ", " + n.KeyType + where + "): rotate a profile to it below."
	if err != nil {
		s.log.Warn("admin: creating an issuer failed", "user", p.user, "name", n.Name, "err", err)
		msg = "Not created: " + err.Error()
		// The notice rides in a cookie: keep it well under 4 KiB.
		if len(msg) > 600 {
			msg = strings.ToValidUTF8(msg[:600], "") + "…"
		}
	}
	s.redirectNotice(w, r, p, "/issuers", msg)
	return nil
}

// issuerRotate makes the form's profile sign with the form's issuer.
func (s *Server) issuerRotate(w http.ResponseWriter, r *http.Request, p principal) error {
	profile, id := r.PostFormValue("profile"), r.PostFormValue("issuer")
	prof, ok := s.live.Load().profs[profile]
	keys, managed := prof.IssuerKeys()
	if !ok || !managed || id == "" || !store.Storable(id) {
		return errBadRequest("the form names no local or pkcs11 profile or no issuer")
	}
	retiring, err := operator.RotateIssuers(r.Context(), s.st.issuers, profile, keys, []string{id}, "admin:"+p.user)
	msg := "Rotated: profile " + profile + " signs with " + id + " on every worker within a second."
	if len(retiring) > 0 {
		msg += " Retiring: " + retiring[0] + "."
	}
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		msg, err = "Not rotated: "+err.Error(), nil
	}
	if err != nil {
		return err
	}
	s.redirectNotice(w, r, p, "/issuers", msg)
	return nil
}

// tokens are the pkcs11 backends the profiles sign with: where the create
// form may make a key.
func (s *Server) tokens() []string {
	var out []string
	for _, prof := range s.live.Load().profs {
		if keys, ok := prof.IssuerKeys(); ok && keys != "" && !slices.Contains(out, keys) {
			out = append(out, keys)
		}
	}
	sort.Strings(out)
	return out
}

// issuerRetire moves the issuer on: active to retiring, retiring to
// retired.
func (s *Server) issuerRetire(w http.ResponseWriter, r *http.Request, p principal) error {
	id := r.PathValue("id")
	state, err := operator.RetireIssuer(r.Context(), s.st.issuers, id, "admin:"+p.user)
	msg := "Issuer " + id + " is " + string(state) + "."
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		msg, err = "Not retired: "+err.Error(), nil
	}
	if err != nil {
		return err
	}
	s.redirectNotice(w, r, p, "/issuers", msg)
	return nil
}
