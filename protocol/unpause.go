package protocol

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// The unpause page: the link a paused account's refused newOrder carries
// (pause.go). GET shows what the account is paused for and a button; only
// the button's POST unpauses, so a link previewer that fetches the URL
// changes nothing. The token in the link is the proof: the frontends sign
// it (HS256, a key derived from their shared nonce key) for one account,
// and hand it only to that account's signed request. The POST carries the
// same token in its form, so no other site can forge it (no cookie is
// involved). Unpausing deletes every run of failures of the account and is
// audited (store.ActionPauseLifted, actor "acme:<account id>").

var unpausePage = template.Must(template.New("unpause").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="robots" content="noindex"><title>Unpause an ACME account</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:2em auto;padding:0 1em}code{word-break:break-all}</style>
</head><body><h1>{{.Title}}</h1>
{{if .Error}}<p id="error">{{.Error}}</p>{{end}}
{{if .Account}}<p>Account <code id="account">{{.Account}}</code></p>{{end}}
{{if .Paused}}<p>New orders are refused for these identifiers, whose every validation has failed for days:</p>
<ul id="paused">{{range .Paused}}<li><code>{{.Identifier}}</code>: {{.Failures}} failures since {{.FirstFailed.UTC.Format "2006-01-02 15:04 MST"}}</li>{{end}}</ul>
<p>Fix what makes the validations fail (DNS records, the web server's challenge path, the firewall) before you unpause: the account is paused again if they keep failing.</p>
<form method="post" action=""><input type="hidden" name="jwt" value="{{.Token}}">
<button id="unpause" type="submit">Unpause this account</button></form>{{end}}
{{if .Done}}<p id="done">{{.Done}}</p>{{end}}
</body></html>
`))

type unpauseView struct {
	Title, Error, Account, Token, Done string
	Paused                             []store.Pause
}

// maxUnpauseForm bounds the unpause POST's body: one token.
const maxUnpauseForm = 8 << 10

func (s *Server) unpause(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer") // the link is the proof: never leak it
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", "text/html; charset=utf-8")
	v := unpauseView{Title: "Unpause an ACME account"}
	var tok string
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxUnpauseForm)
		if err := r.ParseForm(); err != nil {
			return s.unpauseAnswer(w, http.StatusBadRequest, v, errors.New("the form could not be read; open the link again"))
		}
		tok = r.PostForm.Get("jwt")
	} else {
		tok = r.URL.Query().Get("jwt")
	}
	t, err := s.unpauseToken(tok)
	if err != nil {
		return s.unpauseAnswer(w, http.StatusBadRequest, v, err)
	}
	v.Account, v.Token = t.Subject, tok
	ctx := r.Context()
	if r.Method == http.MethodPost {
		n, err := s.st.pauses.PauseLift(ctx, t.Subject, nil, store.AuditEvent{Actor: "acme:" + t.Subject, Action: store.ActionPauseLifted,
			Detail: "unpaused by the subscriber through the link of a refused newOrder", Origin: origin.Of(ctx)})
		if err != nil {
			return s.storeErr(err, "unpausing an account")
		}
		v.Title, v.Done = "Account unpaused", fmt.Sprintf("Unpaused: %d identifiers cleared. Your ACME client may order them again now.", n)
		if n == 0 {
			v.Done = "Nothing to unpause: the account is not paused (it may have been unpaused already)."
		}
		return s.unpauseAnswer(w, http.StatusOK, v, nil)
	}
	ps, _, err := s.st.pauses.PausesList(ctx, s.pauseRule(), store.PauseFilter{AccountID: t.Subject}, store.Page{Limit: 1000})
	if err != nil {
		return s.storeErr(err, "reading the account's pauses")
	}
	v.Paused = ps
	if len(ps) == 0 {
		v.Done = "This account is not paused for any identifier: its ACME client may order as usual."
	}
	return s.unpauseAnswer(w, http.StatusOK, v, nil)
}

// unpauseAnswer renders the page with status; err, when set, is a
// sentence for the subscriber.
func (s *Server) unpauseAnswer(w http.ResponseWriter, status int, v unpauseView, err error) error {
	if err != nil {
		v.Title, v.Error = "This link does not work", err.Error()
	}
	w.WriteHeader(status)
	if err := unpausePage.Execute(w, v); err != nil {
		return acme.Internal(err)
	}
	return nil
}
