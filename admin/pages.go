package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/renewal"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

// pageSize is how many rows a list page shows.
const pageSize = 50

var pageNames = []string{"login", "error", "overview", "accounts", "account", "orders", "order", "certs", "cert", "jobs", "job", "crls", "keys", "pauses", "issuers", "audit", "signedin"}

func (s *Server) parseTemplates() error {
	funcs := template.FuncMap{
		"time": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				if v.IsZero() {
					return "—"
				}
				return v.UTC().Format("2006-01-02 15:04:05Z")
			case *time.Time:
				if v == nil || v.IsZero() {
					return "—"
				}
				return v.UTC().Format("2006-01-02 15:04:05Z")
			}
			return fmt.Sprint(t)
		},
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			d := time.Since(t).Round(time.Second)
			if d < 0 {
				return "in " + (-d).String()
			}
			return d.String() + " ago"
		},
		"join":   strings.Join,
		"reason": func(n int) string { return revocation.Reason(n).String() },
		"idents": func(ids []acme.Identifier) string {
			parts := make([]string, len(ids))
			for i, id := range ids {
				parts[i] = id.Value
			}
			return strings.Join(parts, ", ")
		},
		"json": func(b []byte) string {
			var v any
			if json.Unmarshal(b, &v) != nil {
				return string(b)
			}
			out, _ := json.MarshalIndent(v, "", "  ")
			return string(out)
		},
		"lastErr": func(j jobs.JobInfo) string {
			if len(j.Errors) == 0 {
				return ""
			}
			return j.Errors[len(j.Errors)-1].Error
		},
		// nextpage is the query string of the next page, keeping the
		// filters; "" when there is none.
		"nextpage": func(next string, kv ...string) template.URL {
			if next == "" {
				return ""
			}
			return query(append(kv, "after", next)...)
		},
		"query": query,
	}
	s.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("admin: parsing template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}

// query builds a query string from key/value pairs, leaving out empty values.
func query(kv ...string) template.URL {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return template.URL(q.Encode())
}

// --- overview ---

type crlRow struct {
	Issuer    string
	Shard     int
	CRL       *store.CRL
	Revoked   int
	NotListed int // revocations whose serial the newest CRL does not list
	Stale     bool
	URL       string
	Problem   string
	Remote    bool // a relay's or custom backend's: Hallmark signs no CRL for it
	// Shards, on the overview, is how many shard rows this issuer's row
	// sums up (issuerCRLs); 0 on the CRL page, a row per shard.
	Shards int
}

// issuerCRLs sums rows, a row per shard by issuer, into a row per issuer
// for the overview: the stalest shard's CRL (the earliest nextUpdate) and
// why, the counts added up; stale when any shard is.
func issuerCRLs(rows []crlRow) []crlRow {
	var out []crlRow
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].Issuer == r.Issuer {
			sum := &out[n-1]
			sum.Shards++
			sum.Revoked += r.Revoked
			sum.NotListed += r.NotListed
			if r.Stale && !sum.Stale {
				sum.Stale, sum.Problem = true, fmt.Sprintf("shard %d: %s", r.Shard, r.Problem)
			}
			if sum.CRL != nil && (r.CRL == nil || r.CRL.NextUpdate.Before(sum.CRL.NextUpdate)) {
				sum.CRL = r.CRL
			}
			continue
		}
		r.Shards = 1
		out = append(out, r)
	}
	return out
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	counts, err := s.st.pages.Counts(ctx)
	if err != nil {
		return err
	}
	depth, err := s.st.pages.QueueDepth(ctx)
	if err != nil {
		return err
	}
	var oldest *jobs.JobInfo
	if depth.OldestWaitingID != 0 {
		if j, err := jobs.Show(ctx, s.q, depth.OldestWaitingID); err == nil {
			oldest = &j
		}
	}
	failing, err := jobs.List(ctx, s.q, jobs.ListFilter{States: []string{"retryable", "discarded"}, Limit: 10})
	if err != nil {
		return err
	}
	shards, err := s.crlRows(r)
	if err != nil {
		return err
	}
	activity, err := s.st.pages.Activity(ctx, chartHours)
	if err != nil {
		return err
	}
	s.render(w, r, p, http.StatusOK, "overview", map[string]any{
		"Counts": counts, "Depth": depth.Rows, "Oldest": oldest, "Failing": failing, "CRLs": issuerCRLs(shards),
		"Charts": overviewCharts(activity, depth.Rows),
	})
	return nil
}

