package access

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/hallmark-ca/hallmark/protocol/access/ipam"
)

// Config is [access]. With no rules and default "allow" there is no policy:
// the frontend checks nothing.
type Config struct {
	Mode    string `toml:"mode"`    // "enforce" (the default) or "warn": log what would be refused, refuse nothing
	Default string `toml:"default"` // "allow" (the default) or "deny": the answer when no rule matches
	// DefaultMessage is the detail of default "deny"'s refusal, which is
	// unauthorized: the default also answers requests with no identifiers.
	DefaultMessage string `toml:"default_message"`
	// TrustedProxies are the CIDRs whose forwarded header is believed.
	TrustedProxies []string `toml:"trusted_proxies"`
	// ForwardedHeader names it: "X-Forwarded-For" (the default), or
	// "Forwarded" (RFC 7239, its for= parameters).
	ForwardedHeader string `toml:"forwarded_header"`
	// Resolvers are the rdns checks' DNS resolvers (host:port) when a check
	// names none of its own.
	Resolvers []string         `toml:"resolvers"`
	Checks    map[string]Check `toml:"checks"`
	Rules     []Rule           `toml:"rules"`
}

// Check is one [access.checks.<name>]. Kind says which of the other keys
// apply (kindKeys).
type Check struct {
	Kind string `toml:"kind"` // cidr, rdns, identifiers, eab, hook, ipam

	Ranges []string `toml:"ranges"` // cidr: the client's address lies in one

	// rdns: the client's PTR names; identifiers: the order's DNS names.
	// Glob patterns: a leftmost "*" label is one or more labels, a "*"
	// inside a label any run of its characters.
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`

	ForwardConfirm *bool    `toml:"forward_confirm"` // rdns: a PTR name counts only if it resolves back (default true)
	Resolvers      []string `toml:"resolvers"`       // rdns: host:port, else access.resolvers
	CacheSeconds   int      `toml:"cache_seconds"`   // rdns: the longest an answer is kept (default 300; records' TTLs shorten it)

	Regex        []string `toml:"regex"`          // identifiers: RE2, matched against the whole name
	IPRanges     []string `toml:"ip_ranges"`      // identifiers: ip identifiers allowed
	DenyIPRanges []string `toml:"deny_ip_ranges"` // identifiers: ip identifiers refused
	Profiles     []string `toml:"profiles"`       // identifiers: only orders of these profiles pass

	KeyIDs    []string `toml:"key_ids"`    // eab: the binding key's id is one of these
	KeyLabels []string `toml:"key_labels"` // eab: its label matches one of these ("*" any run)

	Command []string          `toml:"command"` // hook: argv, run without a shell
	Env     map[string]string `toml:"env"`     // hook: its whole environment
	On      string            `toml:"on"`      // hook: "request", "account" or "order" (the default)

	// Source is the IPAM an ipam check asks ([access.checks.<name>.source]).
	Source ipam.Config `toml:"source"`

	TimeoutMS int `toml:"timeout_ms"` // rdns, hook, ipam: the time budget of one answer
}

// Rule is one [[access.rules]].
type Rule struct {
	Name    string `toml:"name"`    // for logs and explain; default "rule N"
	When    string `toml:"when"`    // check names with and, or, not and parentheses
	Action  string `toml:"action"`  // "allow" or "deny"
	Problem string `toml:"problem"` // deny: "unauthorized" (the default) or "rejectedIdentifier"
	Message string `toml:"message"` // deny: what the client is told
}

// The kinds, and the keys each takes besides kind.
var kindKeys = map[string][]string{
	"cidr":        {"ranges"},
	"rdns":        {"allow", "deny", "forward_confirm", "resolvers", "cache_seconds", "timeout_ms"},
	"identifiers": {"allow", "deny", "regex", "ip_ranges", "deny_ip_ranges", "profiles"},
	"eab":         {"key_ids", "key_labels"},
	"hook":        {"command", "env", "on", "timeout_ms"},
	"ipam":        {"source", "timeout_ms"},
}

// Defaults of the time budgets and the rdns cache.
const (
	DefaultRDNSTimeoutMS = 1000
	DefaultHookTimeoutMS = 2000
	DefaultIPAMTimeoutMS = 2000
	DefaultCacheSeconds  = 300
	DefaultHeader        = "X-Forwarded-For"
)

// Problems a deny rule may answer with.
const (
	ProblemUnauthorized       = "unauthorized"
	ProblemRejectedIdentifier = "rejectedIdentifier"
)

// Enabled reports whether the configuration asks for any check at all.
func (c Config) Enabled() bool { return len(c.Rules) > 0 || c.Default == "deny" }

// keysSet are the keys of c set in the file, besides kind.
func (c Check) keysSet() []string {
	var out []string
	add := func(key string, set bool) {
		if set {
			out = append(out, key)
		}
	}
	add("ranges", len(c.Ranges) > 0)
	add("allow", len(c.Allow) > 0)
	add("deny", len(c.Deny) > 0)
	add("forward_confirm", c.ForwardConfirm != nil)
	add("resolvers", len(c.Resolvers) > 0)
	add("cache_seconds", c.CacheSeconds != 0)
	add("regex", len(c.Regex) > 0)
	add("ip_ranges", len(c.IPRanges) > 0)
	add("deny_ip_ranges", len(c.DenyIPRanges) > 0)
	add("profiles", len(c.Profiles) > 0)
	add("key_ids", len(c.KeyIDs) > 0)
	add("key_labels", len(c.KeyLabels) > 0)
	add("command", len(c.Command) > 0)
	add("env", len(c.Env) > 0)
	add("on", c.On != "")
	add("source", c.Source != ipam.Config{})
	add("timeout_ms", c.TimeoutMS != 0)
	return out
}

// Validate reports every problem of [access], each naming its key.
func (c Config) Validate() error {
	var p problems
	switch c.Mode {
	case "", "enforce", "warn":
	default:
		p.add("access.mode", "must be \"enforce\" or \"warn\", got %q", c.Mode)
	}
	switch c.Default {
	case "", "allow", "deny":
	default:
		p.add("access.default", "must be \"allow\" or \"deny\", got %q", c.Default)
	}
	if _, err := parsePrefixes("access.trusted_proxies", c.TrustedProxies); err != nil {
		p.errs = append(p.errs, err)
	}
	if h := c.ForwardedHeader; h != "" && !httpguts.ValidHeaderFieldName(h) {
		p.add("access.forwarded_header", "%q is not a header name", h)
	}
	validResolvers(&p, "access.resolvers", c.Resolvers)
	for _, name := range slices.Sorted(maps.Keys(c.Checks)) {
		c.validateCheck(&p, name, c.Checks[name])
	}
	for i, r := range c.Rules {
		c.validateRule(&p, i, r)
	}
	return p.join()
}

func (c Config) validateCheck(p *problems, name string, ch Check) {
	key := "access.checks." + name
	if !checkName.MatchString(name) || keyword(name) {
		p.add(key, "a check's name is letters, digits, '_' and '-', starting with a letter, and not and, or or not")
	}
	allowed, ok := kindKeys[ch.Kind]
	if !ok {
		p.add(key+".kind", "unknown kind %q; use one of %s", ch.Kind, strings.Join(slices.Sorted(maps.Keys(kindKeys)), ", "))
		return
	}
	for _, k := range ch.keysSet() {
		if !slices.Contains(allowed, k) {
			p.add(key+"."+k, "is not a setting of kind %s (it takes %s)", ch.Kind, strings.Join(allowed, ", "))
		}
	}
	if ch.TimeoutMS < 0 || ch.TimeoutMS > 60_000 {
		p.add(key+".timeout_ms", "must be 1 to 60000 (0: the default)")
	}
	switch ch.Kind {
	case "cidr":
		if len(ch.Ranges) == 0 {
			p.add(key+".ranges", "a cidr check needs at least one range")
		}
		if _, err := parsePrefixes(key+".ranges", ch.Ranges); err != nil {
			p.errs = append(p.errs, err)
		}
	case "rdns":
		c.validateRDNS(p, key, ch)
	case "identifiers":
		validateIdentifiers(p, key, ch)
	case "hook":
		validateHook(p, key, ch)
	case "ipam":
		if err := ch.Source.Validate(); err != nil {
			for _, e := range joined(err) {
				p.errs = append(p.errs, fmt.Errorf("%s.source.%w", key, e))
			}
		}
	}
}

// joined are the errors errors.Join made err of, or err alone.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func (c Config) validateRDNS(p *problems, key string, ch Check) {
	validGlobs(p, key+".allow", ch.Allow)
	validGlobs(p, key+".deny", ch.Deny)
	validResolvers(p, key+".resolvers", ch.Resolvers)
	if len(ch.Resolvers) == 0 && len(c.Resolvers) == 0 {
		p.add(key+".resolvers", "an rdns check needs DNS resolvers (host:port), here or in access.resolvers; it never asks the system's")
	}
	if ch.CacheSeconds < 0 || ch.CacheSeconds > 86400 {
		p.add(key+".cache_seconds", "must be 0 to 86400 (0: the default, %d)", DefaultCacheSeconds)
	}
}

func validateIdentifiers(p *problems, key string, ch Check) {
	validGlobs(p, key+".allow", ch.Allow)
	validGlobs(p, key+".deny", ch.Deny)
	for _, r := range ch.Regex {
		if _, err := regexp.Compile(r); err != nil {
			p.add(key+".regex", "%q is not a regular expression (RE2): %v", r, err)
		}
	}
	for _, k := range []struct {
		key string
		in  []string
	}{{key + ".ip_ranges", ch.IPRanges}, {key + ".deny_ip_ranges", ch.DenyIPRanges}} {
		if _, err := parsePrefixes(k.key, k.in); err != nil {
			p.errs = append(p.errs, err)
		}
	}
}

func validateHook(p *problems, key string, ch Check) {
	if len(ch.Command) == 0 || ch.Command[0] == "" {
		p.add(key+".command", "a hook needs a command: the program and its arguments, e.g. [\"/usr/local/bin/may-ask\", \"--strict\"]")
	}
	switch ch.On {
	case "", "request", "account", "order":
	default:
		p.add(key+".on", "must be \"request\", \"account\" or \"order\", got %q", ch.On)
	}
	for _, k := range slices.Sorted(maps.Keys(ch.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(ch.Env[k], "\x00") {
			p.add(key+".env", "%q is not an environment variable name", k)
		}
	}
}

func (c Config) validateRule(p *problems, i int, r Rule) {
	key := fmt.Sprintf("access.rules[%d]", i)
	if strings.TrimSpace(r.When) == "" {
		p.add(key+".when", "a rule needs a condition over check names, e.g. \"office and not ptr\"")
	} else if e, err := parseExpr(r.When); err != nil {
		p.add(key+".when", "%v", err)
	} else {
		for _, n := range e.names(nil) {
			if _, ok := c.Checks[n]; !ok {
				p.add(key+".when", "names check %q, which is not in access.checks", n)
			}
		}
		if r.Problem == ProblemRejectedIdentifier && !c.needsOf(e).has(needIdentifiers) {
			p.add(key+".problem", "rejectedIdentifier needs identifiers, and this rule names no identifiers, ipam or order hook check: it would refuse newAccount and challenges with it too; use unauthorized")
		}
	}
	switch r.Action {
	case "allow":
		if r.Problem != "" || r.Message != "" {
			p.add(key+".action", "an allow rule takes no problem or message")
		}
	case "deny":
	default:
		p.add(key+".action", "must be \"allow\" or \"deny\", got %q", r.Action)
	}
	switch r.Problem {
	case "", ProblemUnauthorized, ProblemRejectedIdentifier:
	default:
		p.add(key+".problem", "must be %q or %q, got %q", ProblemUnauthorized, ProblemRejectedIdentifier, r.Problem)
	}
}

// needsOf is what the checks e names need of a request.
func (c Config) needsOf(e expr) need {
	var n need
	for _, name := range e.names(nil) {
		if ch, ok := c.Checks[name]; ok {
			n |= needsOfCheck(ch)
		}
	}
	return n
}

var checkName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

func validGlobs(p *problems, key string, in []string) {
	for _, g := range in {
		if err := validGlob(g); err != nil {
			p.add(key, "%q: %v", g, err)
		}
	}
}

func validResolvers(p *problems, key string, in []string) {
	for _, r := range in {
		host, port, err := net.SplitHostPort(r)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			p.add(key, "%q is not host:port (e.g. \"10.0.0.53:53\")", r)
		}
	}
}

// problems gathers a section's errors, each naming its key.
type problems struct{ errs []error }

func (p *problems) add(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

func (p *problems) join() error { return errors.Join(p.errs...) }
