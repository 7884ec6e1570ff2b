package pkcs11

import (
	"sync"

	"github.com/ThalesGroup/crypto11"
)

// crypto11 initialises a module once per process and finalizes it when
// the last context on it closes; a token that went away (SoftHSM2's
// directory, a network HSM cut off) is seen again only by a module
// initialised afresh. Every Token open on one module (the mounted issuer,
// and each issuer a rotation loads on the same backend) is therefore one
// group: they open and close their contexts one at a time, and a Token
// that drops its context after a failure has every other one in the group
// drop its own, so that the module is finalized and the next signature,
// on any of them, initialises it again.
type group struct {
	mu      sync.Mutex // serialises opening and closing contexts on the module
	members map[*Token]struct{}
}

var (
	groupsMu sync.Mutex
	groups   = map[string]*group{}
)

// groupFor is the group of the module at path.
func groupFor(path string) *group {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	g, ok := groups[path]
	if !ok {
		g = &group{members: map[*Token]struct{}{}}
		groups[path] = g
	}
	return g
}

// release takes t's context from it, to be closed by the caller (under
// its group's lock); nil when it has none.
func (t *Token) release() *crypto11.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx := t.ctx
	t.ctx, t.key = nil, nil
	return ctx
}

// siblingsDrop releases the contexts of the group's other Tokens that have
// no signature hung on the token (closing one waits for those), for the
// caller to close with its own; the caller holds the group's lock.
func (t *Token) siblingsDrop() []*crypto11.Context {
	var out []*crypto11.Context
	for m := range t.grp.members {
		if m == t || m.hung.Load() > 0 {
			continue
		}
		if ctx := m.release(); ctx != nil {
			out = append(out, ctx)
		}
	}
	return out
}
