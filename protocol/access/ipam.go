package access

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// NameSource says which DNS names an address carries, by an IPAM's
// records: lower case, without a trailing dot. An error is a source that
// could not answer; an address it does not know carries no names.
// ipam.Source is one (Options.IPAM builds it).
type NameSource interface {
	Names(ctx context.Context, addr netip.Addr) ([]string, error)
}

// ipamCheck: every identifier of the order is the client's, by the IPAM: a
// DNS name the IPAM says the client's address carries (exactly), the
// client's own address, or another address the IPAM gives one of the
// client's names (a VIP of the client's host).
type ipamCheck struct {
	src     NameSource
	timeout time.Duration
}

// errIPAMNotBuilt is the answer of an ipam check when the policy was built
// without Options.IPAM.
const errIPAMNotBuilt = "IPAM not built: this policy was built without an IPAM source (access.Options.IPAM)"

func newIPAMCheck(name string, c Check, opts Options) (checker, error) {
	timeout := time.Duration(orDefault(c.TimeoutMS, DefaultIPAMTimeoutMS)) * time.Millisecond
	if opts.IPAM == nil {
		return ipamCheck{timeout: timeout}, nil
	}
	src, err := opts.IPAM(name, c)
	if err != nil {
		return nil, err
	}
	return ipamCheck{src: src, timeout: timeout}, nil
}

func (c ipamCheck) check(ctx context.Context, f *Facts) Result {
	if c.src == nil {
		return Result{Answer: Unknown, Detail: errIPAMNotBuilt}
	}
	client := f.Client.Addr
	if !client.IsValid() {
		return Result{Answer: No, Detail: "the client's address is not known: " + f.Client.How}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var mine []string // the client's names, asked for once
	asked := false
	clientNames := func() ([]string, error) {
		if asked {
			return mine, nil
		}
		names, err := c.src.Names(ctx, client)
		if err != nil {
			return nil, err
		}
		mine, asked = normal(names), true
		return mine, nil
	}
	for _, id := range f.Identifiers {
		ok, why, err := c.owns(ctx, client, id, clientNames)
		if err != nil {
			return Result{Answer: Unknown, Detail: fmt.Sprintf("the IPAM did not answer (time budget %s): %v", c.timeout, err)}
		}
		if !ok {
			return Result{Answer: No, Detail: why}
		}
	}
	return Result{Answer: Yes, Detail: fmt.Sprintf("the IPAM gives %s every identifier", client)}
}

func (c ipamCheck) owns(ctx context.Context, client netip.Addr, id acme.Identifier, clientNames func() ([]string, error)) (bool, string, error) {
	switch id.Type {
	case acme.IdentifierDNS:
		mine, err := clientNames()
		if err != nil {
			return false, "", err
		}
		name := strings.ToLower(id.Value)
		if slices.Contains(mine, name) {
			return true, "", nil
		}
		return false, fmt.Sprintf("the IPAM does not give %s the name %s (it gives %s)", client, name, listOrNone(mine)), nil
	case acme.IdentifierIP:
		a, err := netip.ParseAddr(id.Value)
		if err != nil {
			return false, fmt.Sprintf("%q is not an address", id.Value), nil
		}
		if a.Unmap() == client {
			return true, "", nil
		}
		mine, err := clientNames()
		if err != nil {
			return false, "", err
		}
		theirs, err := c.src.Names(ctx, a.Unmap())
		if err != nil {
			return false, "", err
		}
		for _, n := range normal(theirs) {
			if slices.Contains(mine, n) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%s is not the client's address, and the IPAM gives it none of the client's names (%s)", a, listOrNone(mine)), nil
	}
	return false, fmt.Sprintf("identifier type %q is not one this check knows", id.Type), nil
}

func normal(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(n)), "."); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
