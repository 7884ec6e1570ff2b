package access

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// cidrCheck: the client's address lies in one of the ranges.
type cidrCheck struct{ ranges []netip.Prefix }

func (c cidrCheck) check(_ context.Context, f *Facts) Result {
	a := f.Client.Addr
	if !a.IsValid() {
		return Result{Answer: No, Detail: "the client's address is not known: " + f.Client.How}
	}
	for _, r := range c.ranges {
		if r.Contains(a) {
			return Result{Answer: Yes, Detail: fmt.Sprintf("%s is in %s", a, r)}
		}
	}
	return Result{Answer: No, Detail: fmt.Sprintf("%s is in none of the ranges", a)}
}

// identifiersCheck: every identifier of the order is allowed and none is
// denied, and the order's profile is one of profiles when they are set.
// With no allow list of any kind, every identifier not denied is allowed;
// with one, an identifier must match an entry of its own type.
type identifiersCheck struct {
	allow, deny   []string
	regex         []*regexp.Regexp
	ips, denyIPs  []netip.Prefix
	profiles      []string
	allowsAnyName bool
}

func newIdentifiersCheck(c Check) identifiersCheck {
	ch := identifiersCheck{allow: lower(c.Allow), deny: lower(c.Deny), profiles: c.Profiles}
	for _, r := range c.Regex {
		ch.regex = append(ch.regex, regexp.MustCompile(`^(?:`+r+`)$`))
	}
	ch.ips, _ = parsePrefixes("ip_ranges", c.IPRanges)
	ch.denyIPs, _ = parsePrefixes("deny_ip_ranges", c.DenyIPRanges)
	ch.allowsAnyName = len(ch.allow) == 0 && len(ch.regex) == 0 && len(ch.ips) == 0
	return ch
}

func (c identifiersCheck) check(_ context.Context, f *Facts) Result {
	if len(c.profiles) > 0 && !slices.Contains(c.profiles, f.Profile) {
		return Result{Answer: No, Detail: fmt.Sprintf("profile %q is not one of %s", f.Profile, strings.Join(c.profiles, ", "))}
	}
	for _, id := range f.Identifiers {
		if ok, why := c.allows(id); !ok {
			return Result{Answer: No, Detail: why}
		}
	}
	return Result{Answer: Yes, Detail: fmt.Sprintf("every identifier is allowed (%d)", len(f.Identifiers))}
}

func (c identifiersCheck) allows(id acme.Identifier) (bool, string) {
	switch id.Type {
	case acme.IdentifierDNS:
		name := strings.ToLower(id.Value)
		for _, g := range c.deny {
			if matchName(g, name) {
				return false, fmt.Sprintf("%s matches deny %q", name, g)
			}
		}
		if c.allowsAnyName {
			return true, ""
		}
		for _, g := range c.allow {
			if matchName(g, name) {
				return true, ""
			}
		}
		for _, r := range c.regex {
			if r.MatchString(name) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s matches no allowed pattern", name)
	case acme.IdentifierIP:
		a, err := netip.ParseAddr(id.Value)
		if err != nil {
			return false, fmt.Sprintf("%q is not an address", id.Value)
		}
		a = a.Unmap()
		for _, r := range c.denyIPs {
			if r.Contains(a) {
				return false, fmt.Sprintf("%s is in deny_ip_ranges %s", a, r)
			}
		}
		if c.allowsAnyName || slices.ContainsFunc(c.ips, func(r netip.Prefix) bool { return r.Contains(a) }) {
			return true, ""
		}
		return false, fmt.Sprintf("%s is in no allowed range", a)
	}
	return false, fmt.Sprintf("identifier type %q is not one this check knows", id.Type)
}

// eabCheck: the account was bound with an external account key, one of
// ids (when set) and with a label one of labels matches (when set). The
// key is read each time: an operator's change to it counts at once.
type eabCheck struct{ ids, labels []string }

func (c eabCheck) check(ctx context.Context, f *Facts) Result {
	if f.Account == nil || f.Account.EAB == nil {
		return Result{Answer: No, Detail: "no account signed the request"}
	}
	k, err := f.Account.EAB(ctx)
	if err != nil {
		return Result{Answer: Unknown, Detail: "reading the account's external account binding: " + err.Error()}
	}
	if k == nil {
		return Result{Answer: No, Detail: fmt.Sprintf("account %s has no external account binding", f.Account.ID)}
	}
	if len(c.ids) > 0 && !slices.Contains(c.ids, k.KeyID) {
		return Result{Answer: No, Detail: fmt.Sprintf("its binding key %s is not one of key_ids", k.KeyID)}
	}
	if len(c.labels) > 0 && !slices.ContainsFunc(c.labels, func(p string) bool { return wildcard(p, k.Label) }) {
		return Result{Answer: No, Detail: fmt.Sprintf("its binding key %s has label %q, which no key_labels pattern matches", k.KeyID, k.Label)}
	}
	return Result{Answer: Yes, Detail: fmt.Sprintf("bound with key %s (%q)", k.KeyID, k.Label)}
}

// parsePrefixes parses CIDR ranges; an IPv4-mapped range is its IPv4 range.
func parsePrefixes(key string, in []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for _, c := range in {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a CIDR range (e.g. \"10.0.0.0/8\", \"fd00::/8\")", key, c)
		}
		bits := pfx.Bits()
		if pfx.Addr().Is4In6() && bits >= 96 {
			bits -= 96
		}
		out = append(out, netip.PrefixFrom(pfx.Addr().Unmap(), bits).Masked())
	}
	return out, nil
}

// validGlob checks a name pattern: labels of letters, digits, '-', '_' and
// '*', a "*" label only leftmost.
func validGlob(g string) error {
	g = strings.TrimSuffix(strings.ToLower(g), ".")
	if g == "" {
		return fmt.Errorf("an empty pattern")
	}
	for i, l := range strings.Split(g, ".") {
		if l == "" {
			return fmt.Errorf("an empty label")
		}
		if l == "*" && i > 0 {
			return fmt.Errorf("a \"*\" label may only be the leftmost (\"*.corp.example\"); inside a label, \"*\" matches within it (\"web-*.corp.example\")")
		}
		if strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_*") != "" {
			return fmt.Errorf("label %q has a character no DNS name has", l)
		}
	}
	return nil
}

// matchName matches a lower-case DNS name, without a trailing dot, against
// a pattern: a leftmost "*" label stands for one or more labels, a "*"
// inside a label for any run of characters within it. A wildcard
// identifier "*.a.example" is the name it is written as.
func matchName(pattern, name string) bool {
	pattern = strings.TrimSuffix(pattern, ".")
	pl, nl := strings.Split(pattern, "."), strings.Split(name, ".")
	if pl[0] == "*" {
		pl = pl[1:]
		if len(nl) <= len(pl) {
			return false
		}
		nl = nl[len(nl)-len(pl):]
	}
	if len(pl) != len(nl) {
		return false
	}
	for i := range pl {
		if !wildcard(pl[i], nl[i]) {
			return false
		}
	}
	return true
}

// wildcard matches s against p, where "*" is any run of characters.
func wildcard(p, s string) bool {
	star := strings.IndexByte(p, '*')
	if star < 0 {
		return p == s
	}
	if !strings.HasPrefix(s, p[:star]) {
		return false
	}
	rest := p[star+1:]
	for i := star; i <= len(s); i++ {
		if wildcard(rest, s[i:]) {
			return true
		}
	}
	return false
}

func lower(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.TrimSuffix(strings.ToLower(s), ".")
	}
	return out
}
