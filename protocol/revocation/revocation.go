package revocation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/store"
)

// ActionRevoke is the audit action of a revocation (recorded or queued);
// ActionRevokeAgain of a revoked certificate's reason made keyCompromise.
const (
	ActionRevoke      = "revoke"
	ActionRevokeAgain = "revoke.key_compromise"
)

// poll is how often a relay/custom revocation's outcome is checked while
// waiting for it.
const poll = 100 * time.Millisecond

// Store is what revocation needs of the store.
type Store interface {
	CertificateBySerial(ctx context.Context, serial string) (*store.Certificate, error)
	CertificatesList(ctx context.Context, f store.CertFilter, p store.Page) ([]*store.Certificate, string, error)
	OrderByID(ctx context.Context, id string) (*store.Order, error)
	AccountByID(ctx context.Context, id string) (*store.Account, error)
	Revoke(ctx context.Context, serial string, reason int, ev store.AuditEvent) (*store.Certificate, error)
	RevokeForKeyCompromise(ctx context.Context, serial string, ev store.AuditEvent) (*store.Certificate, error)
	KeyBlock(ctx context.Context, k store.BlockedKey) (store.KeyBlockResult, error)
	RevokeMany(ctx context.Context, serials []string, reason int, ev store.AuditEvent) ([]*store.Certificate, error)
	RevokeQueue(ctx context.Context, serial, profile string, reason int, ev store.AuditEvent) (int64, error)
	RevokeProgress(ctx context.Context, serial string, jobID int64) (store.RevokeProgress, error)
}

// ErrRefused is the cause of the *acme.Error Revoke returns when the
// issuing relay or custom backend refused: the certificate is not revoked.
// The error's problem is the backend's type (unauthorized, malformed,
// badRevocationReason...) with a detail quoting its reason.
var ErrRefused = errors.New("the issuing backend refused the revocation")

// selectPage is how many of an account's certificates Select reads in one
// transaction: the most a store returns in a page. At the lists' 50 a bulk
// revocation of a 20,000-certificate account was 400 transactions of
// selecting; at 1,000 it is 20, and Select holds one page (DER and chain
// included: a few MB) however many certificates the account has. Any page
// of an account is one range of certificates_account_idx
// (TestFleetListPlans).
const selectPage = 1000

// Service revokes certificates. It is safe for concurrent use.
type Service struct {
	st       Store
	profiles map[string]profile.Profile
	page     int // selectPage; smaller in tests
}

// New builds the service over st; profiles ([profiles] of the configuration) say
// which backend issued a certificate of each profile.
func New(st Store, profiles map[string]profile.Profile) *Service {
	return &Service{st: st, profiles: profiles, page: selectPage}
}

// Request is one revocation.
type Request struct {
	Serial string // lower-case hex, as the store keeps it
	Reason Reason
	// Actor is who asks, for the audit log: "acme:<account id>",
	// "acme:certificate-key", "cli:<os user>", "admin:<user>".
	Actor string
	// Via says through what, for the audit detail: "ACME revokeCert",
	// "hallmark revoke", "admin panel".
	Via string
	// Wait bounds how long Revoke waits for a relay/custom backend to
	// confirm; 0 returns as soon as the job is queued.
	Wait time.Duration
}

// Result is what a revocation did.
type Result struct {
	// Certificate is the certificate as it stands after the call.
	Certificate *store.Certificate
	// Backend is the backend of the certificate's profile ("local" when
	// the profile is no longer configured: its issuer was ours).
	Backend string
	// Remote is true for relay/custom backends: a signer_revoke job was
	// queued and the backend revokes it.
	Remote bool
	// Done is true once the revocation is recorded: always for local
	// backends (the next CRL, queued in the same transaction, will list
	// it); for remote ones when the worker confirmed within Wait.
	Done bool
	// KeyReported is true when the request reported the key of a
	// certificate revoked already for another reason compromised, and the
	// key was blocked (ReportsKey); for a relay's or custom backend's
	// certificate the error is still alreadyRevoked.
	KeyReported bool
}

// Backend names the backend that issued c. Its issuer id says so for a
// relay or custom backend (relay:<name>, custom:<name>); otherwise Hallmark
// signed it with a key it holds, and its profile says which kind ("local"
// when the profile was removed, or now names a relay or custom backend:
// profiles change, the certificate's issuer does not).
func (s *Service) Backend(c *store.Certificate) string {
	if kind, _, ok := remoteIssuer(c.IssuerID); ok {
		return kind
	}
	if p, ok := s.profiles[c.Profile]; ok && p.Backend == "pkcs11" {
		return p.Backend
	}
	return "local"
}

