package storetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// testKey is a key's hash, as store.KeyHash would give it, for a name.
func testKey(name string) []byte {
	h := sha256.Sum256([]byte("key " + name))
	return h[:]
}

// issueKeyed stores a certificate with key hash key for a new ready order
// of a, by issuer, expiring at notAfter.
func issueKeyed(t *testing.T, s store.Store, a *store.Account, serial, issuer string, key []byte, notAfter time.Time) {
	t.Helper()
	issueDER(t, s, a, serial, issuer, []byte{0x30, 0x01}, key, notAfter)
}

// issueDER stores certificate der (key hash key, nil for none) for a new
// ready order of a, by issuer, expiring at notAfter.
func issueDER(t *testing.T, s store.Store, a *store.Account, serial, issuer string, der, key []byte, notAfter time.Time) {
	t.Helper()
	ctx := ctxT(t)
	o := readyOrder(t, s, a, serial+".keys.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), key); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
	}
	if err := s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: serial, IssuerID: issuer, DER: der, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		Names: []string{serial + ".keys.example.com"}, NotBefore: dbNow(t, s).Add(-2 * time.Hour), NotAfter: notAfter, SPKIHash: key,
	}}); err != nil {
		t.Fatalf("issuing %s: %v", serial, err)
	}
}

// testKeyCompromise: a revocation with reason keyCompromise, by each of
// Revoke, RevokeMany and RevokeRecorded, blocks the certificate's key and
// revokes the key's other unexpired, unrevoked certificates with reason 1
// in the same call: Hallmark's own with their CRL entries and their
// issuers' crl_generate jobs, a relay's by a signer_revoke job, each with
// an audit event naming the certificate that reported the key. The key's
// expired certificate, another key's certificate and a revocation with
// any other reason are left alone (CA/B Forum BR §4.9.1.1, §6.1.1.3).
func testKeyCompromise(t *testing.T, s store.Store, x Extras) {
	ev := store.AuditEvent{Actor: "acme:reporter", Action: "revoke", Detail: "via test"}
	for _, tc := range keyCompromiseCases(t, ev) {
		t.Run(tc.name, func(t *testing.T) {
			f := newKeyFamily(t, s, x)
			reporter := f.p + tc.reporter
			if err := tc.revoke(s, reporter, tc.reason); err != nil {
				t.Fatalf("revoking %s with reason %d: %v", reporter, tc.reason, err)
			}
			if tc.reason != store.ReasonKeyCompromise {
				f.notBlocked(t, tc)
				return
			}
			f.blocked(t, reporter, ev)
			f.siblingsRevoked(t, tc)
			f.audited(t, tc, reporter, ev)
		})
	}
}

// keyCompromiseCase is one way of revoking a certificate of the key.
type keyCompromiseCase struct {
	name     string
	reporter string // the certificate revoked: "a" (issuer-1) or "c" (relay:up)
	reason   int
	revoke   func(s store.Store, serial string, reason int) error
}

func keyCompromiseCases(t *testing.T, ev store.AuditEvent) []keyCompromiseCase {
	return []keyCompromiseCase{
		{"Revoke", "a", 1, func(s store.Store, serial string, reason int) error {
			_, err := s.Revoke(ctxT(t), serial, reason, ev)
			return err
		}},
		{"RevokeMany", "a", 1, func(s store.Store, serial string, reason int) error {
			_, err := s.RevokeMany(ctxT(t), []string{serial}, reason, ev)
			return err
		}},
		{"RevokeRecorded", "c", 1, func(s store.Store, serial string, reason int) error {
			return s.RevokeRecorded(ctxT(t), serial, reason, ev)
		}},
		// Queued for the relay's backend: the key is blocked now, not
		// when (or whether) the backend's answer is recorded.
		{"RevokeQueue", "c", 1, func(s store.Store, serial string, reason int) error {
			_, err := s.RevokeQueue(ctxT(t), serial, "default", reason, ev)
			return err
		}},
		{"Revoke superseded", "a", 4, func(s store.Store, serial string, reason int) error {
			_, err := s.Revoke(ctxT(t), serial, reason, ev)
			return err
		}},
		{"RevokeRecorded superseded", "c", 4, func(s store.Store, serial string, reason int) error {
			return s.RevokeRecorded(ctxT(t), serial, reason, ev)
		}},
	}
}