func (s *Server) crlRows(r *http.Request) ([]crlRow, error) {
	ctx := r.Context()
	issuers, err := s.st.pages.Issuers(ctx)
	if err != nil {
		return nil, err
	}
	now, err := s.st.pages.Now(ctx)
	if err != nil {
		return nil, err
	}
	var rows []crlRow
	for _, id := range issuers {
		// The CLI's reads and rule, so the two never disagree: a row per
		// shard.
		shards, err := store.JudgeIssuerCRLs(ctx, s.st.pages, id, now)
		if err != nil {
			return nil, err
		}
		for _, h := range shards {
			row := crlRow{Issuer: id, Shard: h.Shard, Remote: store.RemoteIssuer(id)}
			if s.crlBase != "" && !row.Remote {
				row.URL = s.crlBase + "/crl/" + id
				if h.Shard > 0 {
					row.URL += "/" + strconv.Itoa(h.Shard)
				}
			}
			row.CRL, row.Revoked, row.NotListed, row.Stale, row.Problem = h.Newest, h.Revocations, h.Unlisted, h.Stale, h.Why
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func (s *Server) crls(w http.ResponseWriter, r *http.Request, p principal) error {
	rows, err := s.crlRows(r)
	if err != nil {
		return err
	}
	s.render(w, r, p, http.StatusOK, "crls", map[string]any{"CRLs": rows})
	return nil
}

// --- accounts ---

func (s *Server) accounts(w http.ResponseWriter, r *http.Request, p principal) error {
	list, next, err := s.st.pages.AccountsList(r.Context(), pageOf(r))
	if err != nil {
		return pageErr(err)
	}
	s.render(w, r, p, http.StatusOK, "accounts", map[string]any{"Accounts": list, "Next": next})
	return nil
}

func (s *Server) account(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	a, err := s.st.pages.AccountByID(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	orders, moreOrders, err := s.st.pages.OrdersList(ctx, store.OrderFilter{AccountID: a.ID}, store.Page{Limit: 10})
	if err != nil {
		return err
	}
	certs, moreCerts, err := s.st.pages.CertificatesList(ctx, store.CertFilter{AccountID: a.ID}, store.Page{Limit: 10})
	if err != nil {
		return err
	}
	s.render(w, r, p, http.StatusOK, "account", map[string]any{"Account": a, "Orders": orders, "MoreOrders": moreOrders != "",
		"Certs": certs, "MoreCerts": moreCerts != "", "JWK": string(a.KeyJWK)})
	return nil
}

// --- orders ---

func (s *Server) orders(w http.ResponseWriter, r *http.Request, p principal) error {
	q := r.URL.Query()
	f := store.OrderFilter{AccountID: strings.TrimSpace(q.Get("account")), Identifier: strings.ToLower(strings.TrimSpace(q.Get("identifier"))), Status: acme.Status(q.Get("status"))}
	list, next, err := s.st.pages.OrdersList(r.Context(), f, pageOf(r))
	if err != nil {
		return pageErr(err)
	}
	s.render(w, r, p, http.StatusOK, "orders", map[string]any{"Orders": list, "Next": next, "Filter": f,
		"Statuses": []string{"pending", "ready", "processing", "valid", "invalid"}})
	return nil
}

func (s *Server) order(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	o, err := s.st.pages.OrderByID(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	var authzs []*store.Authorization
	for _, id := range o.AuthzIDs {
		a, err := s.st.pages.AuthzByID(ctx, id)
		if err != nil {
			return err
		}
		authzs = append(authzs, a)
	}
	// A relay's upstream orders: where its certificate came from, or for
	// a failed order where an unstored upstream certificate may be.
	upstream, err := s.st.pages.UpstreamOrdersOf(ctx, o.ID)
	if err != nil {
		return err
	}
	persp, err := s.perspectives(ctx, authzs)
	if err != nil {
		return err
	}
	s.render(w, r, p, http.StatusOK, "order", map[string]any{"Order": o, "Authzs": authzs, "Upstream": upstream, "Perspectives": persp})
	return nil
}

// --- certificates ---

func (s *Server) certs(w http.ResponseWriter, r *http.Request, p principal) error {
	q := r.URL.Query()
	f := store.CertFilter{AccountID: strings.TrimSpace(q.Get("account")), Name: strings.ToLower(strings.TrimSpace(q.Get("name")))}
	switch q.Get("revoked") {
	case "yes":
		f.Revoked = ptr(true)
	case "no":
		f.Revoked = ptr(false)
	}
	if e := q.Get("expiring"); e != "" {
		t, err := time.Parse("2006-01-02", e)
		if err != nil {
			return errBadRequest("the expiring date must be YYYY-MM-DD")
		}
		f.ExpiringBefore = &t
	}
	// A serial typed into the search box goes straight to its page.
	if serial := strings.ToLower(strings.TrimSpace(strings.ReplaceAll(q.Get("serial"), ":", ""))); serial != "" {
		http.Redirect(w, r, "/certs/"+url.PathEscape(serial), http.StatusSeeOther)
		return nil
	}
	list, next, err := s.st.pages.CertificatesList(r.Context(), f, pageOf(r))
	if err != nil {
		return pageErr(err)
	}
	s.render(w, r, p, http.StatusOK, "certs", map[string]any{"Certs": list, "Next": next, "Name": q.Get("name"),
		"Account": f.AccountID, "Revoked": q.Get("revoked"), "Expiring": q.Get("expiring")})
	return nil
}

func ptr[T any](v T) *T { return &v }

func (s *Server) cert(w http.ResponseWriter, r *http.Request, p principal) error {
	c, err := s.st.pages.CertificateBySerial(r.Context(), r.PathValue("serial"))
	if err != nil {
		return err
	}
	// What its ARI clients are told (renewalInfo's own rule).
	pr := s.live.Load()
	win, err := renewal.Suggested(r.Context(), s.st.pages, c, pr.profs[c.Profile])
	if err != nil {
		return err
	}
	now, err := s.st.pages.Now(r.Context())
	if err != nil {
		return err
	}
	s.render(w, r, p, http.StatusOK, "cert", map[string]any{"Cert": c, "Reasons": revocation.Allowed(),
		"Backend": pr.rev.Backend(c), "Remote": pr.rev.Remote(c), "Renewal": win, "Live": c.NotAfter.After(now)})
	return nil
}

// revoke revokes through protocol/revocation, the path the ACME API and the
// CLI use; the audit event is written in the revocation's transaction.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request, p principal) error {
	serial := r.PathValue("serial")
	reason, err := revocation.ParseReason(r.PostFormValue("reason"))
	var res revocation.Result
	if err == nil {
		res, err = s.live.Load().rev.Revoke(r.Context(), revocation.Request{Serial: serial, Reason: reason, Actor: "admin:" + p.user, Via: "admin panel", Wait: s.wait})
		if err == nil {
			msg := fmt.Sprintf("Revoked (%s). The issuer's next CRL is queued and will list it.", reason)
			switch {
			case res.KeyReported:
				msg = "Key compromise recorded: its key is blocked, its other certificates are revoked, and the issuer's next CRL lists this one as keyCompromise."
			case res.Remote && !res.Done:
				// A refusal never shows on this page by itself: asking again
				// waits on the same job, or asks the backend anew.
				msg = fmt.Sprintf("Revocation (%s) queued with the %s backend, which has not answered yet. Revoke again to wait for its answer: revoked, or refused and why.", reason, res.Backend)
			case res.Remote:
				// Its CA publishes the status; Hallmark queued no CRL.
				msg = fmt.Sprintf("Revoked (%s) by the %s backend, which publishes its revocation status.", reason, res.Backend)
			}
			s.redirectNotice(w, r, p, "/certs/"+url.PathEscape(serial), msg)
			return nil
		}
	}
	var ae *acme.Error
	if errors.As(err, &ae) && res.KeyReported {
		// A relay's or custom backend's certificate: its backend keeps the
		// reason it recorded, and the key is blocked all the same.
		s.redirectNotice(w, r, p, "/certs/"+url.PathEscape(serial), "Key compromise recorded: "+ae.Problem.Detail)
		return nil
	}
	if errors.As(err, &ae) {
		s.log.Info("admin: revocation refused", "serial", serial, "user", p.user, "problem", ae.Problem.Detail)
		s.redirectNotice(w, r, p, "/certs/"+url.PathEscape(serial), "Not revoked: "+ae.Problem.Detail)
		return nil
	}
	return err
}

// --- jobs ---

func (s *Server) jobsPage(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	q := r.URL.Query()
	f := store.JobFilter{Kind: q.Get("kind"), State: q.Get("state")}
	ids, next, err := s.st.pages.JobIDs(ctx, f, pageOf(r))
	if err != nil {
		return pageErr(err)
	}
	list := make([]jobs.JobInfo, 0, len(ids))
	for _, id := range ids {
		j, err := jobs.Show(ctx, s.q, id)
		if errors.Is(err, jobs.ErrJobNotFound) {
			continue // deleted by River's cleaner meanwhile
		}
		if err != nil {
			return err
		}
		list = append(list, j)
	}
	s.render(w, r, p, http.StatusOK, "jobs", map[string]any{"Jobs": list, "Next": next, "Filter": f,
		"Kinds":  []string{jobs.KindChallengeValidate, jobs.KindSignerIssue, jobs.KindSignerRevoke, jobs.KindCRLGenerate, jobs.KindHousekeeping, jobs.KindUpstreamRenewal, jobs.KindNotifySend, jobs.KindPerspectiveCheck},
		"States": []string{"available", "scheduled", "running", "retryable", "pending", "completed", "cancelled", "discarded"}})
	return nil
}

func jobID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return 0, errNotFound("a job id is a number")
	}
	return id, nil
}

func (s *Server) job(w http.ResponseWriter, r *http.Request, p principal) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	j, err := jobs.Show(r.Context(), s.q, id)
	if err != nil {
		return err
	}
	subj, hasSubj := operator.SubjectOf(j)
	s.render(w, r, p, http.StatusOK, "job", map[string]any{"Job": j, "Subject": subj, "HasSubject": hasSubj,
		"Finished": j.State == "completed" || j.State == "cancelled" || j.State == "discarded"})
	return nil
}

func (s *Server) jobRetry(w http.ResponseWriter, r *http.Request, p principal) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	j, err := operator.RetryJob(r.Context(), s.st.pages, s.q, id, "admin:"+p.user)
	msg := "Job made available to run now (state " + j.State + ")."
	if errors.Is(err, operator.ErrNothingToDo) {
		msg, err = "Not retried: "+err.Error(), nil
	}
	if err != nil {
		return err
	}
	s.redirectNotice(w, r, p, fmt.Sprintf("/jobs/%d", id), msg)
	return nil
}