// Remote reports whether c's backend revokes it itself (relay, custom)
// rather than Hallmark recording the revocation for its own CRL. The issuer
// id decides, not the profile: a relay's certificate whose profile was
// removed still has no CRL here, and a revocation row for it would queue a
// crl_generate job no worker can run.
func (s *Service) Remote(c *store.Certificate) bool {
	return store.RemoteIssuer(c.IssuerID)
}

// remoteIssuer splits a relay's or custom backend's issuer id into the
// backend kind and its [backends.<name>].
func remoteIssuer(issuerID string) (kind, name string, ok bool) {
	if !store.RemoteIssuer(issuerID) {
		return "", "", false
	}
	kind, name, _ = strings.Cut(issuerID, ":")
	return kind, name, true
}

// queueProfile names the profile whose queue c's signer_revoke job goes to:
// a worker mounts a backend by profile. Its own profile when that still
// names the backend that issued it, else the first profile (by name) that
// does; none is an error saying what to configure.
func (s *Service) queueProfile(c *store.Certificate) (string, error) {
	kind, name, _ := remoteIssuer(c.IssuerID)
	same := func(p profile.Profile) bool { return p.Backend == kind && p.Signer == name }
	if p, ok := s.profiles[c.Profile]; ok && same(p) {
		return c.Profile, nil
	}
	all := make([]string, 0, len(s.profiles))
	for n := range s.profiles {
		all = append(all, n)
	}
	sort.Strings(all)
	for _, n := range all {
		if same(s.profiles[n]) {
			return n, nil
		}
	}
	return "", fmt.Errorf("certificate %s was issued by the %s backend %q, which no profile names any more, so no worker can ask it to revoke; add a profile with backend = %q and signer = %q (clients need not use it) and revoke again",
		c.Serial, kind, name, kind, name)
}

// Revoke revokes one certificate and writes the audit event in the same
// transaction. Errors a caller should show are *acme.Error:
// badRevocationReason; alreadyRevoked (wrapping store.ErrConflict);
// malformed "not issued by this CA" (wrapping store.ErrNotFound); the
// issuing backend's refusal, seen while waiting (wrapping ErrRefused). Any
// other error is the store's, wrapped with what was being done.
func (s *Service) Revoke(ctx context.Context, r Request) (Result, error) {
	if err := r.Reason.Check(); err != nil {
		return Result{}, err
	}
	c, err := s.st.CertificateBySerial(ctx, r.Serial)
	if err != nil {
		return Result{}, certErr(r.Serial, err, "reading certificate")
	}
	res := Result{Certificate: c, Backend: s.Backend(c), Remote: s.Remote(c)}
	if c.RevokedAt != nil {
		if ReportsKey(r.Reason, c) {
			return s.keyCompromised(ctx, r, res)
		}
		return res, alreadyRevoked(c, store.ErrConflict)
	}
	ev := event(r, c.Serial, res)
	if !res.Remote {
		// local and pkcs11: Hallmark is the CA; the revocation row is the
		// revocation and the store queues the issuer's next CRL.
		got, err := s.st.Revoke(ctx, c.Serial, int(r.Reason), ev)
		if err != nil {
			return res, certErr(c.Serial, err, "recording the revocation of")
		}
		res.Certificate, res.Done = got, true
		return res, nil
	}
	profile, err := s.queueProfile(c)
	if err != nil {
		return res, err
	}
	jobID, err := s.st.RevokeQueue(ctx, c.Serial, profile, int(r.Reason), ev)
	if err != nil {
		return res, certErr(c.Serial, err, "queueing the revocation of")
	}
	return s.wait(ctx, res, jobID, r.Wait)
}

// ReportsKey reports whether revoking c with reason reports the key of
// c, revoked already for another reason, compromised: Revoke takes such a
// report (keyCompromised) instead of answering alreadyRevoked.
func ReportsKey(reason Reason, c *store.Certificate) bool {
	return c.RevokedAt != nil && reason == KeyCompromise && c.RevocationReason != store.ReasonKeyCompromise
}

