package protocol

import (
	"context"
	"errors"
	"net/http"
	"net/netip"

	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
)

// The client access policy ([access], protocol/access) runs on every ACME
// POST in three stages: before the body is read (the client), once the
// request is verified (the account), and for newOrder and newAuthz once
// the identifier policy has read the identifiers. Each stage decides if it
// can; a request still pending goes on.

// accessKinds says what each POST route's requests can show the policy.
var accessKinds = map[string]access.Kind{
	"new_account": access.KindNewAccount,
	"revoke_cert": access.KindRevoke,
	"new_order":   access.KindOrder,
	"new_authz":   access.KindOrder,
}

// accessStart begins a POST's evaluation and decides what its client alone
// decides. nil when there is no policy.
func (s *Server) accessStart(r *http.Request, route string) (*access.Eval, error) {
	if s.access == nil {
		return nil, nil
	}
	kind, ok := accessKinds[route]
	if !ok {
		kind = access.KindAccount
	}
	ev := s.access.Start(route, kind, peerAddr(r), r.Header)
	return ev, s.accessDecide(r, ev)
}

// noteOrigin puts what the policy learnt of the client on the request's
// origin (protocol/origin), for its log lines, its jobs and the trail: the
// client address it believed (a trusted proxy's forwarded one) and the PTR
// name an rdns check looked up.
func noteOrigin(r *http.Request, ev *access.Eval) {
	o := origin.FromContext(r.Context())
	if o == nil {
		return
	}
	if a := ev.Facts().Client.Addr; a.IsValid() {
		o.ClientAddr = a.String()
	}
	if o.PTR == "" {
		o.PTR = origin.Clean(ev.PTR())
	}
}

// accessAccount gives the policy the account that signed p (none for a
// revokeCert signed by the certificate's key) and decides.
func (s *Server) accessAccount(p *post) error {
	if p.access == nil {
		return nil
	}
	if p.acct == nil {
		p.access.SetAccount(nil)
	} else {
		id := p.acct.ID
		p.access.SetAccount(&access.Account{ID: id, EAB: func(ctx context.Context) (*access.EAB, error) {
			k, err := s.binding(ctx, id)
			if err != nil || k == nil {
				return nil, err
			}
			return &access.EAB{KeyID: k.ID, Label: k.Label}, nil
		}})
	}
	return s.accessDecide(p.r, p.access)
}

// accessOrder gives the policy newOrder's or newAuthz's identifiers, as the
// identifier policy normalised them, and decides.
func (s *Server) accessOrder(p *post, ids []acme.Identifier, profile string) error {
	if p.access == nil {
		return nil
	}
	p.access.SetOrder(ids, profile)
	return s.accessDecide(p.r, p.access)
}

// accessDecide decides with what ev has seen: nil while allowed or
// pending; the rule's refusal, or an error the renderer answers 503 with
// Retry-After when the deciding rule depends on a check that could not
// answer. In mode warn a refusal is logged, with its rule, and the
// request goes on.
func (s *Server) accessDecide(r *http.Request, ev *access.Eval) error {
	if ev == nil {
		return nil
	}
	first := !ev.Settled() // a decision is logged and counted once
	d := ev.Decide(r.Context())
	noteOrigin(r, ev)
	if d.Verdict == access.Allow || d.Verdict == access.Pending {
		return nil
	}
	if s.access.Warn() {
		if first {
			s.metrics.access.WithLabelValues("would_" + d.Verdict.String()).Inc()
			s.log.Warn("access policy would refuse this request (mode warn: allowed)", accessAttrs(ev, d)...)
		}
		return nil
	}
	if first {
		s.metrics.access.WithLabelValues(d.Verdict.String()).Inc()
		if d.Verdict == access.Deny {
			s.log.Info("access policy refused a request", accessAttrs(ev, d)...)
		}
	}
	return d.Err()
}

// accessAttrs are a decision's log attributes: the rule, the request and
// its client.
func accessAttrs(ev *access.Eval, d access.Decision) []any {
	f := ev.Facts()
	attrs := []any{"rule", d.Rule, "verdict", d.Verdict.String(), "route", f.Route,
		"client", addrString(f.Client.Addr), "peer", f.Client.Peer.String()}
	if f.Account != nil {
		attrs = append(attrs, "account", f.Account.ID)
	}
	if len(d.Unknown) > 0 {
		attrs = append(attrs, "unknown", d.Unknown)
	}
	return attrs
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}

// accessUnknown is the 503 of a request the policy could not decide.
func (s *Server) accessUnknown(err error) *acme.Error {
	if !errors.Is(err, access.ErrUnknown) {
		return nil
	}
	return &acme.Error{Problem: acme.Problem{Type: acme.ProblemServerInternal, Status: http.StatusServiceUnavailable,
		Detail: "the CA could not complete its access checks for this request; retry after " + retryAfter(s.retry) + " seconds"},
		RetryAfter: s.retry, Cause: err}
}
