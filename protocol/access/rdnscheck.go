package access

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/access/rdns"
)

// rdnsCheck: the client's address has a PTR name that matches allow (any
// name, when allow is empty) and, by default, resolves back to the
// address; no PTR name of it, confirmed or not, matches deny.
type rdnsCheck struct {
	res         *rdns.Resolver
	allow, deny []string
	confirm     bool
	timeout     time.Duration
}

func newRDNSCheck(cfg Config, c Check) *rdnsCheck {
	servers := c.Resolvers
	if len(servers) == 0 {
		servers = cfg.Resolvers
	}
	confirm := c.ForwardConfirm == nil || *c.ForwardConfirm
	cache := time.Duration(orDefault(c.CacheSeconds, DefaultCacheSeconds)) * time.Second
	return &rdnsCheck{
		res:   rdns.New(servers, cache, confirm),
		allow: lower(c.Allow), deny: lower(c.Deny), confirm: confirm,
		timeout: time.Duration(orDefault(c.TimeoutMS, DefaultRDNSTimeoutMS)) * time.Millisecond,
	}
}

func (c *rdnsCheck) check(ctx context.Context, f *Facts) Result {
	a := f.Client.Addr
	if !a.IsValid() {
		return Result{Answer: No, Detail: "the client's address is not known: " + f.Client.How}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	names, err := c.res.Lookup(ctx, a)
	if err != nil {
		return Result{Answer: Unknown, Detail: fmt.Sprintf("the PTR lookup of %s failed (time budget %s): %v", a, c.timeout, err)}
	}
	for _, n := range names.All {
		if g, ok := c.matches(c.deny, n); ok {
			return Result{Answer: No, Detail: fmt.Sprintf("PTR name %s matches deny %q", n, g), PTR: n}
		}
	}
	if len(names.All) == 0 {
		return Result{Answer: No, Detail: fmt.Sprintf("%s has no PTR name", a)}
	}
	allowed := func(n string) bool { _, ok := c.matches(c.allow, n); return len(c.allow) == 0 || ok }
	if !c.confirm {
		if i := slices.IndexFunc(names.All, allowed); i >= 0 {
			return Result{Answer: Yes, Detail: fmt.Sprintf("PTR name %s (not forward-confirmed: forward_confirm is off)", names.All[i]), PTR: names.All[i]}
		}
		return Result{Answer: No, Detail: fmt.Sprintf("no PTR name of %s (%s) matches allow", a, strings.Join(names.All, ", ")), PTR: names.All[0]}
	}
	if i := slices.IndexFunc(names.Confirmed, allowed); i >= 0 {
		return Result{Answer: Yes, Detail: fmt.Sprintf("PTR name %s, forward-confirmed", names.Confirmed[i]), PTR: names.Confirmed[i]}
	}
	for _, n := range slices.Sorted(maps.Keys(names.Failed)) {
		if allowed(n) {
			return Result{Answer: Unknown, Detail: fmt.Sprintf("PTR name %s matches allow, but looking it up again failed: %s", n, names.Failed[n])}
		}
	}
	if i := slices.IndexFunc(names.Refuted, allowed); i >= 0 {
		return Result{Answer: No, Detail: fmt.Sprintf("PTR name %s does not resolve back to %s (forward confirmation)", names.Refuted[i], a), PTR: names.Refuted[i]}
	}
	return Result{Answer: No, Detail: fmt.Sprintf("no PTR name of %s (%s) matches allow", a, strings.Join(names.All, ", ")), PTR: names.All[0]}
}

func (c *rdnsCheck) matches(globs []string, name string) (string, bool) {
	for _, g := range globs {
		if matchName(g, name) {
			return g, true
		}
	}
	return "", false
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