// keyCompromised takes a report that the key of res.Certificate, revoked
// already for another reason, was compromised. The report is of the key,
// whatever the certificate's state (CA/B Forum BR §4.9.1.1 and §6.1.1.3):
// its key is blocked and its other certificates revoked. Hallmark's own
// certificate's reason becomes keyCompromise on its next CRL, its
// revocation time kept (Boulder re-revokes so); a relay's or custom
// backend's keeps the reason its backend recorded, which ACME gives no way
// to change, and the answer is alreadyRevoked saying what was done.
func (s *Service) keyCompromised(ctx context.Context, r Request, res Result) (Result, error) {
	c := res.Certificate
	if !res.Remote {
		ev := store.AuditEvent{Actor: r.Actor, Action: ActionRevokeAgain, Subject: c.Serial,
			Detail: fmt.Sprintf("reason %d (%s) replacing reason %d (%s)%s", int(r.Reason), r.Reason, c.RevocationReason, Reason(c.RevocationReason), via(r))}
		got, err := s.st.RevokeForKeyCompromise(ctx, c.Serial, ev)
		if err != nil {
			return res, certErr(c.Serial, err, "recording the key compromise of")
		}
		res.Certificate, res.Done, res.KeyReported = got, true, true
		return res, nil
	}
	h, err := store.CertKeyHash(c.DER)
	if err != nil {
		return res, fmt.Errorf("reading the key of certificate %s: %w", c.Serial, err)
	}
	blocked, err := s.st.KeyBlock(ctx, store.BlockedKey{SPKIHash: h, Serial: c.Serial, Actor: r.Actor,
		Why: fmt.Sprintf("the report of key compromise for certificate %s (revoked already by its %s backend with reason %d)%s", c.Serial, res.Backend, c.RevocationReason, via(r))})
	if err != nil {
		return res, fmt.Errorf("blocking the key of certificate %s: %w", c.Serial, err)
	}
	res.KeyReported = true
	return res, &acme.Error{Problem: acme.Problem{Type: acme.ProblemAlreadyRevoked,
		Detail: fmt.Sprintf("certificate %s was already revoked at %s by its %s backend with reason %d (%s), which that backend keeps; its key is now blocked and its %d other unexpired certificate(s) revoked",
			c.Serial, c.RevokedAt.UTC().Format(time.RFC3339), res.Backend, c.RevocationReason, Reason(c.RevocationReason), len(blocked.Revoked)+len(blocked.Queued))}, Cause: store.ErrConflict}
}

// via is " via <r.Via>" for an audit detail, or "".
func via(r Request) string {
	if r.Via == "" {
		return ""
	}
	return " via " + r.Via
}

// event is the audit event of r's revocation of serial: the reason, the
// path it came by and, for a relay/custom backend, that it was queued.
func event(r Request, serial string, res Result) store.AuditEvent {
	detail := fmt.Sprintf("reason %d (%s)", int(r.Reason), r.Reason) + via(r)
	if res.Remote {
		detail += "; queued for the " + res.Backend + " backend"
	}
	return store.AuditEvent{Actor: r.Actor, Action: ActionRevoke, Subject: serial, Detail: detail}
}

// wait polls until the worker records the backend's answer to job jobID
// (this request's, or the outstanding one it joined), wait runs out or ctx
// ends; running out is not an error (Done stays false). Only this job's
// refusal counts: an older job's was the backend's answer then, and this
// request has asked it again.
func (s *Service) wait(ctx context.Context, res Result, jobID int64, wait time.Duration) (Result, error) {
	deadline := time.Now().Add(wait)
	serial := res.Certificate.Serial
	for {
		p, err := s.st.RevokeProgress(ctx, serial, jobID)
		if err != nil {
			if ctx.Err() != nil {
				return res, nil
			}
			return res, fmt.Errorf("checking the revocation of certificate %s: %w", serial, err)
		}
		if p.Revoked {
			// Read once, for the caller's view of it (the revocation time).
			cur, err := s.st.CertificateBySerial(ctx, serial)
			if err != nil {
				return res, fmt.Errorf("reading revoked certificate %s: %w", serial, err)
			}
			res.Certificate, res.Done = cur, true
			return res, nil
		}
		if p.Refused != nil {
			return res, refused(serial, res.Backend, *p.Refused)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, nil
		case <-time.After(min(left, poll)):
		}
	}
}

