package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/store"
)

// maxTrailDetail bounds a trail event's detail, which quotes a client.
const maxTrailDetail = 1024

// trailed records a refusal of a verified request to h on the issuance
// trail as action (store.ActionOrderRefused, store.ActionFinalizeRefused),
// with the request's origin. A refusal is any problem the client is told
// but a stale nonce (it retries at once) and the CA's own failures (those
// are logged). subject names what was refused, detail adds what the
// request asked for.
func (s *Server) trailed(action string, subject, asked func(*post) string, h func(http.ResponseWriter, *post) error) func(http.ResponseWriter, *post) error {
	return func(w http.ResponseWriter, p *post) error {
		err := s.settle(p, h(w, p)) // a nonce or an account refused is no refusal of the order
		var ae *acme.Error
		if err == nil || !errors.As(err, &ae) || ae.Problem.Type == acme.ProblemBadNonce || ae.Problem.Type == acme.ProblemServerInternal {
			return err
		}
		detail := string(ae.Problem.Type) + ": " + ae.Problem.Detail
		if a := asked(p); a != "" {
			detail += "; asked for " + a
		}
		s.trail(p.r.Context(), store.AuditEvent{Actor: "acme:" + p.acct.ID, Action: action,
			Subject: origin.Clean(subject(p)), Detail: origin.Cut(detail, maxTrailDetail)})
		return err
	}
}

// trail records ev, a trail event of the request whose context is ctx.
// A record that fails is logged: the client's answer stands.
func (s *Server) trail(ctx context.Context, ev store.AuditEvent) {
	ev.Trail, ev.Origin = true, origin.Of(ctx)
	if err := s.st.trail.AuditRecord(ctx, ev); err != nil {
		s.log.ErrorContext(ctx, "recording an event of the issuance trail", "action", ev.Action, "subject", ev.Subject, "err", err)
	}
}

// trailAccount is the trail event of a new account (its actor and subject
// the id the store gives it).
func trailAccount(ctx context.Context, a *store.Account, eabKey string) store.AuditEvent {
	detail := "key thumbprint " + a.Thumbprint
	if eabKey != "" {
		detail += ", bound to external account key " + eabKey
	}
	return store.AuditEvent{Action: store.ActionAccountCreated, Detail: detail, Trail: true, Origin: origin.Of(ctx)}
}

// routeID is the {id} of the request's route: the order a finalize names.
func routeID(p *post) string { return mux.Vars(p.r)["id"] }

// noSubject is a refusal with nothing to name but the request.
func noSubject(*post) string { return "" }

// nothingAsked adds nothing to a refusal's detail.
func nothingAsked(*post) string { return "" }

// identifiersAsked are the identifiers a newOrder's payload names, as far
// as it reads.
func identifiersAsked(p *post) string {
	var req struct {
		Identifiers []acme.Identifier `json:"identifiers"`
	}
	if json.Unmarshal(p.payload, &req) != nil || len(req.Identifiers) == 0 {
		return ""
	}
	names := make([]string, 0, len(req.Identifiers))
	for _, id := range req.Identifiers {
		names = append(names, fmt.Sprintf("%s:%s", id.Type, id.Value))
	}
	return strings.Join(names, ", ")
}
