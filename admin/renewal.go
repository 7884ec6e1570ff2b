package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// certARIMove moves one certificate's renewal window into the past, so its
// ARI clients (RFC 9773) renew now, audited as the operator in the move's
// transaction (operator.MoveRenewal, shared with `hallmark ari move`).
func (s *Server) certARIMove(w http.ResponseWriter, r *http.Request, p principal) error {
	serial := r.PathValue("serial")
	if _, err := s.st.pages.CertificateBySerial(r.Context(), serial); err != nil {
		return err
	}
	_, err := operator.MoveRenewal(r.Context(), s.st.pages, store.RenewalSelector{Serial: serial}, r.PostFormValue("reason"), "admin:"+p.user)
	msg := "Renewal window moved into the past: its ARI clients are told to renew now."
	switch {
	case errors.Is(err, operator.ErrNothingToDo):
		msg, err = "Not moved: "+err.Error(), nil
	case errors.Is(err, operator.ErrNoReason):
		return errBadRequest(err.Error())
	}
	if err != nil {
		return err
	}
	s.redirectNotice(w, r, p, "/certs/"+url.PathEscape(serial), msg)
	return nil
}

// apiARIMove is certARIMove for the API; the body is {"reason": "..."}.
func (s *Server) apiARIMove(r *http.Request, p principal) (any, error) {
	var body struct {
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return nil, apiErr(http.StatusBadRequest, `the body must be {"reason": "why, shown to subscribers"}`)
	}
	serial := r.PathValue("serial")
	if _, err := s.st.pages.CertificateBySerial(r.Context(), serial); err != nil {
		return nil, err
	}
	moved, err := operator.MoveRenewal(r.Context(), s.st.pages, store.RenewalSelector{Serial: serial}, body.Reason, "admin:"+p.user)
	if errors.Is(err, operator.ErrNoReason) {
		return nil, apiErr(http.StatusBadRequest, "%v", err)
	}
	return nothingToDo(map[string]any{"serial": serial, "moved": len(moved) == 1}, err)
}