// jobAbandon cancels a job and records a serverInternal failure on its
// subject (operator.AbandonJob, shared with the CLI), so the client polling
// that challenge or order sees a final answer instead of processing forever.
func (s *Server) jobAbandon(w http.ResponseWriter, r *http.Request, p principal) error {
	id, err := jobID(r)
	if err != nil {
		return err
	}
	j, failed, err := operator.AbandonJob(r.Context(), s.st.pages, s.q, id, "admin:"+p.user, "the CA's operator abandoned this work; submit a new order")
	msg := "Job abandoned (state " + j.State + ")."
	if sub, ok := operator.SubjectOf(j); ok && err == nil {
		if failed {
			msg = fmt.Sprintf("Job abandoned (state %s); %s %s failed with serverInternal.", j.State, sub.Kind, sub.ID)
		} else {
			msg = fmt.Sprintf("Job cancelled (state %s); %s %s already had its verdict and was left as it is.", j.State, sub.Kind, sub.ID)
		}
	}
	if errors.Is(err, operator.ErrNothingToDo) {
		msg, err = "Not abandoned: "+err.Error(), nil
	}
	if err != nil {
		return err
	}
	s.redirectNotice(w, r, p, fmt.Sprintf("/jobs/%d", id), msg)
	return nil
}

// accountDeactivate deactivates an account through operator.DeactivateAccount,
// the CLI's path, which records the audit event.
func (s *Server) accountDeactivate(w http.ResponseWriter, r *http.Request, p principal) error {
	id := r.PathValue("id")
	_, err := operator.DeactivateAccount(r.Context(), s.st.pages, id, "admin:"+p.user)
	msg := "Account deactivated; its authorizations no longer authorize and its unfinished orders are invalid."
	if errors.Is(err, operator.ErrNothingToDo) {
		msg, err = "Not deactivated: "+err.Error(), nil
	}
	if err != nil {
		return err
	}
	s.redirectNotice(w, r, p, "/accounts/"+url.PathEscape(id), msg)
	return nil
}

