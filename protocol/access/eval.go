package access

import (
	"context"
	"maps"
	"slices"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Kind is what a request can show beyond its client.
type Kind uint8

const (
	KindNewAccount Kind = iota // newAccount: signed by a new key, no account, no identifiers
	KindAccount                // every other POST signed by an account, no identifiers
	KindRevoke                 // revokeCert: by an account, or by the certificate's own key
	KindOrder                  // newOrder, newAuthz: an account and identifiers
)

// Facts are what a request has shown so far.
type Facts struct {
	Kind        Kind
	Route       string // the endpoint, as the metrics name it ("new_order")
	Client      Client
	Account     *Account          // once known; nil for a request no account signed
	Identifiers []acme.Identifier // newOrder, newAuthz; as the identifier policy normalised them
	Profile     string
}

// Account is the account that signed a request.
type Account struct {
	ID string
	// EAB reads the key that bound the account (nil, nil: none). Only an
	// eab check calls it, at most once a request.
	EAB func(ctx context.Context) (*EAB, error)
}

// EAB is an account's external account binding key.
type EAB struct {
	KeyID string
	Label string
}

// Eval is one request's evaluation. The frontend calls Decide after each
// stage adds what the request has shown; each check is asked at most once.
// Not safe for concurrent use: it belongs to its request.
type Eval struct {
	p       *Policy
	route   string
	f       Facts
	have    need // shown
	never   need // never shown by this kind of request
	results map[string]Result
	decided *Decision
}

// Facts are what the request has shown so far.
func (e *Eval) Facts() Facts { return e.f }

// SetAccount records the account that signed the request; nil for a
// revokeCert signed by the certificate's key.
func (e *Eval) SetAccount(a *Account) {
	if a == nil {
		e.never |= needAccount
		return
	}
	e.f.Account, e.have = a, e.have|needAccount
}

// SetOrder records newOrder's or newAuthz's identifiers and profile.
func (e *Eval) SetOrder(ids []acme.Identifier, profile string) {
	e.f.Identifiers, e.f.Profile = slices.Clone(ids), profile
	e.have |= needIdentifiers
}

// PTR is the client's PTR name as an rdns check of this request found it
// (the one it judged by: the allowed, confirmed name when there is one),
// "" when none looked one up.
func (e *Eval) PTR() string {
	for _, name := range slices.Sorted(maps.Keys(e.results)) {
		if n := e.results[name].PTR; n != "" {
			return n
		}
	}
	return ""
}

// Settled reports whether the policy has decided (nil: there is no policy).
func (e *Eval) Settled() bool { return e == nil || e.decided != nil }

// Decide walks the rules in order with what the request has shown: the
// first whose condition holds decides; one that may hold once the request
// shows more leaves the request Pending; one that depends on a check that
// could not answer leaves it Unavailable. A rule naming a check of what
// this kind of request never shows (the identifiers of a challenge POST)
// is skipped. Once decided, the decision stands.
func (e *Eval) Decide(ctx context.Context) Decision {
	if e.decided != nil {
		return *e.decided
	}
	d := e.walk(ctx)
	if d.Verdict != Pending {
		e.decided = &d
	}
	return d
}

func (e *Eval) walk(ctx context.Context) Decision {
	ask := func(name string) Answer { return e.ask(ctx, name).Answer }
	for _, r := range e.p.rules {
		if r.needs&e.never != 0 {
			continue
		}
		switch r.expr.eval(ask) {
		case No:
			continue
		case Yes:
			return r.action
		case Unknown:
			d := Decision{Verdict: Unavailable, Rule: r.name}
			for _, n := range r.expr.names(nil) {
				if res, ok := e.results[n]; ok && res.Answer == Unknown {
					d.Unknown = append(d.Unknown, n+": "+res.Detail)
				}
			}
			return d
		default:
			return Decision{Verdict: Pending, Rule: r.name}
		}
	}
	return e.p.def
}

// ask is the check name's answer, asked once; pending while the request
// has not shown what it looks at.
func (e *Eval) ask(ctx context.Context, name string) Result {
	c := e.p.checks[name]
	if c.needs&^e.have != 0 {
		return Result{Answer: pending}
	}
	if res, ok := e.results[name]; ok {
		return res
	}
	res := c.run.check(ctx, &e.f)
	e.results[name] = res
	return res
}
