package revocation_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

func TestParseReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want revocation.Reason
		ok   bool
	}{
		{"0", revocation.Unspecified, true},
		{"unspecified", revocation.Unspecified, true},
		{"keyCompromise", revocation.KeyCompromise, true},
		{"key-compromise", revocation.KeyCompromise, true},
		{"KEY_COMPROMISE", revocation.KeyCompromise, true},
		{"4", revocation.Superseded, true},
		{"cessationOfOperation", revocation.CessationOfOperation, true},
		{"9", revocation.PrivilegeWithdrawn, true},
		{"affiliationchanged", revocation.AffiliationChanged, true},
		{"2", 0, false}, // cACompromise: about a CA, not a subscriber
		{"certificateHold", 0, false},
		{"7", 0, false},  // unused code
		{"8", 0, false},  // removeFromCRL: delta CRLs only
		{"10", 0, false}, // aACompromise
		{"-1", 0, false},
		{"sideways", 0, false},
	} {
		got, err := revocation.ParseReason(tc.in)
		if tc.ok != (err == nil) || (tc.ok && got != tc.want) {
			t.Errorf("ParseReason(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if !tc.ok && acme.AsError(err).Problem.Type != acme.ProblemBadRevocationReason {
			t.Errorf("ParseReason(%q) error %v is not badRevocationReason", tc.in, err)
		}
	}
	if s := revocation.Reason(7).String(); s != "reason(7)" {
		t.Errorf("Reason(7).String() = %q", s)
	}
}

// seed stores a certificate of profile on a fresh SQLite store, issued as
// that profile's backend records it: relay:<signer> for the relay profile,
// a key identifier for the others.
func seed(t *testing.T, profile string) (store.Store, *store.Certificate) {
	t.Helper()
	issuer := "iss"
	if p := profiles[profile]; p.Backend == "relay" {
		issuer = "relay:" + p.Signer
	}
	db, c := seedIssued(t, profile, issuer)
	return db.Store, c
}

// seedIssued is seed with the certificate's issuer id, returning the
// database for its queue too.
func seedIssued(t *testing.T, profile, issuer string) (*open.DB, *store.Certificate) {
	t.Helper()
	db := testdb.Open(t, "sqlite")
	a, err := db.Store.AccountCreate(context.Background(), &store.Account{KeyJWK: []byte(`{}`), Thumbprint: "tp", TermsAgreed: true})
	if err != nil {
		t.Fatal(err)
	}
	return db, issued(t, db.Store, a.ID, profile, issuer, "5e", "a.example.com")
}

// issued stores certificate serial for name, of profile and issuer, as the
// account's order's, through the store's issuance path.
func issued(t *testing.T, st store.Store, accountID, profile, issuer, serial, name string) *store.Certificate {
	t.Helper()
	ctx := context.Background()
	now, _ := st.Now(ctx)
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: name}
	o, err := st.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: accountID, Profile: profile, Expires: now.Add(time.Hour), Identifiers: []acme.Identifier{id},
		Authzs: []*store.Authorization{{Identifier: id, Expires: now.Add(time.Hour), Challenges: []store.Challenge{{Type: acme.ChallengeDNS01}}}}})

	if err != nil {
		t.Fatal(err)
	}
	az, _ := st.AuthzByID(ctx, o.AuthzIDs[0])
	if _, _, err := st.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: az.Challenges[0].ID, Status: acme.StatusValid}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{Serial: serial, IssuerID: issuer, Profile: profile,
		DER: []byte{0x30}, Names: []string{id.Value}, NotBefore: now, NotAfter: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	c, err := st.CertificateBySerial(ctx, serial)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var profiles = map[string]profile.Profile{"default": {Backend: "local"}, "hsm": {Backend: "pkcs11", Signer: "token"},
	"up": {Backend: "relay", Signer: "corp"}, "up2": {Backend: "relay", Signer: "corp"}, "hooks": {Backend: "custom", Signer: "hooks"}}

// TestRevokeLocal: the revocation is recorded at once with the audit event,
// and a second one is alreadyRevoked wrapping store.ErrConflict.
func TestRevokeLocal(t *testing.T) {
	t.Parallel()
	for _, profile := range []string{"default", "hsm", "removed-from-config"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, c := seed(t, profile)
			svc := revocation.New(st, profiles)
			res, err := svc.Revoke(ctx, revocation.Request{Serial: c.Serial, Reason: revocation.KeyCompromise, Actor: "cli:alice", Via: "hallmark revoke"})
			if err != nil || !res.Done || res.Remote || res.Certificate.RevokedAt == nil || res.Certificate.RevocationReason != 1 {
				t.Fatalf("Revoke = %+v, %v", res, err)
			}
			evs, _, _ := st.AuditList(ctx, store.Page{})
			if len(evs) != 1 || evs[0].Actor != "cli:alice" || evs[0].Action != revocation.ActionRevoke || evs[0].Subject != c.Serial || evs[0].Detail != "reason 1 (keyCompromise) via hallmark revoke" {
				t.Fatalf("audit = %+v", evs)
			}
			_, err = svc.Revoke(ctx, revocation.Request{Serial: c.Serial, Actor: "cli:alice"})
			if acme.AsError(err).Problem.Type != acme.ProblemAlreadyRevoked || !errors.Is(err, store.ErrConflict) {
				t.Fatalf("second Revoke: %v", err)
			}
			_, err = svc.Revoke(ctx, revocation.Request{Serial: "ffff", Actor: "cli:alice"})
			if !errors.Is(err, store.ErrNotFound) || acme.AsError(err).Problem.Type != acme.ProblemMalformed {
				t.Fatalf("Revoke of an unknown serial: %v", err)
			}
			_, err = svc.Revoke(ctx, revocation.Request{Serial: c.Serial, Reason: revocation.CertificateHold})
			if acme.AsError(err).Problem.Type != acme.ProblemBadRevocationReason {
				t.Fatalf("Revoke with certificateHold: %v", err)
			}
		})
	}
}

