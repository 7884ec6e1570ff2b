package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// pauseStore is what the pauses page reads and lifts (store.Pauses).
type pauseStore interface {
	PausesList(ctx context.Context, rule store.PauseRule, f store.PauseFilter, p store.Page) ([]store.Pause, string, error)
	PauseLift(ctx context.Context, accountID string, ident *acme.Identifier, ev store.AuditEvent) (int64, error)
}

// pausesShown bounds the pauses page, longest failing first.
const pausesShown = 500

// pauses lists the accounts paused for identifiers ([limits]
// pause_after_days), each with a button that lifts its pause.
func (s *Server) pauses(w http.ResponseWriter, r *http.Request, p principal) error {
	list, next, err := s.st.pauses.PausesList(r.Context(), s.pause, store.PauseFilter{}, store.Page{Limit: pausesShown})
	if err != nil {
		return pageErr(err)
	}
	s.render(w, r, p, http.StatusOK, "pauses", map[string]any{"Pauses": list, "More": next != "", "Shown": pausesShown, "On": s.pause.On(),
		"Days": int(s.pause.After.Hours() / 24), "Min": s.pause.MinFailures})
	return nil
}

// pauseLift lifts one account's pause for one identifier, audited as the
// operator (operator.LiftPause, shared with `hallmark pauses lift`).
func (s *Server) pauseLift(w http.ResponseWriter, r *http.Request, p principal) error {
	acct, ident := r.PostFormValue("account"), r.PostFormValue("identifier")
	if acct == "" || !store.Storable(acct) || !store.Storable(ident) {
		return errBadRequest("the form names no account")
	}
	_, err := operator.LiftPause(r.Context(), s.st.pauses, acct, ident, "admin:"+p.user)
	msg := "Pause lifted: account " + acct + " may order " + ident + " again."
	switch {
	case errors.Is(err, operator.ErrNothingToDo):
		msg, err = "Nothing lifted: "+err.Error(), nil
	case errors.Is(err, operator.ErrBadIdentifier):
		return errBadRequest(err.Error())
	}
	if err != nil {
		return err
	}
	s.redirectNotice(w, r, p, "/pauses", msg)
	return nil
}
