package access

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Input is a request as `hallmark policy explain` describes it.
type Input struct {
	Route       string
	Kind        Kind
	Peer        netip.Addr
	Forwarded   []string // values of the forwarded header, as a proxy would send them
	Account     *Account // nil: none signed it (newAccount, revokeCert by the certificate's key)
	Identifiers []acme.Identifier
	Profile     string
}

// Report is what explain found: every check's answer, every rule's value,
// and the decision the frontend would make.
type Report struct {
	Input    Input
	Client   Client
	Checks   []Line
	Rules    []Line
	Decision Decision
}

// Line is one check or rule in a report.
type Line struct {
	Name   string
	What   string // the check's kind, or the rule's condition and action
	Answer string
	Detail string
}

// Explain evaluates in as the frontend does a request (the same stages,
// through Eval), then asks the checks the decision did not need, so the
// report shows every answer.
func (p *Policy) Explain(ctx context.Context, in Input) Report {
	h := http.Header{}
	for _, v := range in.Forwarded {
		h.Add(p.clients.header, v)
	}
	e := p.Start(in.Route, in.Kind, in.Peer, h)
	d := e.Decide(ctx)
	if in.Kind != KindNewAccount {
		e.SetAccount(in.Account)
		d = e.Decide(ctx)
	}
	if in.Kind == KindOrder {
		e.SetOrder(in.Identifiers, in.Profile)
		d = e.Decide(ctx)
	}
	r := Report{Input: in, Client: e.f.Client, Decision: d}
	for _, name := range slices.Sorted(maps.Keys(p.checks)) {
		c := p.checks[name]
		l := Line{Name: name, What: c.kind}
		if c.needs&e.never != 0 {
			l.Answer, l.Detail = "-", "this request never shows what it looks at"
		} else {
			res := e.ask(ctx, name)
			l.Answer, l.Detail = res.Answer.String(), res.Detail
		}
		r.Checks = append(r.Checks, l)
	}
	for _, ru := range p.rules {
		l := Line{Name: ru.name, What: ru.expr.String() + " → " + ru.action.describe()}
		if ru.needs&e.never != 0 {
			l.Answer, l.Detail = "skipped", "names a check of what this request never shows"
		} else {
			l.Answer = ru.expr.eval(func(n string) Answer { return e.ask(ctx, n).Answer }).String()
		}
		r.Rules = append(r.Rules, l)
	}
	return r
}

// detail is what follows a decision's verdict and rule in explain.
func (d Decision) detail() string {
	switch d.Verdict {
	case Deny:
		return fmt.Sprintf(": %s %q", d.Problem, d.Message)
	case Unavailable:
		return ": 503 with Retry-After, as " + strings.Join(d.Unknown, "; ")
	}
	return ""
}

func (d Decision) describe() string {
	switch d.Verdict {
	case Deny:
		return fmt.Sprintf("deny %s %q", d.Problem, d.Message)
	case Unavailable:
		return "unavailable (503, Retry-After): " + strings.Join(d.Unknown, "; ")
	}
	return d.Verdict.String()
}

// Write prints the report for an operator.
func (r Report) Write(w io.Writer, warn bool) error {
	fmt.Fprintf(w, "request: %s\n", r.Input.Route)
	fmt.Fprintf(w, "client: %s (%s); peer %s", addrOrNone(r.Client.Addr), r.Client.How, r.Client.Peer)
	if len(r.Client.Forwarded) > 0 {
		fmt.Fprintf(w, ", forwarded %s", strings.Join(r.Client.Forwarded, ", "))
	}
	fmt.Fprintln(w)
	if len(r.Input.Identifiers) > 0 {
		ids := make([]string, len(r.Input.Identifiers))
		for i, id := range r.Input.Identifiers {
			ids[i] = string(id.Type) + ":" + id.Value
		}
		fmt.Fprintf(w, "identifiers: %s (profile %s)\n", strings.Join(ids, ", "), r.Input.Profile)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCHECK\tKIND\tANSWER\tWHY")
	for _, l := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, l.What, l.Answer, l.Detail)
	}
	fmt.Fprintln(tw, "\nRULE\tCONDITION → ACTION\tHOLDS\t")
	for _, l := range r.Rules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, l.What, l.Answer, l.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	note := ""
	if warn && r.Decision.Verdict != Allow {
		note = " (mode warn: logged, not refused)"
	}
	_, err := fmt.Fprintf(w, "\ndecision: %s by %q%s%s\n", r.Decision.Verdict, r.Decision.Rule, r.Decision.detail(), note)
	return err
}

func addrOrNone(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}

// Show prints the policy as loaded: its mode and default, how the client is
// found, its checks and its rules in order. A nil policy says there is none.
func (p *Policy) Show(w io.Writer) error {
	if p == nil {
		_, err := fmt.Fprintln(w, "no access policy: [access] has no rules and default allow, so any client may ask")
		return err
	}
	c := p.cfg
	fmt.Fprintf(w, "mode: %s\ndefault: %s\n", orString(c.Mode, "enforce"), p.def.describe())
	if len(c.TrustedProxies) == 0 {
		fmt.Fprintf(w, "client: the peer (no trusted_proxies: %s is never believed)\n", p.clients.header)
	} else {
		fmt.Fprintf(w, "client: the right-most %s address that is not a trusted proxy (%s), when the peer is one\n",
			p.clients.header, strings.Join(c.TrustedProxies, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCHECK\tKIND\tSETTINGS")
	for _, name := range slices.Sorted(maps.Keys(c.Checks)) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, c.Checks[name].Kind, settings(c, c.Checks[name]))
	}
	fmt.Fprintln(tw, "\nRULE\tCONDITION\tACTION")
	for _, r := range p.rules {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, r.expr, r.action.describe())
	}
	fmt.Fprintf(tw, "default\t(no rule matched)\t%s\n", p.def.describe())
	return tw.Flush()
}

// settings is a check's settings in one line, defaults filled in.
func settings(cfg Config, c Check) string {
	var parts []string
	add := func(k string, v []string) {
		if len(v) > 0 {
			parts = append(parts, k+" "+strings.Join(v, ", "))
		}
	}
	add("ranges", c.Ranges)
	add("allow", c.Allow)
	add("deny", c.Deny)
	add("regex", c.Regex)
	add("ip_ranges", c.IPRanges)
	add("deny_ip_ranges", c.DenyIPRanges)
	add("profiles", c.Profiles)
	add("key_ids", c.KeyIDs)
	add("key_labels", c.KeyLabels)
	add("command", c.Command)
	add("env", slices.Sorted(maps.Keys(c.Env)))
	switch c.Kind {
	case "rdns":
		ch := newRDNSCheck(cfg, c)
		parts = append(parts, fmt.Sprintf("forward_confirm %v", ch.confirm), fmt.Sprintf("timeout %s", ch.timeout))
		if len(c.Resolvers) == 0 {
			add("resolvers", cfg.Resolvers)
		} else {
			add("resolvers", c.Resolvers)
		}
		parts = append(parts, fmt.Sprintf("cache at most %ds", orDefault(c.CacheSeconds, DefaultCacheSeconds)))
	case "hook":
		parts = append(parts, "on "+orString(c.On, "order"), fmt.Sprintf("timeout %dms", orDefault(c.TimeoutMS, DefaultHookTimeoutMS)))
	case "ipam":
		parts = append(parts, "source "+c.Source.Kind+" "+c.Source.URL, fmt.Sprintf("timeout %dms", orDefault(c.TimeoutMS, DefaultIPAMTimeoutMS)))
	}
	return strings.Join(parts, "; ")
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