// TestRevokeFollowsTheIssuer: the backend that revokes a certificate is
// the one its issuer id names, whatever its profile names now. A relay's or
// custom backend's certificate is queued for signer_revoke on a profile that
// names that backend (its own when it still does), never recorded as a
// local revocation (a CRL job for "relay:corp" cannot be queued); one
// Hallmark signed is recorded for its issuer's CRL even when its profile
// now relays; a backend no profile names is refused with what to do.
func TestRevokeFollowsTheIssuer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, profile, issuer string
		backend               string
		queue                 string // the signer_revoke job's queue; "" for a local revocation
		err                   string
	}{
		{name: "relay, its profile", profile: "up2", issuer: "relay:corp", backend: "relay", queue: "profile_up2"},
		{name: "relay, profile removed", profile: "removed", issuer: "relay:corp", backend: "relay", queue: "profile_up"},
		{name: "relay, profile now local", profile: "default", issuer: "relay:corp", backend: "relay", queue: "profile_up"},
		{name: "custom, profile now relays", profile: "up", issuer: "custom:hooks", backend: "custom", queue: "profile_hooks"},
		{name: "local, profile now relays", profile: "up", issuer: "iss", backend: "local"},
		{name: "pkcs11", profile: "hsm", issuer: "iss", backend: "pkcs11"},
		{name: "relay no profile names", profile: "up", issuer: "relay:retired", backend: "relay", err: `add a profile with backend = "relay" and signer = "retired"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, c := seedIssued(t, tc.profile, tc.issuer)
			svc := revocation.New(db.Store, profiles)
			if b, r := svc.Backend(c), svc.Remote(c); b != tc.backend || r != store.RemoteIssuer(tc.issuer) {
				t.Errorf("Backend, Remote = %s, %v; want %s, %v", b, r, tc.backend, store.RemoteIssuer(tc.issuer))
			}
			res, err := svc.Revoke(ctx, revocation.Request{Serial: c.Serial, Reason: revocation.Superseded, Actor: "cli:alice"})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Revoke = %+v, %v; want an error containing %q", res, err, tc.err)
				}
				return
			}
			if err != nil || res.Backend != tc.backend || res.Remote != (tc.queue != "") || res.Done != (tc.queue == "") {
				t.Fatalf("Revoke = %+v, %v; want backend %s, queued on %q", res, err, tc.backend, tc.queue)
			}
			js, err := jobs.List(ctx, db.Queue, jobs.ListFilter{Kinds: []string{jobs.KindSignerRevoke}, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var queues []string
			for _, j := range js {
				queues = append(queues, j.Queue)
			}
			if want := []string{tc.queue}; tc.queue == "" && len(queues) != 0 || tc.queue != "" && !slices.Equal(queues, want) {
				t.Errorf("signer_revoke jobs on %v, want on %q", queues, tc.queue)
			}
			revs, err := db.Store.Revocations(ctx, tc.issuer)
			if err != nil || len(revs) != map[bool]int{true: 1}[tc.queue == ""] {
				t.Errorf("revocation rows of %s = %+v, %v; want one only for a local revocation", tc.issuer, revs, err)
			}
		})
	}
}

// TestRevokeRemote: a relay certificate is queued, not revoked; Wait sees
// the worker's outcome when it comes in time.
func TestRevokeRemote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, c := seed(t, "up")
	svc := revocation.New(st, profiles)
	res, err := svc.Revoke(ctx, revocation.Request{Serial: c.Serial, Reason: revocation.Superseded, Actor: "admin:bob"})
	if err != nil || !res.Remote || res.Done || res.Backend != "relay" || res.Certificate.RevokedAt != nil {
		t.Fatalf("Revoke with no wait = %+v, %v", res, err)
	}
	// The worker records the backend's answer a little later.
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = st.RevokeRecorded(ctx, c.Serial, 4, store.AuditEvent{Actor: "worker:test", Action: "revoke", Subject: c.Serial})
	}()
	start := time.Now()
	res, err = svc.Revoke(ctx, revocation.Request{Serial: c.Serial, Reason: revocation.Superseded, Actor: "admin:bob", Wait: 5 * time.Second})
	if err != nil || !res.Done || res.Certificate.RevokedAt == nil {
		t.Fatalf("Revoke with wait = %+v, %v", res, err)
	}
	t.Logf("remote outcome seen after %v", time.Since(start))
}

func TestSelect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, c := seed(t, "default")
	svc := revocation.New(st, profiles)
	for name, tc := range map[string]struct {
		t    revocation.Target
		n    int
		errs error
	}{
		"serial":          {revocation.Target{Serial: c.Serial}, 1, nil},
		"order":           {revocation.Target{OrderID: c.OrderID}, 1, nil},
		"account":         {revocation.Target{AccountID: c.AccountID}, 1, nil},
		"unknown serial":  {revocation.Target{Serial: "ab"}, 0, store.ErrNotFound},
		"unknown order":   {revocation.Target{OrderID: "nope"}, 0, store.ErrNotFound},
		"unknown account": {revocation.Target{AccountID: "nope"}, 0, store.ErrNotFound},
	} {
		got, err := selected(ctx, svc, tc.t, nil)
		if len(got) != tc.n || !errors.Is(err, tc.errs) {
			t.Errorf("%s: Select = %d certificates, %v", name, len(got), err)
		}
	}
	if _, err := selected(ctx, svc, revocation.Target{Serial: "a", OrderID: "b"}, nil); err == nil {
		t.Error("Select with two targets did not fail")
	}
	stop := errors.New("stop")
	if _, err := selected(ctx, svc, revocation.Target{AccountID: c.AccountID}, func(*store.Certificate) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Select whose each fails = %v, want that error", err)
	}
}

// selected is the serials Select passes to each, in order; then, when set,
// also runs then on each.
func selected(ctx context.Context, svc *revocation.Service, tg revocation.Target, then func(*store.Certificate) error) ([]string, error) {
	var out []string
	err := svc.Select(ctx, tg, func(c *store.Certificate) error {
		out = append(out, c.Serial)
		if then != nil {
			return then(c)
		}
		return nil
	})
	return out, err
}

// pageCounter is a store that records the pages of certificates asked for.
type pageCounter struct {
	revocation.Store
	pages []store.Page
}

func (p *pageCounter) CertificatesList(ctx context.Context, f store.CertFilter, pg store.Page) ([]*store.Certificate, string, error) {
	p.pages = append(p.pages, pg)
	return p.Store.CertificatesList(ctx, f, pg)
}

// TestSelectPages: a bulk selection of an account's certificates over more
// than one page passes each of them exactly once, newest first, and no
// other account's, also while each one is revoked as it comes (hallmark
// revoke --account); it reads pages of 1,000 (the store's most), not the
// lists' 50: one read for the seven here.
func TestSelectPages(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.Open(t, dialect)
			var accts [2]string
			for i := range accts {
				a, err := db.Store.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{}`), Thumbprint: fmt.Sprintf("tp%d", i), TermsAgreed: true})
				if err != nil {
					t.Fatal(err)
				}
				accts[i] = a.ID
			}
			var want []string // newest first
			for i := range 7 {
				serial := fmt.Sprintf("%02x", 0x10+i)
				issued(t, db.Store, accts[0], "default", "iss", serial, serial+".example.com")
				want = append([]string{serial}, want...)
			}
			issued(t, db.Store, accts[1], "default", "iss", "99", "other.example.com")
			for _, tc := range []struct {
				name   string
				page   int // 0: Select's own
				revoke bool
				limits []int // the pages read
			}{
				{name: "pages of 3", page: 3, limits: []int{3, 3, 3}},
				{name: "pages of 3, revoking each", page: 3, revoke: true, limits: []int{3, 3, 3}},
				{name: "pages of 7", page: 7, limits: []int{7}},
				{name: "Select's pages", limits: []int{1000}},
			} {
				pc := &pageCounter{Store: db.Store}
				svc := revocation.New(pc, profiles)
				if tc.page > 0 {
					revocation.SetSelectPage(svc, tc.page)
				}
				var then func(*store.Certificate) error
				if tc.revoke {
					then = func(c *store.Certificate) error {
						_, err := svc.Revoke(ctx, revocation.Request{Serial: c.Serial, Reason: revocation.Superseded, Actor: "cli:test"})
						return err
					}
				}
				got, err := selected(ctx, svc, revocation.Target{AccountID: accts[0]}, then)
				var limits []int
				for _, p := range pc.pages {
					limits = append(limits, p.Limit)
				}
				if err != nil || !slices.Equal(got, want) || !slices.Equal(limits, tc.limits) {
					t.Errorf("%s: Select = %v, %v, reading pages of %v; want %v, reading pages of %v", tc.name, got, err, limits, want, tc.limits)
				}
			}
			for _, serial := range want {
				if c, err := db.Store.CertificateBySerial(ctx, serial); err != nil || c.RevokedAt == nil {
					t.Errorf("certificate %s after revoking each: %+v, %v", serial, c, err)
				}
			}
		})
	}
}