// keyFamily is one key's certificates (serials p+"a", "b" and "expired"
// by Hallmark's issuers, "c" by a relay) and another key's ("other"), with
// the signer_revoke and issuer-2 crl_generate jobs counted before.
type keyFamily struct {
	s            store.Store
	x            Extras
	ctx          context.Context
	p            string // the serials' prefix
	key, other   []byte
	remoteBefore int64
	crlBefore    int64
}

func newKeyFamily(t *testing.T, s store.Store, x Extras) keyFamily {
	p := rnd(6) + "-" // serials of this case
	f := keyFamily{s: s, x: x, ctx: ctxT(t), p: p, key: testKey(p), other: testKey(p + "other")}
	acct := newAccount(t, s)
	now := dbNow(t, s)
	live := now.Add(90 * 24 * time.Hour)
	issueKeyed(t, s, acct, p+"a", "issuer-1", f.key, live)
	issueKeyed(t, s, acct, p+"b", "issuer-2", f.key, live)
	issueKeyed(t, s, acct, p+"c", "relay:up", f.key, live)
	issueKeyed(t, s, acct, p+"expired", "issuer-2", f.key, now.Add(-time.Hour))
	issueKeyed(t, s, acct, p+"other", "issuer-2", f.other, live)
	f.remoteBefore = jobCount(t, x, jobs.KindSignerRevoke)
	f.crlBefore = f.issuer2CRLJobs(t)
	return f
}

func (f keyFamily) issuer2CRLJobs(t *testing.T) int64 {
	return f.x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+jobs.KindCRLGenerate+"' AND queue = '"+jobs.IssuerQueue("issuer-2")+"'")
}

// notBlocked: a revocation with another reason blocks nothing and
// revokes no sibling.
func (f keyFamily) notBlocked(t *testing.T, tc keyCompromiseCase) {
	if blocked, err := f.s.KeyBlockedBy(f.ctx, f.key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("KeyBlockedBy after a revocation with reason %d = %+v, %v; want ErrNotFound (only keyCompromise blocks)", tc.reason, blocked, err)
	}
	for _, sr := range []string{"a", "b", "c"} {
		if sr == tc.reporter {
			continue
		}
		if c, _ := f.s.CertificateBySerial(f.ctx, f.p+sr); c.RevokedAt != nil {
			t.Errorf("%s was revoked by a revocation of %s with reason %d", sr, tc.reporter, tc.reason)
		}
	}
}

// blocked: the key is blocked by the reporting certificate, and only it.
func (f keyFamily) blocked(t *testing.T, reporter string, ev store.AuditEvent) {
	blocked, err := f.s.KeyBlockedBy(f.ctx, f.key)
	if err != nil {
		t.Fatalf("KeyBlockedBy after a keyCompromise revocation: %v; want the key blocked", err)
	}
	if blocked.Serial != reporter || blocked.Actor != ev.Actor || !strings.Contains(blocked.Why, reporter) {
		t.Errorf("blocked key = %+v; want serial %s, actor %s and a why naming it", blocked, reporter, ev.Actor)
	}
	if _, err := f.s.KeyBlockedBy(f.ctx, f.other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("KeyBlockedBy(another key) = %v, want ErrNotFound", err)
	}
}

