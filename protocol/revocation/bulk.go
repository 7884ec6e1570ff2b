package revocation

import (
	"context"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// Outcome is what RevokeAll did with one certificate: Revoke's result and
// error for it.
type Outcome struct {
	Result
	Err error
}

// RevokeAll revokes certs (a page of Select's) as Revoke would each, with
// r's reason, actor, via and wait (r.Serial is not read), and returns one
// Outcome per certificate in certs' order, with the errors Revoke returns.
// The certificates Hallmark signed cost one transaction together
// (store RevokeMany: one crl_generate job per issuer, not per
// certificate); a relay's or custom backend's still go one at a time, as
// each must be asked of its backend. A certificate revoked already, or by
// someone else since it was read, is an alreadyRevoked error wrapping
// store.ErrConflict, its Certificate as it now stands; it is never revoked
// twice. With reason keyCompromise, one revoked already for another reason
// goes to Revoke, which records the report of its key.
func (s *Service) RevokeAll(ctx context.Context, certs []*store.Certificate, r Request) []Outcome {
	out := make([]Outcome, len(certs))
	if err := r.Reason.Check(); err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	var local []int // indexes of certs to revoke in one transaction
	for i, c := range certs {
		out[i].Result = Result{Certificate: c, Backend: s.Backend(c), Remote: s.Remote(c)}
		switch {
		case c.RevokedAt != nil && !ReportsKey(r.Reason, c):
			out[i].Err = alreadyRevoked(c, store.ErrConflict)
		case c.RevokedAt != nil, out[i].Remote:
			one := r
			one.Serial = c.Serial
			out[i].Result, out[i].Err = s.Revoke(ctx, one)
		default:
			local = append(local, i)
		}
	}
	s.revokeLocal(ctx, certs, local, r, out)
	return out
}

// revokeLocal revokes the certificates at idx of certs in one store call
// and records each one's outcome in out.
func (s *Service) revokeLocal(ctx context.Context, certs []*store.Certificate, idx []int, r Request, out []Outcome) {
	if len(idx) == 0 {
		return
	}
	serials := make([]string, len(idx))
	for j, i := range idx {
		serials[j] = certs[i].Serial
	}
	ev := event(r, "", Result{})
	got, err := s.st.RevokeMany(ctx, serials, int(r.Reason), ev)
	if err != nil {
		for _, i := range idx {
			out[i].Err = fmt.Errorf("recording the revocation of certificate %s (one of %d revoked together): %w", certs[i].Serial, len(idx), err)
		}
		return
	}
	revoked := make(map[string]*store.Certificate, len(got))
	for _, c := range got {
		revoked[c.Serial] = c
	}
	for _, i := range idx {
		if c, ok := revoked[certs[i].Serial]; ok {
			out[i].Certificate, out[i].Done = c, true
			continue
		}
		out[i].Certificate, out[i].Err = s.notRevoked(ctx, certs[i])
	}
}

// notRevoked says why RevokeMany left c alone: revoked by someone else
// since Select read it (alreadyRevoked, with when and why), or gone.
func (s *Service) notRevoked(ctx context.Context, c *store.Certificate) (*store.Certificate, error) {
	cur, err := s.st.CertificateBySerial(ctx, c.Serial)
	if err != nil {
		return c, certErr(c.Serial, err, "reading certificate")
	}
	if cur.RevokedAt == nil {
		return cur, fmt.Errorf("certificate %s was left unrevoked by a bulk revocation; run the command again", c.Serial)
	}
	return cur, alreadyRevoked(cur, store.ErrConflict)
}

// SelectPages is Select a page at a time: each is called with every page
// of certificates t names (of one certificate, for a serial or an order;
// never empty), so a caller can revoke a page in one transaction
// (RevokeAll). Its errors are Select's.
func (s *Service) SelectPages(ctx context.Context, t Target, each func([]*store.Certificate) error) error {
	n := 0
	for _, v := range []string{t.Serial, t.OrderID, t.AccountID} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return acme.Malformed("name exactly one of a serial, an order or an account to revoke")
	}
	one := func(c *store.Certificate) error { return each([]*store.Certificate{c}) }
	switch {
	case t.Serial != "":
		return s.selectSerial(ctx, t.Serial, one)
	case t.OrderID != "":
		return s.selectOrder(ctx, t.OrderID, one)
	}
	return s.selectAccount(ctx, t.AccountID, each)
}
