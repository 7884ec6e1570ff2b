package admin

import (
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

// The JSON API (/api/v1/...) does what the panel does, for scripts. It
// takes a client certificate or the token in a header (never a cookie),
// checks the same roles, and is described by openapi.json, which
// TestOpenAPIMatchesRoutes holds to apiRoutes. A POST or DELETE must be
// application/json, which no HTML form can send: a browser holding an
// operator's certificate cannot be made to call it from another page.

//go:embed openapi.json
var openAPIFS embed.FS

// apiHandler answers one API request with a value to encode as JSON.
type apiHandler func(r *http.Request, p principal) (any, error)

type apiRoute struct {
	method, path, role string
	h                  func(s *Server) apiHandler
}

// apiRoutes are the API's routes; openapi.json lists the same.
var apiRoutes = []apiRoute{
	{"GET", "/api/v1/accounts", store.RoleViewer, func(s *Server) apiHandler { return s.apiAccounts }},
	{"GET", "/api/v1/accounts/{id}", store.RoleViewer, func(s *Server) apiHandler { return s.apiAccount }},
	{"POST", "/api/v1/accounts/{id}/deactivate", store.RoleOperator, func(s *Server) apiHandler { return s.apiDeactivate }},
	{"GET", "/api/v1/orders", store.RoleViewer, func(s *Server) apiHandler { return s.apiOrders }},
	{"GET", "/api/v1/orders/{id}", store.RoleViewer, func(s *Server) apiHandler { return s.apiOrder }},
	{"GET", "/api/v1/certificates", store.RoleViewer, func(s *Server) apiHandler { return s.apiCerts }},
	{"GET", "/api/v1/certificates/{serial}", store.RoleViewer, func(s *Server) apiHandler { return s.apiCert }},
	{"POST", "/api/v1/certificates/{serial}/revoke", store.RoleOperator, func(s *Server) apiHandler { return s.apiRevoke }},
	{"GET", "/api/v1/jobs", store.RoleViewer, func(s *Server) apiHandler { return s.apiJobs }},
	{"GET", "/api/v1/jobs/{id}", store.RoleViewer, func(s *Server) apiHandler { return s.apiJob }},
	{"POST", "/api/v1/jobs/{id}/retry", store.RoleOperator, func(s *Server) apiHandler { return s.apiJobRetry }},
	{"POST", "/api/v1/jobs/{id}/abandon", store.RoleOperator, func(s *Server) apiHandler { return s.apiJobAbandon }},
	{"GET", "/api/v1/crls", store.RoleViewer, func(s *Server) apiHandler { return s.apiCRLs }},
	{"GET", "/api/v1/eab", store.RoleAdmin, func(s *Server) apiHandler { return s.apiEABList }},
	{"POST", "/api/v1/eab", store.RoleAdmin, func(s *Server) apiHandler { return s.apiEABCreate }},
	{"DELETE", "/api/v1/eab/{kid}", store.RoleAdmin, func(s *Server) apiHandler { return s.apiEABDelete }},
	{"POST", "/api/v1/certificates/{serial}/ari-move", store.RoleOperator, func(s *Server) apiHandler { return s.apiARIMove }},
	{"GET", "/api/v1/pauses", store.RoleViewer, func(s *Server) apiHandler { return s.apiPauses }},
	{"POST", "/api/v1/pauses/lift", store.RoleOperator, func(s *Server) apiHandler { return s.apiPauseLift }},
	{"GET", "/api/v1/keys", store.RoleViewer, func(s *Server) apiHandler { return s.apiKeys }},
	{"POST", "/api/v1/keys", store.RoleAdmin, func(s *Server) apiHandler { return s.apiKeyBlock }},
	{"DELETE", "/api/v1/keys/{spki}", store.RoleAdmin, func(s *Server) apiHandler { return s.apiKeyUnblock }},
	{"GET", "/api/v1/audit", store.RoleViewer, func(s *Server) apiHandler { return s.apiAudit }},
	{"GET", "/api/v1/audit/export", store.RoleViewer, func(s *Server) apiHandler { return s.apiAuditExport }},
	{"GET", "/api/v1/issuers", store.RoleViewer, func(s *Server) apiHandler { return s.apiIssuers }},
}

// created are the routes that answer 201: they make a record.
var created = map[string]bool{"POST /api/v1/eab": true, "POST /api/v1/keys": true}

func (s *Server) apiRoutes() {
	s.mux.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		b, _ := openAPIFS.ReadFile("openapi.json")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	for _, rt := range apiRoutes {
		s.mux.Handle(rt.method+" "+rt.path, s.apiAuthed(rt.role, rt.h(s)))
	}
}

// apiError is an API failure: its status and a sentence.
type apiError struct {
	status int
	msg    string
}

func (e apiError) Error() string { return e.msg }

func apiErr(status int, format string, args ...any) error {
	return apiError{status, fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiAuthed is authed for the API: a client certificate or a header token
// (throttled as the panel's), the route's role, and JSON for a write.
func (s *Server) apiAuthed(need string, h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok, err := s.certPrincipal(r)
		var refused errCertRefused
		switch {
		case errors.As(err, &refused):
			writeJSON(w, http.StatusForbidden, map[string]string{"error": refused.Error()})
			return
		case err != nil:
			s.apiFail(w, r, p, err)
			return
		case !ok && headerCredential(r) != "":
			var wait time.Duration
			ok, wait = s.tokenCheck(r, headerCredential(r), func() (good bool) { p, good = s.auth.authenticate(r); return good })
			if wait > 0 {
				retryAfter(w, wait)
				writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many failed authentications from your address"})
				return
			}
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hallmark admin"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "present an operator's client certificate or the token (Authorization: Bearer)"})
			return
		}
		if !p.can(need) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf("operator %s has role %s; this needs %s", p.user, p.role, need)})
			return
		}
		if r.Method != http.MethodGet {
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "send the request body as application/json"})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		}
		if !storableRequest(r) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the address holds a character no record or filter can contain"})
			return
		}
		v, err := h(r, p)
		if err != nil {
			s.apiFail(w, r, p, err)
			return
		}
		if lines, ok := v.(jsonLines); ok {
			w.Header().Set("Content-Type", "application/x-ndjson")
			if err := lines(w); err != nil {
				// The status is sent: cut the answer short rather than let
				// it end as if complete.
				s.log.Error("admin: API stream failed", "path", r.URL.Path, "user", p.user, "err", err)
				panic(http.ErrAbortHandler)
			}
			return
		}
		status := http.StatusOK
		if created[r.Pattern] {
			status = http.StatusCreated
		}
		writeJSON(w, status, v)
	})
}