// siblingsRevoked: Hallmark's own siblings are revoked with reason 1 and
// listed by their issuer's next CRL; the relay's is asked of its backend.
func (f keyFamily) siblingsRevoked(t *testing.T, tc keyCompromiseCase) {
	queued := tc.name == "RevokeQueue" // the reporter waits on its backend
	wantRevoked := map[string]bool{"a": true, "b": true, "c": tc.reporter == "c" && !queued, "expired": false, "other": false}
	for sr, want := range wantRevoked {
		c, err := f.s.CertificateBySerial(f.ctx, f.p+sr)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.RevokedAt != nil; got != want || (got && c.RevocationReason != store.ReasonKeyCompromise) {
			t.Errorf("certificate %s: revoked=%v reason %d, want revoked=%v with reason 1", sr, got, c.RevocationReason, want)
		}
	}
	if n := f.x.Int(t, "SELECT count(*) FROM revocations WHERE serial = '"+f.p+"b' AND reason = 1"); n != 1 {
		t.Errorf("revocation rows of sibling b = %d, want 1 (its issuer's CRL lists it)", n)
	}
	if got := f.issuer2CRLJobs(t); got != f.crlBefore+1 {
		t.Errorf("crl_generate jobs of issuer-2 = %d, want %d (one for sibling b)", got, f.crlBefore+1)
	}
	if tc.reporter == "a" || queued {
		if n := jobCount(t, f.x, jobs.KindSignerRevoke); n != f.remoteBefore+1 {
			t.Errorf("signer_revoke jobs = %d, want %d (one for the relay's c)", n, f.remoteBefore+1)
		}
	}
}

