package access

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// Options are the policy's collaborators that are not configuration.
type Options struct {
	// IPAM builds the name source of the ipam check name. nil: every ipam
	// check answers unknown ("IPAM not built").
	IPAM func(name string, c Check) (NameSource, error)
}

// Policy is [access], built once; safe for concurrent use. A nil *Policy
// is no policy.
type Policy struct {
	cfg     Config
	warn    bool
	def     Decision
	clients clients
	checks  map[string]*check
	rules   []rule
}

// check is one built check: what it needs of a request and how it answers.
type check struct {
	name  string
	kind  string
	needs need
	run   checker
}

// checker answers one check for the facts a request has shown.
type checker interface {
	check(ctx context.Context, f *Facts) Result
}

// Result is a check's answer and, for explain and the log, why.
type Result struct {
	Answer Answer
	Detail string
	PTR    string // rdns: the client's PTR name it judged by, if any
}

type rule struct {
	name   string
	expr   expr
	needs  need
	action Decision
}

// need is what a check looks at beyond the client: the account, the
// identifiers.
type need uint8

const (
	needAccount need = 1 << iota
	needIdentifiers
)

func (n need) has(m need) bool { return n&m != 0 }

func needsOfCheck(c Check) need {
	switch c.Kind {
	case "eab":
		return needAccount
	case "identifiers", "ipam":
		return needIdentifiers
	case "hook":
		switch c.On {
		case "request":
			return 0
		case "account":
			return needAccount
		}
		return needIdentifiers
	}
	return 0
}

// New builds the policy of cfg, nil when cfg asks for none. cfg must have
// passed Validate.
func New(cfg Config, opts Options) (*Policy, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{cfg: cfg, warn: cfg.Mode == "warn", checks: map[string]*check{}}
	p.def = Decision{Verdict: Allow, Rule: "default"}
	if cfg.Default == "deny" {
		p.def = denial("default", ProblemUnauthorized, cfg.DefaultMessage)
	}
	trusted, _ := parsePrefixes("access.trusted_proxies", cfg.TrustedProxies)
	header := http.CanonicalHeaderKey(cfg.ForwardedHeader)
	if header == "" {
		header = DefaultHeader
	}
	p.clients = clients{trusted: trusted, header: header, rfc7239: header == "Forwarded"}
	for _, name := range slices.Sorted(maps.Keys(cfg.Checks)) {
		c := cfg.Checks[name]
		run, err := build(cfg, name, c, opts)
		if err != nil {
			return nil, fmt.Errorf("access.checks.%s: %w", name, err)
		}
		p.checks[name] = &check{name: name, kind: c.Kind, needs: needsOfCheck(c), run: run}
	}
	for i, r := range cfg.Rules {
		e, _ := parseExpr(r.When) // Validate parsed it
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("rule %d", i+1)
		}
		action := Decision{Verdict: Allow, Rule: name}
		if r.Action == "deny" {
			action = denial(name, r.Problem, r.Message)
		}
		p.rules = append(p.rules, rule{name: name, expr: e, needs: cfg.needsOf(e), action: action})
	}
	return p, nil
}

func build(cfg Config, name string, c Check, opts Options) (checker, error) {
	switch c.Kind {
	case "cidr":
		ranges, err := parsePrefixes("ranges", c.Ranges)
		return cidrCheck{ranges: ranges}, err
	case "rdns":
		return newRDNSCheck(cfg, c), nil
	case "identifiers":
		return newIdentifiersCheck(c), nil
	case "eab":
		return eabCheck{ids: c.KeyIDs, labels: c.KeyLabels}, nil
	case "hook":
		return newHookCheck(name, c), nil
	case "ipam":
		return newIPAMCheck(name, c, opts)
	}
	return nil, fmt.Errorf("unknown kind %q", c.Kind)
}

func denial(rule, problem, message string) Decision {
	if problem == "" {
		problem = ProblemUnauthorized
	}
	if message == "" {
		message = "this CA's access policy does not allow this request; ask the CA's operator"
	}
	return Decision{Verdict: Deny, Rule: rule, Problem: problem, Message: message}
}

// Warn reports whether the policy only logs what it would refuse.
func (p *Policy) Warn() bool { return p != nil && p.warn }

// Verdict is what the policy says of a request.
type Verdict uint8

const (
	Allow       Verdict = iota
	Deny                // refused, with the rule's problem and message
	Unavailable         // the deciding rule depends on a check that could not answer
	Pending             // the deciding rule looks at what the request has yet to show
)

func (v Verdict) String() string {
	return [...]string{"allow", "deny", "unavailable", "pending"}[v]
}

// Decision is the policy's answer for a request, and the rule that gave it.
type Decision struct {
	Verdict Verdict
	Rule    string   // the deciding rule's name, or "default"
	Problem string   // deny: ProblemUnauthorized or ProblemRejectedIdentifier
	Message string   // deny: the operator's sentence for the client
	Unknown []string // unavailable: "check: why" of each check that could not answer
}

// ErrUnknown is in the chain of a Decision's error when the policy could
// not decide: the frontend answers it 503 with Retry-After.
var ErrUnknown = errors.New("the access policy could not decide")

// Err is the error a refused or undecided request is answered with; nil
// for allow.
func (d Decision) Err() error {
	switch d.Verdict {
	case Deny:
		t := acme.ProblemUnauthorized
		if d.Problem == ProblemRejectedIdentifier {
			t = acme.ProblemRejectedIdentifier
		}
		return acme.New(t, "%s", d.Message)
	case Unavailable:
		return fmt.Errorf("%w: rule %q depends on %s", ErrUnknown, d.Rule, strings.Join(d.Unknown, "; "))
	}
	return nil
}

// Start begins evaluating a request of kind on route (for the hook and the
// log) from peer with headers h. Nothing is looked up until Decide.
func (p *Policy) Start(route string, kind Kind, peer netip.Addr, h http.Header) *Eval {
	e := &Eval{p: p, route: route, results: map[string]Result{}}
	e.f.Kind, e.f.Route = kind, route
	e.f.Client = p.clients.of(peer, h)
	switch kind {
	case KindNewAccount:
		e.never = needAccount | needIdentifiers
	case KindAccount, KindRevoke:
		e.never = needIdentifiers
	}
	return e
}