// --- audit ---

// keysShown bounds the blocked keys page: the latest first.
const keysShown = 500

// keys lists the keys reported compromised, which Hallmark refuses to
// certify (store.BlockedKeys), the latest blocked first.
func (s *Server) keys(w http.ResponseWriter, r *http.Request, p principal) error {
	list, err := s.st.pages.KeysBlocked(r.Context(), keysShown+1)
	if err != nil {
		return pageErr(err)
	}
	more := len(list) > keysShown
	if more {
		list = list[:keysShown]
	}
	s.render(w, r, p, http.StatusOK, "keys", map[string]any{"Keys": list, "More": more, "Shown": keysShown})
	return nil
}

// audit lists the audit log, operators' actions and the issuance trail,
// newest first: kind is trail, operator or an action; since a date.
func (s *Server) audit(w http.ResponseWriter, r *http.Request, p principal) error {
	q := r.URL.Query()
	f, err := auditFilter(r) // api_ops.go
	if err != nil {
		return err
	}
	list, next, err := s.st.pages.AuditFind(r.Context(), f, pageOf(r))
	if err != nil {
		return pageErr(err)
	}
	s.render(w, r, p, http.StatusOK, "audit", map[string]any{"Events": list, "Next": next, "Kind": q.Get("kind"),
		"Since": q.Get("since"), "Request": f.RequestID, "Actions": store.TrailActions})
	return nil
}

// --- pagination ---

func pageOf(r *http.Request) store.Page {
	return store.Page{After: r.URL.Query().Get("after"), Limit: pageSize}
}

// pageErr turns a cursor the store did not issue into a 404 rather than a
// logged server error.
func pageErr(err error) error {
	if errors.Is(err, store.ErrBadCursor) {
		return errNotFound("that page cursor is not one this panel issued; start from the first page")
	}
	return err
}