func (s *Server) apiFail(w http.ResponseWriter, r *http.Request, p principal, err error) {
	var ae apiError
	var acmeErr *acme.Error
	switch {
	case errors.As(err, &ae):
		writeJSON(w, ae.status, map[string]string{"error": ae.msg})
	case errors.Is(err, store.ErrNotFound), errors.Is(err, jobs.ErrJobNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such record: " + r.URL.Path})
	case errors.Is(err, store.ErrBadCursor):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "that page cursor is not one this API issued"})
	case errors.As(err, &acmeErr):
		writeJSON(w, http.StatusConflict, map[string]string{"error": acmeErr.Problem.Detail, "type": string(acmeErr.Problem.Type)})
	default:
		s.log.Error("admin: API request failed", "path", r.URL.Path, "user", p.user, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "the request failed; see the frontend's log"})
	}
}

// list is a page of records and the cursor of the next ("" at the end).
type list struct {
	Items any    `json:"items"`
	Next  string `json:"next,omitempty"`
}

func (s *Server) apiAccounts(r *http.Request, _ principal) (any, error) {
	l, next, err := s.st.pages.AccountsList(r.Context(), pageOf(r))
	return list{l, next}, err
}

func (s *Server) apiAccount(r *http.Request, _ principal) (any, error) {
	return s.st.pages.AccountByID(r.Context(), r.PathValue("id"))
}

func (s *Server) apiOrders(r *http.Request, _ principal) (any, error) {
	q := r.URL.Query()
	f := store.OrderFilter{AccountID: q.Get("account"), Identifier: strings.ToLower(q.Get("identifier")), Status: acme.Status(q.Get("status"))}
	l, next, err := s.st.pages.OrdersList(r.Context(), f, pageOf(r))
	return list{l, next}, err
}

func (s *Server) apiOrder(r *http.Request, _ principal) (any, error) {
	return s.st.pages.OrderByID(r.Context(), r.PathValue("id"))
}