// refused is the error a caller shows for backend's refusal p: its problem
// type, so an ACME client learns what the backend objected to, and a detail
// naming the backend and quoting it. A type with no HTTP status of its own
// (a hook may answer any) is a refusal all the same: 403, never a 5xx
// that tells the client to try again later.
func refused(serial, backend string, p acme.Problem) error {
	why := p.Detail
	if why == "" {
		why = "it gave no reason"
	}
	out := acme.Problem{Type: p.Type, Detail: fmt.Sprintf("refused by the %s backend: %s; certificate %s is not revoked, and a new request asks the backend again",
		backend, why, serial)}
	if out.HTTPStatus() >= http.StatusInternalServerError {
		out.Status = http.StatusForbidden
	}
	return &acme.Error{Problem: out, Cause: ErrRefused}
}

func certErr(serial string, err error, doing string) error {
	var ae *acme.Error
	switch {
	case errors.As(err, &ae):
		return err
	case errors.Is(err, store.ErrNotFound):
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed,
			Detail: fmt.Sprintf("certificate %s was not issued by this CA; check the serial", serial)}, Cause: err}
	case errors.Is(err, store.ErrConflict):
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemAlreadyRevoked,
			Detail: fmt.Sprintf("certificate %s is already revoked", serial)}, Cause: err}
	}
	return fmt.Errorf("%s certificate %s: %w", doing, serial, err)
}

func alreadyRevoked(c *store.Certificate, cause error) error {
	return &acme.Error{Problem: acme.Problem{Type: acme.ProblemAlreadyRevoked,
		Detail: fmt.Sprintf("certificate %s was already revoked at %s", c.Serial, c.RevokedAt.UTC().Format(time.RFC3339))}, Cause: cause}
}

// Target names the certificates an operator revokes: exactly one of a
// serial, an order (its certificate) or an account (every certificate it
// ordered).
type Target struct {
	Serial    string
	OrderID   string
	AccountID string
}

func (t Target) String() string {
	switch {
	case t.Serial != "":
		return "certificate " + t.Serial
	case t.OrderID != "":
		return "order " + t.OrderID
	}
	return "account " + t.AccountID
}

// Select calls each with every certificate t names, newest first, revoked
// ones included (a bulk revocation skips them; Revoke refuses them), and
// stops at the first error each returns, returning it. An account's
// certificates are read a page at a time, so memory holds one page however
// many the account has; each may revoke the certificate it is given, as the
// pages follow the certificates' insertion order, which revoking does not
// change. An unknown serial, order or account is a malformed *acme.Error
// wrapping store.ErrNotFound, before each is called; an order without a
// certificate names none.
func (s *Service) Select(ctx context.Context, t Target, each func(*store.Certificate) error) error {
	return s.SelectPages(ctx, t, func(page []*store.Certificate) error {
		for _, c := range page {
			if err := each(c); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Service) selectSerial(ctx context.Context, serial string, each func(*store.Certificate) error) error {
	c, err := s.st.CertificateBySerial(ctx, serial)
	if err != nil {
		return certErr(serial, err, "reading")
	}
	return each(c)
}

func (s *Service) selectOrder(ctx context.Context, id string, each func(*store.Certificate) error) error {
	o, err := s.st.OrderByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed,
			Detail: fmt.Sprintf("order %s does not exist; check the id", id)}, Cause: err}
	}
	if err != nil {
		return fmt.Errorf("reading order %s: %w", id, err)
	}
	if o.CertSerial == "" {
		return nil
	}
	return s.selectSerial(ctx, o.CertSerial, each)
}

// selectAccount follows the store's cursor through the account's
// certificates, a page of s.page at a time, calling each with each page.
func (s *Service) selectAccount(ctx context.Context, id string, each func([]*store.Certificate) error) error {
	if _, err := s.st.AccountByID(ctx, id); errors.Is(err, store.ErrNotFound) {
		return &acme.Error{Problem: acme.Problem{Type: acme.ProblemMalformed,
			Detail: fmt.Sprintf("account %s does not exist; check the id", id)}, Cause: err}
	} else if err != nil {
		return fmt.Errorf("reading account %s: %w", id, err)
	}
	p := store.Page{Limit: s.page}
	for {
		certs, next, err := s.st.CertificatesList(ctx, store.CertFilter{AccountID: id}, p)
		if err != nil {
			return fmt.Errorf("listing the certificates of account %s: %w", id, err)
		}
		if len(certs) > 0 {
			if err := each(certs); err != nil {
				return err
			}
		}
		if next == "" || len(certs) == 0 {
			return nil
		}
		p.After = next
	}
}