// audited: one audit event per sibling, naming the reporter; one for the
// block.
func (f keyFamily) audited(t *testing.T, tc keyCompromiseCase, reporter string, ev store.AuditEvent) {
	events, _, err := f.s.AuditList(f.ctx, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range events {
		if !strings.HasPrefix(e.Subject, f.p) && e.Subject != (store.BlockedKey{SPKIHash: f.key}).Hex() {
			continue
		}
		switch e.Action {
		case store.ActionKeyRevoke:
			if !strings.Contains(e.Detail, reporter) || e.Actor != ev.Actor {
				t.Errorf("audit event %+v does not name the reporting certificate %s and its actor", e, reporter)
			}
			seen[strings.TrimPrefix(e.Subject, f.p)]++
		case store.ActionKeyBlock:
			seen["block"]++
		}
	}
	want := map[string]int{"block": 1, "a": 1, "b": 1, "c": 1}
	delete(want, tc.reporter)
	if len(seen) != len(want) {
		t.Errorf("audit events: %v, want %v", seen, want)
	}
	for k, n := range want {
		if seen[k] != n {
			t.Errorf("audit events: %v, want %v", seen, want)
			break
		}
	}
}

// testKeyBlocked: a blocked key is refused at the claim of a finalize
// (nothing moves: the order stays ready, no job is queued), reported by
// OrderToIssue for an order finalized before it was blocked, and
// KeyBlock of a key with no certificate of ours blocks it all the same;
// a second KeyBlock keeps the first report.
func testKeyBlocked(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	key := testKey(rnd(6))
	acct := newAccount(t, s)
	before := readyOrder(t, s, acct, "before.blocked.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, before.ID, before.Profile, []byte("csr"), key); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin before the block: claimed=%v err=%v", claimed, err)
	}

	res, err := s.KeyBlock(ctx, store.BlockedKey{SPKIHash: key, Why: "reported by a third party", Actor: "cli:alice"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Already || res.Key.Serial != "" || res.Key.Actor != "cli:alice" || res.Key.BlockedAt.IsZero() || len(res.Revoked)+len(res.Queued) != 0 {
		t.Errorf("KeyBlock = %+v; want a new block by cli:alice with nothing to revoke", res)
	}
	again, err := s.KeyBlock(ctx, store.BlockedKey{SPKIHash: key, Why: "again", Actor: "cli:bob"})
	if err != nil || !again.Already || again.Key.Actor != "cli:alice" {
		t.Errorf("KeyBlock again = %+v, %v; want Already, keeping cli:alice's report", again, err)
	}
	keysBlockedListed(t, s, key)
	ready := blockedKeyRefused(t, s, x, acct, key)

	ti, err := s.OrderToIssue(ctx, before.ID, 7*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ti.Blocked == nil || ti.Blocked.Type != acme.ProblemBadPublicKey || !strings.Contains(ti.Blocked.Detail, "generate a new key") {
		t.Errorf("OrderToIssue of an order whose key was blocked after its finalize: Blocked = %+v, want badPublicKey saying to generate a new key", ti.Blocked)
	}
	if ti, err := s.OrderToIssue(ctx, ready.ID, 7*time.Hour); err != nil || ti.Blocked != nil {
		t.Errorf("OrderToIssue of an order with a fresh key: Blocked = %+v, %v; want nil", ti.Blocked, err)
	}
	// A certificate signed for it anyway (the key blocked while it was
	// signed) is not stored: the swap requires the key unblocked, and the
	// order stays processing for the worker to fail.
	now := dbNow(t, s)
	err = s.OrderIssued(ctx, store.Issued{OrderID: before.ID, Certificate: store.Certificate{
		Serial: "blocked-" + rnd(6), IssuerID: "issuer-1", DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		Names: []string{"before.blocked.example.com"}, NotBefore: now, NotAfter: now.Add(time.Hour), SPKIHash: key,
	}})
	wantErr(t, "OrderIssued of an order whose key was blocked while it was signed", err, store.ErrUnauthorized)
	if o := order(t, s, before.ID); o.Status != acme.StatusProcessing || o.CertSerial != "" {
		t.Errorf("order after the refused store: %s with certificate %q, want processing with none", o.Status, o.CertSerial)
	}
}

// keysBlockedListed: the operator's list has the latest block first, each
// key once, bounded; key was blocked by cli:alice.
func keysBlockedListed(t *testing.T, s store.Store, key []byte) {
	ctx := ctxT(t)
	later := testKey(rnd(6))
	if _, err := s.KeyBlock(ctx, store.BlockedKey{SPKIHash: later, Why: "reported later", Actor: "cli:carol"}); err != nil {
		t.Fatal(err)
	}
	list, err := s.KeysBlocked(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, b := range list {
		if _, dup := pos[b.Hex()]; dup {
			t.Errorf("KeysBlocked lists %s twice", b.Hex())
		}
		pos[b.Hex()] = i
	}
	k1, ok1 := pos[(store.BlockedKey{SPKIHash: key}).Hex()]
	k2, ok2 := pos[(store.BlockedKey{SPKIHash: later}).Hex()]
	// Blocks within the clock's resolution tie; the list then orders them by key.
	tied := ok1 && ok2 && list[k1].BlockedAt.Equal(list[k2].BlockedAt)
	if !ok1 || !ok2 || (k2 > k1 && !tied) || list[k1].Actor != "cli:alice" {
		t.Errorf("KeysBlocked = %+v; want both keys, the later first, the first keeping cli:alice's report", list)
	}
	if one, err := s.KeysBlocked(ctx, 1); err != nil || len(one) != 1 {
		t.Errorf("KeysBlocked(1) = %d keys, %v; want 1", len(one), err)
	}
}

// blockedKeyRefused: a finalize with blocked key claims nothing and queues
// nothing; with a fresh key it claims the order, which it returns.
func blockedKeyRefused(t *testing.T, s store.Store, x Extras, acct *store.Account, key []byte) *store.Order {
	ctx := ctxT(t)
	ready := readyOrder(t, s, acct, "after.blocked.example.com")
	jobsBefore := jobCount(t, x, jobs.KindSignerIssue)
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, ready.ID, ready.Profile, []byte("csr"), key); err != nil || claimed {
		t.Errorf("OrderFinalizeBegin with a blocked key: claimed=%v err=%v; want not claimed", claimed, err)
	}
	if o := order(t, s, ready.ID); o.Status != acme.StatusReady {
		t.Errorf("order finalized with a blocked key is %s, want still ready", o.Status)
	}
	if got := jobCount(t, x, jobs.KindSignerIssue); got != jobsBefore {
		t.Errorf("signer_issue jobs = %d after a refused finalize, want %d", got, jobsBefore)
	}
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, ready.ID, ready.Profile, []byte("csr"), testKey("fresh")); err != nil || !claimed {
		t.Errorf("OrderFinalizeBegin with a new key: claimed=%v err=%v; want claimed", claimed, err)
	}
	return ready
}

// testKeySweep: a certificate stored after its key was blocked, which the
// block's own search could not see, is revoked with reason 1 by KeySweep,
// with its CRL job and an audit event; a relay's certificate stored before
// the block, whose backend was asked to revoke it by the block, is not
// asked again; a second sweep, and a sweep of a window the block is not
// in, do nothing. OrderIssued's swap refuses an order whose CSR key is
// blocked, so the late certificate here is one the swap cannot check: its
// order was finalized with no key hash (before migration 0012), as the
// truly concurrent race (the swap before the block commits, the insert
// after its search) leaves one too.
func testKeySweep(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	p := rnd(6) + "-"
	key := testKey(p)
	acct := newAccount(t, s)
	live := dbNow(t, s).Add(90 * 24 * time.Hour)
	issueKeyed(t, s, acct, p+"relay", "relay:up", key, live)
	// Finalized before the block, with no key hash on the order.
	racer := readyOrder(t, s, acct, p+"racer.keys.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, racer.ID, racer.Profile, []byte("csr"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
	}
	if _, err := s.KeyBlock(ctx, store.BlockedKey{SPKIHash: key, Why: "reported by a third party", Actor: "cli:alice"}); err != nil {
		t.Fatal(err)
	}
	// Stored after the block's search.
	now := dbNow(t, s)
	if err := s.OrderIssued(ctx, store.Issued{OrderID: racer.ID, Certificate: store.Certificate{
		Serial: p + "racer", IssuerID: "issuer-2", DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		Names: []string{p + "racer.keys.example.com"}, NotBefore: now.Add(-time.Hour), NotAfter: live, SPKIHash: key,
	}}); err != nil {
		t.Fatalf("storing the racing certificate: %v", err)
	}
	remoteBefore := jobCount(t, x, jobs.KindSignerRevoke)
	crl := "SELECT count(*) FROM river_job WHERE kind = '" + jobs.KindCRLGenerate + "' AND queue = '" + jobs.IssuerQueue("issuer-2") + "'"
	crlBefore := x.Int(t, crl)

	if r, err := s.KeySweep(ctx, now.Add(time.Hour), 0); err != nil || len(r.Revoked)+len(r.Queued) != 0 {
		t.Errorf("KeySweep of a window after the block = %+v, %v; want nothing", r, err)
	}
	r, err := s.KeySweep(ctx, now.Add(-time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Revoked) != 1 || r.Revoked[0].Serial != p+"racer" || len(r.Queued) != 0 {
		t.Errorf("KeySweep = %d revoked %v, %d queued; want the racing certificate revoked and the relay's not asked again", len(r.Revoked), r.Revoked, len(r.Queued))
	}
	if c, err := s.CertificateBySerial(ctx, p+"racer"); err != nil || c.RevokedAt == nil || c.RevocationReason != store.ReasonKeyCompromise {
		t.Errorf("the racing certificate after the sweep: %+v, %v; want revoked with reason 1", c, err)
	}
	if got := x.Int(t, crl); got <= crlBefore {
		t.Errorf("crl_generate jobs of issuer-2 = %d after the sweep, want more than %d", got, crlBefore)
	}
	if got := jobCount(t, x, jobs.KindSignerRevoke); got != remoteBefore {
		t.Errorf("signer_revoke jobs = %d after the sweep, want %d: the relay's certificate was asked for again", got, remoteBefore)
	}
	events, _, err := s.AuditList(ctx, store.Page{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	var audited bool
	for _, e := range events {
		audited = audited || (e.Action == store.ActionKeyRevoke && e.Subject == p+"racer" && e.Actor == "housekeeping")
	}
	if !audited {
		t.Errorf("no %s audit event by housekeeping for %sracer", store.ActionKeyRevoke, p)
	}
	if r, err := s.KeySweep(ctx, now.Add(-time.Hour), 0); err != nil || len(r.Revoked)+len(r.Queued) != 0 {
		t.Errorf("a second KeySweep = %+v, %v; want nothing left", r, err)
	}
}

// testKeyCompromiseAfterRevocation: RevokeForKeyCompromise, the report of
// key compromise for a certificate revoked already for another reason.
// Its reason becomes 1 with its revocation time kept, in its revocation
// row too (its issuer's next CRL, queued, lists it so), its key is blocked
// and the key's other certificates revoked, with its audit event. A second
// report, a certificate never revoked and a relay's certificate are
// refused and change nothing.
func testKeyCompromiseAfterRevocation(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	p := rnd(6) + "-"
	key := testKey(p)
	acct := newAccount(t, s)
	live := dbNow(t, s).Add(90 * 24 * time.Hour)
	issueKeyed(t, s, acct, p+"a", "issuer-1", key, live)
	issueKeyed(t, s, acct, p+"b", "issuer-2", key, live)
	issueKeyed(t, s, acct, p+"never", "issuer-1", testKey(p+"never"), live)
	issueKeyed(t, s, acct, p+"relay", "relay:up", testKey(p+"relay"), live)
	first, err := s.Revoke(ctx, p+"a", 4, store.AuditEvent{Actor: "acme:subscriber", Action: "revoke", Subject: p + "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeRecorded(ctx, p+"relay", 4, store.AuditEvent{Actor: "acme:subscriber", Action: "revoke", Subject: p + "relay"}); err != nil {
		t.Fatal(err)
	}
	crlBefore := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+jobs.KindCRLGenerate+"' AND queue = '"+jobs.IssuerQueue("issuer-1")+"'")

	ev := store.AuditEvent{Actor: "acme:certificate-key", Action: "revoke.key_compromise", Subject: p + "a", Detail: "reason 1 replacing reason 4"}
	got, err := s.RevokeForKeyCompromise(ctx, p+"a", ev)
	if err != nil {
		t.Fatalf("RevokeForKeyCompromise of a certificate revoked with reason 4: %v", err)
	}
	if got.RevocationReason != store.ReasonKeyCompromise || got.RevokedAt == nil || !got.RevokedAt.Equal(*first.RevokedAt) {
		t.Errorf("after RevokeForKeyCompromise: reason %d, revoked at %v; want reason 1 at the first revocation's time %v", got.RevocationReason, got.RevokedAt, first.RevokedAt)
	}
	revs, err := s.Revocations(ctx, "issuer-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs {
		if r.Serial == p+"a" && (r.Reason != store.ReasonKeyCompromise || !r.RevokedAt.Equal(*first.RevokedAt)) {
			t.Errorf("revocation row %+v; want reason 1 at %v, as the next CRL must list it", r, first.RevokedAt)
		}
	}
	if n := x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+jobs.KindCRLGenerate+"' AND queue = '"+jobs.IssuerQueue("issuer-1")+"'"); n != crlBefore+1 {
		t.Errorf("crl_generate jobs of issuer-1 = %d, want %d: the CRL listing reason 4 must be signed again", n, crlBefore+1)
	}
	if b, err := s.KeyBlockedBy(ctx, key); err != nil || b.Serial != p+"a" {
		t.Errorf("KeyBlockedBy = %+v, %v; want the key blocked, reported by %sa", b, err, p)
	}
	if c, err := s.CertificateBySerial(ctx, p+"b"); err != nil || c.RevokedAt == nil || c.RevocationReason != store.ReasonKeyCompromise {
		t.Errorf("the key's other certificate: %+v, %v; want it revoked with reason 1", c, err)
	}
	if n := x.Int(t, "SELECT count(*) FROM audit_events WHERE action = 'revoke.key_compromise' AND subject = '"+p+"a'"); n != 1 {
		t.Errorf("audit events of the report = %d, want 1", n)
	}

	for serial, why := range map[string]string{
		p + "a":     "revoked with reason keyCompromise already",
		p + "never": "not revoked",
	} {
		if _, err := s.RevokeForKeyCompromise(ctx, serial, ev); !errors.Is(err, store.ErrConflict) {
			t.Errorf("RevokeForKeyCompromise of %s (%s) = %v, want ErrConflict", serial, why, err)
		}
	}
	if _, err := s.RevokeForKeyCompromise(ctx, p+"relay", ev); err == nil {
		t.Error("RevokeForKeyCompromise of a relay's certificate succeeded; its backend keeps its reason")
	}
	if c, _ := s.CertificateBySerial(ctx, p+"relay"); c.RevocationReason != 4 {
		t.Errorf("the relay's certificate has reason %d after a refused report, want 4", c.RevocationReason)
	}
	if c, _ := s.CertificateBySerial(ctx, p+"never"); c.RevokedAt != nil {
		t.Error("a certificate never revoked was revoked by RevokeForKeyCompromise")
	}
	if n := x.Int(t, "SELECT count(*) FROM audit_events WHERE action = 'revoke.key_compromise' AND subject LIKE '"+p+"%'"); n != 1 {
		t.Errorf("audit events after refused reports = %d, want still 1", n)
	}
}

// selfSigned is a certificate's DER for a new P-256 key, and its key hash.
func selfSigned(t *testing.T) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	h, err := store.CertKeyHash(der)
	if err != nil {
		t.Fatal(err)
	}
	return der, h
}

// testKeyHashBackfill: certificates stored before migration 0012 have no
// key hash, so a key blocked since did not find them. KeyHashBackfill
// hashes them, oldest first, a batch at a time, and revokes with reason 1
// those of a key blocked already; one whose DER does not parse leaves the
// list all the same; with none left, it hashes nothing.
func testKeyHashBackfill(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	live := dbNow(t, s).Add(30 * 24 * time.Hour)
	blockedDER, blockedKey := selfSigned(t)
	otherDER, otherKey := selfSigned(t)
	issueDER(t, s, a, "01d1", "issuer-1", blockedDER, nil, live) // stored before migration 0012: no key hash
	issueDER(t, s, a, "01d2", "relay:up", blockedDER, nil, live)
	issueDER(t, s, a, "01d3", "issuer-1", otherDER, nil, live)
	issueDER(t, s, a, "01d4", "issuer-1", []byte{0x30, 0x01}, nil, live)
	before := jobCount(t, x, jobs.KindSignerRevoke)

	// Blocked while they have no hash: the block's own search misses them.
	res, err := s.KeyBlock(ctx, store.BlockedKey{SPKIHash: blockedKey, Why: "reported by a third party", Actor: "cli:alice"})
	if err != nil || len(res.Revoked)+len(res.Queued) != 0 {
		t.Fatalf("KeyBlock = %+v, %v; want nothing found to revoke (no key hashes yet)", res, err)
	}

	hashed, r, err := s.KeyHashBackfill(ctx, 2)
	if err != nil || hashed != 2 {
		t.Fatalf("KeyHashBackfill(2) = %d, %v; want 2", hashed, err)
	}
	if len(r.Revoked) != 1 || r.Revoked[0].Serial != "01d1" || len(r.Queued) != 1 || r.Queued[0].Serial != "01d2" {
		t.Errorf("KeyHashBackfill revoked %v and queued %v; want 01d1 revoked and the relay's 01d2 queued for its backend", r.Revoked, r.Queued)
	}
	if c, err := s.CertificateBySerial(ctx, "01d1"); err != nil || c.RevokedAt == nil || c.RevocationReason != store.ReasonKeyCompromise || string(c.SPKIHash) != string(blockedKey) {
		t.Errorf("01d1 after the backfill: %+v, %v; want its key hash, revoked with reason 1", c, err)
	}
	if n := jobCount(t, x, jobs.KindSignerRevoke); n != before+1 {
		t.Errorf("signer_revoke jobs = %d, want %d (the relay's 01d2)", n, before+1)
	}

	hashed, r, err = s.KeyHashBackfill(ctx, 10)
	if err != nil || hashed != 2 || len(r.Revoked)+len(r.Queued) != 0 {
		t.Fatalf("KeyHashBackfill(10) = %d, %+v, %v; want the last 2 hashed and nothing revoked", hashed, r, err)
	}
	if c, err := s.CertificateBySerial(ctx, "01d3"); err != nil || c.RevokedAt != nil || string(c.SPKIHash) != string(otherKey) {
		t.Errorf("01d3 after the backfill: %+v, %v; want its key hash, not revoked", c, err)
	}
	if hashed, _, err := s.KeyHashBackfill(ctx, 10); err != nil || hashed != 0 {
		t.Errorf("KeyHashBackfill with none left = %d, %v; want 0 (the DER that does not parse is not read again)", hashed, err)
	}
	// A key blocked now finds them.
	res, err = s.KeyBlock(ctx, store.BlockedKey{SPKIHash: otherKey, Why: "reported", Actor: "cli:bob"})
	if err != nil || len(res.Revoked) != 1 || res.Revoked[0].Serial != "01d3" {
		t.Errorf("KeyBlock of the other key after the backfill = %+v, %v; want 01d3 revoked", res, err)
	}
}