func (s *Server) apiCerts(r *http.Request, _ principal) (any, error) {
	q := r.URL.Query()
	f := store.CertFilter{AccountID: q.Get("account"), Name: strings.ToLower(q.Get("name"))}
	switch q.Get("revoked") {
	case "yes":
		f.Revoked = ptr(true)
	case "no":
		f.Revoked = ptr(false)
	}
	l, next, err := s.st.pages.CertificatesList(r.Context(), f, pageOf(r))
	return list{l, next}, err
}

func (s *Server) apiCert(r *http.Request, _ principal) (any, error) {
	return s.st.pages.CertificateBySerial(r.Context(), r.PathValue("serial"))
}

// apiRevoke revokes through protocol/revocation, as the panel's form does;
// the body is {"reason": N}.
func (s *Server) apiRevoke(r *http.Request, p principal) (any, error) {
	var body struct {
		Reason *int `json:"reason"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Reason == nil {
		return nil, apiErr(http.StatusBadRequest, `the body must be {"reason": N}, N a CRL reason code`)
	}
	reason, err := revocation.ParseReason(fmt.Sprint(*body.Reason))
	if err != nil {
		return nil, apiErr(http.StatusBadRequest, "%v", err)
	}
	serial := r.PathValue("serial")
	res, err := s.live.Load().rev.Revoke(r.Context(), revocation.Request{Serial: serial, Reason: reason, Actor: "admin:" + p.user, Via: "admin API", Wait: s.wait})
	if err != nil {
		return nil, err
	}
	return map[string]any{"serial": serial, "reason": int(reason), "done": res.Done || !res.Remote, "backend": res.Backend, "key_reported": res.KeyReported}, nil
}

func (s *Server) apiJobs(r *http.Request, _ principal) (any, error) {
	q := r.URL.Query()
	ids, next, err := s.st.pages.JobIDs(r.Context(), store.JobFilter{Kind: q.Get("kind"), State: q.Get("state")}, pageOf(r))
	if err != nil {
		return nil, err
	}
	out := make([]jobs.JobInfo, 0, len(ids))
	for _, id := range ids {
		j, err := jobs.Show(r.Context(), s.q, id)
		if errors.Is(err, jobs.ErrJobNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return list{out, next}, nil
}

func (s *Server) apiJob(r *http.Request, _ principal) (any, error) {
	id, err := jobID(r)
	if err != nil {
		return nil, apiErr(http.StatusNotFound, "a job id is a number")
	}
	return jobs.Show(r.Context(), s.q, id)
}

func (s *Server) apiCRLs(r *http.Request, _ principal) (any, error) {
	rows, err := s.crlRows(r)
	if err != nil {
		return nil, err
	}
	type crl struct {
		Issuer     string     `json:"issuer"`
		Number     string     `json:"number,omitempty"`
		ThisUpdate *time.Time `json:"this_update,omitempty"`
		NextUpdate *time.Time `json:"next_update,omitempty"`
		Revoked    int        `json:"revocations"`
		NotListed  int        `json:"not_listed"`
		Stale      bool       `json:"stale"`
		Problem    string     `json:"problem,omitempty"`
		URL        string     `json:"url,omitempty"`
		Remote     bool       `json:"remote"`
	}
	out := make([]crl, len(rows))
	for i, c := range rows {
		out[i] = crl{Issuer: c.Issuer, Revoked: c.Revoked, NotListed: c.NotListed, Stale: c.Stale, Problem: c.Problem, URL: c.URL, Remote: c.Remote}
		if c.CRL != nil {
			out[i].Number, out[i].ThisUpdate, out[i].NextUpdate = fmt.Sprint(c.CRL.Number), &c.CRL.ThisUpdate, &c.CRL.NextUpdate
		}
	}
	return out, nil
}

// eabRow is an EAB key as the API lists it: never its MAC key.
type eabRow struct {
	KID          string     `json:"kid"`
	Label        string     `json:"label"`
	Domains      []string   `json:"allowed_domains"`
	IPRanges     []string   `json:"allowed_ip_ranges"`
	PreValidated bool       `json:"prevalidated"`
	Account      string     `json:"account,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	BoundAt      *time.Time `json:"bound_at,omitempty"`
}

func (s *Server) apiEABList(r *http.Request, _ principal) (any, error) {
	keys, next, err := s.st.pages.EABList(r.Context(), pageOf(r))
	if err != nil {
		return nil, err
	}
	out := make([]eabRow, len(keys))
	for i, k := range keys {
		out[i] = eabRow{k.ID, k.Label, k.AllowedDomains, k.AllowedIPRanges, k.PreValidated, k.AccountID, k.CreatedAt, k.BoundAt}
	}
	return list{out, next}, nil
}

// apiEABCreate issues a key id and MAC key, as `hallmark eab create`; the
// MAC key is in this answer only.
func (s *Server) apiEABCreate(r *http.Request, p principal) (any, error) {
	var body struct {
		Label        string   `json:"label"`
		Domains      []string `json:"allowed_domains"`
		IPRanges     []string `json:"allowed_ip_ranges"`
		PreValidated bool     `json:"prevalidated"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return nil, apiErr(http.StatusBadRequest, "the body must be a JSON object: %v", err)
	}
	k := store.EABKey{Label: body.Label, AllowedDomains: body.Domains, AllowedIPRanges: body.IPRanges, PreValidated: body.PreValidated}
	if k.PreValidated && !k.Limited() {
		return nil, apiErr(http.StatusBadRequest, "prevalidated vouches for names without a challenge: limit them with allowed_domains or allowed_ip_ranges")
	}
	id, mac := make([]byte, 12), make([]byte, 32)
	_, _ = rand.Read(id)
	_, _ = rand.Read(mac)
	k.ID, k.MACKey = "eab_"+base64.RawURLEncoding.EncodeToString(id), mac
	created, err := s.st.pages.EABCreate(r.Context(), k, store.AuditEvent{Actor: "admin:" + p.user, Action: "eab.create", Subject: k.ID,
		Detail: fmt.Sprintf("label %q domains %v ips %v prevalidated %v", k.Label, k.AllowedDomains, k.AllowedIPRanges, k.PreValidated)})
	if err != nil {
		return nil, err
	}
	return map[string]string{"kid": created.ID, "hmac": base64.RawURLEncoding.EncodeToString(mac)}, nil
}

func (s *Server) apiEABDelete(r *http.Request, p principal) (any, error) {
	kid := r.PathValue("kid")
	err := s.st.pages.EABDelete(r.Context(), kid, store.AuditEvent{Actor: "admin:" + p.user, Action: "eab.delete", Subject: kid})
	if errors.Is(err, store.ErrConflict) {
		return nil, apiErr(http.StatusConflict, "EAB key %s already bound an account and stays; deactivate that account instead", kid)
	}
	if err != nil {
		return nil, err
	}
	return map[string]string{"kid": kid, "deleted": "true"}, nil
}

// nothingToDo answers an operator action that would change nothing: 409
// with the reason (operator.ErrNothingToDo).
func nothingToDo(v any, err error) (any, error) {
	if errors.Is(err, operator.ErrNothingToDo) {
		return nil, apiErr(http.StatusConflict, "%v", err)
	}
	return v, err
}

func (s *Server) apiDeactivate(r *http.Request, p principal) (any, error) {
	return nothingToDo(operator.DeactivateAccount(r.Context(), s.st.pages, r.PathValue("id"), "admin:"+p.user))
}

func (s *Server) apiJobRetry(r *http.Request, p principal) (any, error) {
	id, err := jobID(r)
	if err != nil {
		return nil, apiErr(http.StatusNotFound, "a job id is a number")
	}
	return nothingToDo(operator.RetryJob(r.Context(), s.st.pages, s.q, id, "admin:"+p.user))
}

func (s *Server) apiJobAbandon(r *http.Request, p principal) (any, error) {
	id, err := jobID(r)
	if err != nil {
		return nil, apiErr(http.StatusNotFound, "a job id is a number")
	}
	var body struct {
		Detail string `json:"detail"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		return nil, apiErr(http.StatusBadRequest, `the body must be {} or {"detail": "the sentence the client sees"}`)
	}
	if body.Detail == "" {
		body.Detail = "the CA's operator abandoned this work; submit a new order"
	}
	j, failed, err := operator.AbandonJob(r.Context(), s.st.pages, s.q, id, "admin:"+p.user, body.Detail)
	return nothingToDo(map[string]any{"job": j, "subject_failed": failed}, err)
}
