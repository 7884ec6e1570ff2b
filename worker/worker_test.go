package worker_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/sqlite"
	"github.com/hallmark-ca/hallmark/store/storetest"
	"github.com/hallmark-ca/hallmark/tests/testdb"
	"github.com/hallmark-ca/hallmark/tests/testdns"
	"github.com/hallmark-ca/hallmark/tests/testworker"
	"github.com/hallmark-ca/hallmark/worker"
	"github.com/hallmark-ca/hallmark/worker/notifysend"
)

// rig is a real store, a real local CA and a started worker.
type rig struct {
	st     store.Store
	db     *open.DB
	url    string // the database's URL
	path   string // the SQLite file, for SQL of a test's own
	mount  []string
	runner jobs.Runner // the first worker's
	cfg    worker.Config
	issuer *signer.Issuer
	dns    *testdns.Server
	// wrap, when set, is what the next workers started see of the store.
	wrap func(store.Store) store.Store
	// scheduled keeps the next workers' periodic and scheduled jobs, as
	// hallmark-worker runs them; otherwise tests queue what they check.
	scheduled bool
	// backends are relay or custom backends the workers mount, by
	// profile, instead of the rig's issuer.
	backends map[string]worker.Backend
	// log, when set, is the workers' logger.
	log *slog.Logger
	// notify, when set, delivers the notify_send jobs the store queues.
	notify jobs.Handler[jobs.NotifySendArgs]
}

type rigOpts struct {
	kind     string // "postgres", or SQLite ("" or "sqlite")
	httpPort int
	mount    []string // profiles this worker mounts; nil = all
	profiles map[string]profile.Profile
	backends map[string]worker.Backend
	// backendsOn, if set, builds the backends on the rig's store, for
	// those that keep records there (a relay journals its upstream
	// orders); it replaces backends.
	backendsOn func(st store.Store) map[string]worker.Backend
	// issuer, if set, is the rig's issuer instead of a new one: another
	// rig's, as a key kept when its database was not.
	issuer *signer.Issuer
	log    *slog.Logger // the workers' logger; nil: slog's default
	// notify, if set, is [notify]: the store queues its events and the
	// workers deliver them.
	notify *notify.Config
	// crlShards is ca.crl_shards; 0 is 1, so a test's CRL is shard 0's
	// (crl_shards_test.go tests more).
	crlShards int
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	url := testdb.SQLite(t)
	if o.kind == "postgres" {
		url = testdb.Postgres(t)
	}
	db := testdb.OpenURL(t, url)
	if o.backendsOn != nil {
		o.backends = o.backendsOn(db.Store)
	}

	dns := testdns.Start(t)
	cfg := testworker.Config(o.profiles, dns.Addr)
	cfg.Worker.ID = "test-worker"
	cfg.Challenge.HTTPPort = o.httpPort
	cfg.Challenge.TimeoutMS = 2000
	cfg.CA.URLBase = "http://127.0.0.1:1"
	cfg.CAAIdentities = []string{"hallmark.test"}
	cfg.Worker.JobTimeoutMS, cfg.Worker.RescueAfterMS = 5000, 30000
	cfg.CA.CRLShards = max(o.crlShards, 1)
	iss := o.issuer
	if iss == nil {
		iss = localIssuer(t, "Worker Test")
	}
	r := &rig{st: db.Store, db: db, url: url, path: strings.TrimPrefix(url, "sqlite:"), cfg: cfg, issuer: iss, dns: dns, mount: o.mount, backends: o.backends, log: o.log}
	if o.notify != nil {
		db.NotifyRoute(o.notify.Route)
		sender, err := notifysend.New(*o.notify, o.log)
		if err != nil {
			t.Fatal(err)
		}
		r.notify = sender.Handle
	}
	r.runner = r.startWorker(t, "test-worker", iss, 0)
	return r
}

// startWorker starts a worker named id over the rig's database, mounting
// iss for the rig's profiles; maxWorkers 0 takes worker.concurrency, as
// hallmark-worker does. The worker is stopped when the test ends.
func (r *rig) startWorker(t *testing.T, id string, iss *signer.Issuer, maxWorkers int) jobs.Runner {
	t.Helper()
	cfg := r.cfg
	cfg.Worker.ID = id
	issuers, backends := map[string]*signer.Issuer{}, map[string]worker.Backend{}
	for name := range cfg.Profiles {
		switch b, ok := r.backends[name]; {
		case ok:
			backends[name] = b
		case r.mount == nil || contains(r.mount, name):
			issuers[name] = iss
		}
	}
	st := r.db.Store
	if r.wrap != nil {
		st = r.wrap(st)
	}
	w, err := worker.New(cfg, st, worker.Options{Issuers: issuers, Backends: backends, Logger: r.log, Notify: r.notify})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := w.Registry()
	if err != nil {
		t.Fatal(err)
	}
	s := w.JobSettings()
	if maxWorkers > 0 {
		s.MaxWorkers = maxWorkers
	}
	if !r.scheduled {
		s.Periodic, s.Scheduled = nil, nil // the tests queue the jobs they check themselves
	}
	s.RetryBase, s.RetryMax = 50*time.Millisecond, 200*time.Millisecond
	runner, err := r.db.Queue.Start(context.Background(), reg, s)
	if err != nil {
		t.Fatalf("starting worker %s: %v", id, err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Stop(sctx)
	})
	return runner
}

// localIssuer is a fresh local CA (root and intermediate) named name.
func localIssuer(t *testing.T, name string) *signer.Issuer {
	t.Helper()
	dir := t.TempDir()
	if _, err := signer.InitLocal(dir, signer.CAOptions{Name: name, URLBase: "http://ca.test"}); err != nil {
		t.Fatal(err)
	}
	iss, err := signer.LoadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

// stopFirst stops the rig's first worker, for a test that starts the
// workers it needs itself.
func (r *rig) stopFirst(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.runner.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (r *rig) account(t *testing.T) *store.Account {
	t.Helper()
	a, err := r.st.AccountCreate(context.Background(), &store.Account{
		KeyJWK:     []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + strconv.FormatInt(time.Now().UnixNano(), 36) + `"}`),
		Thumbprint: "thumb-" + strconv.FormatInt(time.Now().UnixNano(), 36), TermsAgreed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (r *rig) order(t *testing.T, acct *store.Account, profile string, names ...string) *store.Order {
	t.Helper()
	return r.orderWith(t, store.NewOrder{AccountID: acct.ID, Profile: profile}, names...)
}

// orderWith creates no (its Expires set to an hour from now) for names,
// each with a pending http-01 authorization.
func (r *rig) orderWith(t *testing.T, no store.NewOrder, names ...string) *store.Order {
	t.Helper()
	now, _ := r.st.Now(context.Background())
	no.Expires = now.Add(time.Hour)
	for _, n := range names {
		id := acme.Identifier{Type: acme.IdentifierDNS, Value: n}
		no.Identifiers = append(no.Identifiers, id)
		no.Authzs = append(no.Authzs, &store.Authorization{Identifier: id, Expires: now.Add(time.Hour),
			Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}}})
	}
	o, err := r.st.OrderCreate(context.Background(), store.SignedUse{}, no)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// ready validates every authorization of o directly in the store.
func (r *rig) ready(t *testing.T, o *store.Order) {
	t.Helper()
	ctx := context.Background()
	for _, id := range o.AuthzIDs {
		az, err := r.st.AuthzByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ch := az.Challenges[0]
		if _, _, err := r.st.ChallengeClaim(ctx, store.SignedUse{}, ch.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: ch.ID, Status: acme.StatusValid}); err != nil {
			t.Fatal(err)
		}
	}
}

func csrFor(t *testing.T, key any, names ...string) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// waitOrder polls until the order leaves processing or the deadline passes.
func (r *rig) waitOrder(t *testing.T, id string, want acme.Status) *store.Order {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		o, err := r.st.OrderByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == want {
			return o
		}
		if o.Status != acme.StatusProcessing && o.Status != acme.StatusPending && o.Status != acme.StatusReady {
			t.Fatalf("order %s is %s (%+v), want %s", id, o.Status, o.Error, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s still %s after 20s, want %s", id, o.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// issued waits for order id to become valid and returns its certificate,
// as stored and as parsed.
func (r *rig) issued(t *testing.T, id string) (*store.Certificate, *x509.Certificate) {
	t.Helper()
	o := r.waitOrder(t, id, acme.StatusValid)
	c, err := r.st.CertificateBySerial(context.Background(), o.CertSerial)
	if err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(c.DER)
	if err != nil {
		t.Fatal(err)
	}
	return c, x
}

// TestIssue: a finalized order is signed with the order's names (never the
// CSR's beyond its key) and the chain verifies to the root.
func TestIssue(t *testing.T) {
	r := newRig(t, rigOpts{})
	acct := r.account(t)
	o := r.order(t, acct, "default", "a.worker.test", "b.worker.test")
	r.ready(t, o)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, claimed, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, "a.worker.test", "b.worker.test"), nil); err != nil || !claimed {
		t.Fatalf("finalize: %v %v", claimed, err)
	}
	c, x := r.issued(t, o.ID)
	if strings.Join(x.DNSNames, ",") != "a.worker.test,b.worker.test" {
		t.Fatalf("names %v", x.DNSNames)
	}
	if c.IssuerID != r.issuer.ID || !strings.Contains(string(c.ChainPEM), "BEGIN CERTIFICATE") {
		t.Fatalf("certificate row: issuer %s, chain %d bytes", c.IssuerID, len(c.ChainPEM))
	}
}

// TestRequestedNotBeforeAfterAWait: an order's requested notBefore is the
// certificate's, even when the order was finalized hours after it was
// placed (RFC 8555 §7.4: no other contents than requested), and an order
// that waited so long that keeping it would backdate the certificate more
// than 48 hours, or issue it already expired, fails with malformed rather
// than being issued with another notBefore.
func TestRequestedNotBeforeAfterAWait(t *testing.T) {
	p := profile.Default()
	p.AllowValidityRequest, p.ValidityHours = true, 7*24
	short := p
	short.ValidityHours = 24
	r := newRig(t, rigOpts{profiles: map[string]profile.Profile{"requestable": p, "requestable-short": short}})
	acct := r.account(t)
	now, err := r.st.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *time.Time { v := now.Add(d).Truncate(time.Second); return &v }
	tests := []struct {
		name, profile string
		notBefore     *time.Time
		notAfter      *time.Time
		wantProblem   string // a part of the order's error detail; "" for issued
	}{
		{name: "placed three hours ago", profile: "requestable", notBefore: at(-3 * time.Hour)},
		{name: "placed three hours ago with a notAfter", profile: "requestable", notBefore: at(-3 * time.Hour), notAfter: at(5 * time.Hour)},
		{name: "placed 49 hours ago", profile: "requestable", notBefore: at(-49 * time.Hour), wantProblem: "more than 48h0m0s before"},
		{name: "outlived the profile's validity", profile: "requestable-short", notBefore: at(-25 * time.Hour), wantProblem: "would already have expired"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("nb%d.worker.test", i)
			o := r.orderWith(t, store.NewOrder{AccountID: acct.ID, Profile: tc.profile, NotBefore: tc.notBefore, NotAfter: tc.notAfter}, name)
			r.ready(t, o)
			key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if _, claimed, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil || !claimed {
				t.Fatalf("finalize: %v %v", claimed, err)
			}
			if tc.wantProblem != "" {
				o = r.waitOrder(t, o.ID, acme.StatusInvalid)
				if o.Error == nil || o.Error.Type != acme.ProblemMalformed || !strings.Contains(o.Error.Detail, tc.wantProblem) {
					t.Fatalf("order error %+v, want malformed saying %q", o.Error, tc.wantProblem)
				}
				return
			}
			c, x := r.issued(t, o.ID)
			if !x.NotBefore.Equal(*tc.notBefore) || !c.NotBefore.Equal(*tc.notBefore) {
				t.Errorf("notBefore %v (row %v), want the requested %v", x.NotBefore, c.NotBefore, *tc.notBefore)
			}
			if tc.notAfter != nil && !x.NotAfter.Equal(*tc.notAfter) {
				t.Errorf("notAfter %v, want the requested %v", x.NotAfter, *tc.notAfter)
			}
		})
	}
}

// TestIssueRefusedKeyIsAVerdict: a CSR key the worker refuses makes the
// order invalid with badCSR — terminal, not retried — and nothing is
// signed: a key type the profile does not allow (a backstop: the frontend
// checks it too), and an ECDSA key with a tiny private scalar, which only
// the lint finds (before, the order failed with serverInternal, the CA's
// fault as far as the client could tell).
func TestIssueRefusedKeyIsAVerdict(t *testing.T) {
	p := profile.Default()
	p.KeyTypes = []string{"p256"}
	r := newRig(t, rigOpts{profiles: map[string]profile.Profile{"ecdsa-only": p}})
	acct := r.account(t)
	tiny := func(t *testing.T) crypto.Signer {
		// d = 7: anyone can find it from the public key by trying.
		k := &ecdsa.PrivateKey{PublicKey: ecdsa.PublicKey{Curve: elliptic.P256()}, D: big.NewInt(7)}
		k.X, k.Y = elliptic.P256().ScalarBaseMult(k.D.Bytes())
		return k
	}
	for i, tc := range []struct {
		name   string
		key    func(t *testing.T) crypto.Signer
		detail string
	}{
		{"a key type the profile does not allow", func(t *testing.T) crypto.Signer {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}, "rsa2048"},
		{"an ECDSA key with a tiny private scalar", tiny, "e_ecdsa_small_private_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("refused%d.worker.test", i)
			o := r.order(t, acct, "ecdsa-only", name)
			r.ready(t, o)
			if _, _, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, tc.key(t), name), nil); err != nil {
				t.Fatal(err)
			}
			o = r.waitOrder(t, o.ID, acme.StatusInvalid)
			if o.Error == nil || o.Error.Type != acme.ProblemBadCSR || !strings.Contains(o.Error.Detail, tc.detail) {
				t.Fatalf("order error %+v, want badCSR naming %q", o.Error, tc.detail)
			}
			if o.CertSerial != "" {
				t.Errorf("the order has certificate %s", o.CertSerial)
			}
		})
	}
}

// TestUnmountedProfileIsLeft: a worker that does not mount a profile never
// takes its signing job; the order stays processing for a worker that does.
func TestUnmountedProfileIsLeft(t *testing.T) {
	p := profile.Default()
	r := newRig(t, rigOpts{mount: []string{"default"}, profiles: map[string]profile.Profile{"hsm": p}})
	acct := r.account(t)
	o := r.order(t, acct, "hsm", "hsm.worker.test")
	r.ready(t, o)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, _, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, "hsm.worker.test"), nil); err != nil {
		t.Fatal(err)
	}
	// A default-profile order finalized after it is signed, proving the
	// worker is running and reached the queue.
	o2 := r.order(t, acct, "default", "def.worker.test")
	r.ready(t, o2)
	if _, _, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o2.ID, o2.Profile, csrFor(t, key, "def.worker.test"), nil); err != nil {
		t.Fatal(err)
	}
	r.waitOrder(t, o2.ID, acme.StatusValid)
	if got, _ := r.st.OrderByID(context.Background(), o.ID); got.Status != acme.StatusProcessing {
		t.Fatalf("the hsm-profile order is %s, want processing (left for a worker that mounts it)", got.Status)
	}
}

// TestValidateHTTP01: the worker validates a claimed challenge against a
// real responder on loopback and the verdict moves authz and order.
func TestValidateHTTP01(t *testing.T) {
	var body string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprint(w, body)
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	r := newRig(t, rigOpts{httpPort: ln.Addr().(*net.TCPAddr).Port})

	for _, tc := range []struct {
		name   string
		right  bool
		status acme.Status
		typ    acme.ProblemType
	}{
		{"right answer", true, acme.StatusValid, ""},
		{"wrong answer", false, acme.StatusInvalid, acme.ProblemUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct := r.account(t)
			o := r.order(t, acct, "default", strings.ReplaceAll(tc.name, " ", "-")+".worker.test")
			az, _ := r.st.AuthzByID(context.Background(), o.AuthzIDs[0])
			ch := az.Challenges[0]
			body = ch.Token + "." + acct.Thumbprint
			if !tc.right {
				body = "not-the-key-authorization"
			}
			if _, claimed, err := r.st.ChallengeClaim(context.Background(), store.SignedUse{}, ch.ID); err != nil || !claimed {
				t.Fatalf("claim: %v %v", claimed, err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				got, _ := storetest.ChallengeByID(context.Background(), r.st, ch.ID)
				if got.Status != acme.StatusProcessing {
					if got.Status != tc.status {
						t.Fatalf("challenge %s (%+v), want %s", got.Status, got.Error, tc.status)
					}
					if tc.typ != "" && (got.Error == nil || got.Error.Type != tc.typ) {
						t.Fatalf("problem %+v, want %s", got.Error, tc.typ)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("challenge still processing after 20s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			want := acme.StatusReady
			if !tc.right {
				want = acme.StatusInvalid
			}
			if got, _ := r.st.OrderByID(context.Background(), o.ID); got.Status != want {
				t.Fatalf("order %s, want %s", got.Status, want)
			}
		})
	}
}

// TestCRLAfterRevocation: a revocation queues crl_generate; the worker signs
// a CRL that lists the serial with its reason.
func TestCRLAfterRevocation(t *testing.T) {
	r := newRig(t, rigOpts{})
	serial := r.issue(t, r.account(t), "crl.worker.test")
	r.revoke(t, serial)
	r.waitCRL(t, 20*time.Second, serial)
}

// TestCRLAfterKeyCompromiseReported: a certificate revoked for another
// reason, then reported with its key compromised, is listed by the next
// CRL with reason 1. The CRL job compared serials only, found the serial
// listed already (with reason 4) and signed nothing.
func TestCRLAfterKeyCompromiseReported(t *testing.T) {
	r := newRig(t, rigOpts{})
	serial := r.issue(t, r.account(t), "rerevoked.crl.worker.test")
	if _, err := r.st.Revoke(context.Background(), serial, 4, store.AuditEvent{Actor: "test", Action: "revoke", Subject: serial}); err != nil {
		t.Fatal(err)
	}
	r.waitCRLReason(t, 20*time.Second, 4, serial)
	if _, err := r.st.RevokeForKeyCompromise(context.Background(), serial, store.AuditEvent{Actor: "test", Action: "revoke.key_compromise", Subject: serial}); err != nil {
		t.Fatal(err)
	}
	r.waitCRL(t, 20*time.Second, serial)
}

// issue has the rig's worker sign a certificate for name and returns its
// serial.
func (r *rig) issue(t *testing.T, acct *store.Account, name string) string {
	t.Helper()
	o := r.order(t, acct, "default", name)
	r.ready(t, o)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, _, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil {
		t.Fatal(err)
	}
	return r.waitOrder(t, o.ID, acme.StatusValid).CertSerial
}

// revoke revokes serial with reason 1 (keyCompromise).
func (r *rig) revoke(t *testing.T, serial string) {
	t.Helper()
	if _, err := r.st.Revoke(context.Background(), serial, 1, store.AuditEvent{Actor: "test", Action: "revoke", Subject: serial}); err != nil {
		t.Fatal(err)
	}
}

// waitCRL polls the issuer's newest CRL until one, signed by the issuer,
// lists every serial with reason 1, and returns its number; it fails the
// test when none does within d.
func (r *rig) waitCRL(t *testing.T, d time.Duration, serials ...string) int64 {
	t.Helper()
	return r.waitCRLReason(t, d, 1, serials...)
}

// waitCRLReason is waitCRL for serials revoked with reason.
func (r *rig) waitCRLReason(t *testing.T, d time.Duration, reason int, serials ...string) int64 {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := r.st.CRLLatest(context.Background(), r.issuer.ID)
		if err != nil {
			continue
		}
		crl, err := x509.ParseRevocationList(c.DER)
		if err != nil {
			t.Fatal(err)
		}
		if err := crl.CheckSignatureFrom(r.issuer.Cert); err != nil {
			t.Fatalf("CRL signature: %v", err)
		}
		listed := map[string]bool{}
		for _, e := range crl.RevokedCertificateEntries {
			if e.ReasonCode == reason {
				listed[e.SerialNumber.Text(16)] = true
			}
		}
		all := true
		for _, s := range serials {
			all = all && listed[strings.TrimLeft(s, "0")]
		}
		if all {
			return c.Number
		}
	}
	t.Fatalf("no CRL listing %v with reason %d within %s", serials, reason, d)
	return 0
}

// stuckSigner is a key whose every signature hangs until released, as a
// worker does that died or froze while signing: it holds what it took.
type stuckSigner struct {
	crypto.Signer
	entered chan struct{} // closed at the first Sign
	once    sync.Once
	release chan struct{}
}

func (s *stuckSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.Signer.Sign(r, digest, opts)
}

// TestCRLNumbersOutliveTheDatabase: an issuer whose key outlives its
// database (a PKCS#11 token, a database restored from a backup or created
// afresh) must not number a CRL again with a number it has published
// (RFC 5280 §5.2.3: they increase). Counted in the database alone, the new
// database's first CRL was number 1 again.
func TestCRLNumbersOutliveTheDatabase(t *testing.T) {
	first := newRig(t, rigOpts{})
	serial := first.issue(t, first.account(t), "before.crl.worker.test")
	first.revoke(t, serial)
	published := first.waitCRL(t, 20*time.Second, serial)
	first.stopFirst(t)

	again := newRig(t, rigOpts{issuer: first.issuer})
	serial = again.issue(t, again.account(t), "after.crl.worker.test")
	again.revoke(t, serial)
	if n := again.waitCRL(t, 20*time.Second, serial); n <= published {
		t.Fatalf("the issuer's CRL from its new database is number %d, not above %d, which it published from the old one", n, published)
	}
}

func TestCRLNumber(t *testing.T) {
	at := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		next int64
		want int64
	}{
		{"a new issuer", 1, at.UnixNano()},
		{"numbered by count before", 42, at.UnixNano()},
		{"the clock stepped back", at.UnixNano() + 5, at.UnixNano() + 5},
	} {
		if got := worker.CRLNumber(tc.next, at); got != tc.want {
			t.Errorf("%s: crlNumber(%d, %s) = %d, want %d", tc.name, tc.next, at, got, tc.want)
		}
	}
}

// TestCRLAfterWorkerDiesSigning: a worker that stops while signing a CRL
// keeps the issuer's CRL lease, and no other worker may sign meanwhile. The
// lease must free when River gives the dead worker's job up
// (worker.rescue_after), so revocations reach the CRL within that, not
// after a fixed time far longer.
func TestCRLAfterWorkerDiesSigning(t *testing.T) {
	r := newRig(t, rigOpts{})
	acct := r.account(t)
	serials := []string{r.issue(t, acct, "one.crl.worker.test"), r.issue(t, acct, "two.crl.worker.test")}
	// Only the stuck worker runs while the first revocation's CRL is taken.
	r.stopFirst(t)
	stuck := &stuckSigner{Signer: r.issuer.Signer, entered: make(chan struct{}), release: make(chan struct{})}
	stuckIss := *r.issuer
	stuckIss.Signer = stuck
	r.cfg.Worker.JobTimeoutMS, r.cfg.Worker.RescueAfterMS = 1000, 2000
	// One job at a time, so the stuck one keeps this worker from taking more.
	r.startWorker(t, "stuck-worker", &stuckIss, 1)
	t.Cleanup(func() { close(stuck.release) }) // runs before the workers stop
	r.revoke(t, serials[0])
	select {
	case <-stuck.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the stuck worker did not start signing the CRL within 20s")
	}

	r.startWorker(t, "test-worker-2", r.issuer, 0)
	r.revoke(t, serials[1])
	revoked := time.Now()
	n := r.waitCRL(t, 20*time.Second, serials...)
	t.Logf("CRL %d lists both revocations %s after the second (rescue_after %d ms)", n, time.Since(revoked).Round(time.Millisecond), r.cfg.Worker.RescueAfterMS)
}

// TestCRLForEveryIssuer: two workers mounting different issuers, as
// worker.profiles allows. Each issuer's CRL is signed at start, whichever
// worker River elects its leader; before, only the leader's issuers had
// CRLs signed on schedule, and the other's expired with nothing to renew it.
func TestCRLForEveryIssuer(t *testing.T) {
	r := newRig(t, rigOpts{mount: []string{"default"}, profiles: map[string]profile.Profile{"other": profile.Default()}})
	r.stopFirst(t)
	other := localIssuer(t, "Other Issuer")
	r.scheduled = true
	r.startWorker(t, "worker-default", r.issuer, 0)
	r.mount = []string{"other"}
	r.startWorker(t, "worker-other", other, 0)

	for _, iss := range []*signer.Issuer{r.issuer, other} {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			c, err := r.st.CRLLatest(context.Background(), iss.ID)
			if err == nil {
				crl, err := x509.ParseRevocationList(c.DER)
				if err != nil {
					t.Fatal(err)
				}
				if err := crl.CheckSignatureFrom(iss.Cert); err != nil {
					t.Fatalf("CRL of %s: %v", iss.Cert.Subject.CommonName, err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no CRL of %s within 20s of its worker's start", iss.Cert.Subject.CommonName)
			}
		}
	}
}

// TestCRLForLongKeyIdentifier: an issuer whose certificate carries a
// 32-byte key identifier (RFC 7093's SHA-256 method, as an operator's
// PKCS#11 issuer certificate may) has a 64-digit id; its CRL queue, named
// after it, was over River's 64 characters, and a worker mounting it did
// not start. It starts and signs the issuer's CRL.
func TestCRLForLongKeyIdentifier(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	ski := sha256.Sum256(spki)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "Long SKI Issuer"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, SubjectKeyId: ski[:],
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	long, err := signer.NewIssuer(cert, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(long.ID) != 64 {
		t.Fatalf("issuer id %q, want the 64 hex digits of a 32-byte key identifier", long.ID)
	}
	r := newRig(t, rigOpts{})
	r.stopFirst(t)
	r.scheduled = true
	r.startWorker(t, "worker-long-ski", long, 0)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := r.st.CRLLatest(context.Background(), long.ID)
		if err == nil {
			crl, err := x509.ParseRevocationList(c.DER)
			if err != nil {
				t.Fatal(err)
			}
			if err := crl.CheckSignatureFrom(cert); err != nil {
				t.Fatalf("CRL: %v", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no CRL of the long-SKI issuer within 20s of its worker's start")
		}
	}
}

// TestCAARecheckedAtIssuance: an authorization validated more than 7
// hours before issuance (a reused one, or an order finalized late) has its
// CAA checked again, and a CAA record set since then that names another CA
// refuses issuance (CA/B Forum BR §3.2.2.8). A recent validation is not
// checked again.
func TestCAARecheckedAtIssuance(t *testing.T) {
	r := newRig(t, rigOpts{})
	acct := r.account(t)
	age := func(o *store.Order, d time.Duration) {
		t.Helper()
		db, err := sqlite.Open(r.path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, id := range o.AuthzIDs {
			// SQLite keeps times as microseconds since the epoch.
			if _, err := db.Exec(`UPDATE challenges SET validated_at = validated_at - $1 WHERE authz_id = $2`, d.Microseconds(), id); err != nil {
				t.Fatal(err)
			}
		}
	}
	finalize := func(o *store.Order, name string) {
		t.Helper()
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if _, _, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		caa      string // the issuer named by a CAA issue record set after validating; "" for none
		age      time.Duration
		wantType acme.ProblemType // "" when the certificate is issued
	}{
		{"old validation, CAA now names another CA", "other-ca.test", 8 * time.Hour, acme.ProblemCAA},
		{"old validation, CAA names this CA", "hallmark.test", 8 * time.Hour, ""},
		{"old validation, no CAA", "", 8 * time.Hour, ""},
		{"recent validation, CAA now names another CA", "other-ca.test", 6 * time.Hour, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("n%d.recheck.worker.test", i)
			o := r.order(t, acct, "default", name)
			r.ready(t, o)
			age(o, tc.age)
			if tc.caa != "" {
				r.dns.SetCAA(name, 0, "issue", tc.caa)
			}
			finalize(o, name)
			if tc.wantType == "" {
				r.waitOrder(t, o.ID, acme.StatusValid)
				return
			}
			got := r.waitOrder(t, o.ID, acme.StatusInvalid)
			if got.Error == nil || got.Error.Type != tc.wantType || got.Error.Identifier == nil || got.Error.Identifier.Value != name {
				t.Fatalf("order error = %+v, want %s for %s", got.Error, tc.wantType, name)
			}
		})
	}
}

// failedStoring is the store whose first OrderIssued fails, as a database
// that drops out between signing and storing; it remembers the serial it
// refused.
type failedStoring struct {
	store.Store
	mu      sync.Mutex
	refused string
}

func (f *failedStoring) OrderIssued(ctx context.Context, in store.Issued) error {
	f.mu.Lock()
	first := f.refused == ""
	if first {
		f.refused = in.Certificate.Serial
	}
	f.mu.Unlock()
	if first {
		return fmt.Errorf("connection reset while storing %s", in.Certificate.Serial)
	}
	return f.Store.OrderIssued(ctx, in)
}

// TestSignedCertificateStoredOnRetry: a certificate signed whose storing
// failed is the one the job's retry stores. Signing another would leave the
// first signed and unrecorded: never revocable, never on a CRL, and with a
// relay backend issued upstream.
func TestSignedCertificateStoredOnRetry(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.stopFirst(t)
	failing := &failedStoring{}
	r.wrap = func(st store.Store) store.Store { failing.Store = st; return failing }
	r.startWorker(t, "retry-worker", r.issuer, 0)
	serial := r.issue(t, r.account(t), "retry.worker.test")
	failing.mu.Lock()
	refused := failing.refused
	failing.mu.Unlock()
	if refused == "" {
		t.Fatal("the first storing never failed")
	}
	if serial != refused {
		t.Fatalf("the order's certificate is %s, but %s was signed first and never stored", serial, refused)
	}
}

// pausedNumbering is the store whose first CRLNextNumber waits for release:
// a CRL job held between reading the revocations and numbering its CRL. It
// counts the CRLs stored through it.
type pausedNumbering struct {
	store.Store
	once    sync.Once
	entered chan struct{}
	release chan struct{}
	stored  atomic.Int32
}

func (p *pausedNumbering) CRLStore(ctx context.Context, c store.CRL) error {
	err := p.Store.CRLStore(ctx, c)
	if err == nil {
		p.stored.Add(1)
	}
	return err
}

func (p *pausedNumbering) CRLNextNumber(ctx context.Context, issuerID string, shard int) (int64, error) {
	first := false
	p.once.Do(func() { first = true })
	if first {
		close(p.entered)
		<-p.release
	}
	return p.Store.CRLNextNumber(ctx, issuerID, shard)
}

// TestCRLJobsTakeTurns: two CRL jobs for one issuer on one worker, the
// first held after it read the revocations. The second must not sign
// meanwhile: it would store CRL 1 listing both, and the first then CRL 2
// listing only the first revocation, the newest CRL leaving out a revoked
// certificate with no job left to mend it.
func TestCRLJobsTakeTurns(t *testing.T) {
	r := newRig(t, rigOpts{})
	acct := r.account(t)
	serials := []string{r.issue(t, acct, "one.turns.worker.test"), r.issue(t, acct, "two.turns.worker.test")}
	r.stopFirst(t)
	paused := &pausedNumbering{entered: make(chan struct{}), release: make(chan struct{})}
	r.wrap = func(st store.Store) store.Store { paused.Store = st; return paused }
	r.startWorker(t, "turns-worker", r.issuer, 0) // worker.concurrency: room for both jobs
	released := sync.OnceFunc(func() { close(paused.release) })
	t.Cleanup(released)

	r.revoke(t, serials[0])
	select {
	case <-paused.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the first CRL job did not reach its numbering within 20s")
	}
	r.revoke(t, serials[1])
	// Give the second job time to run ahead of the first, as it did.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := r.st.CRLLatest(context.Background(), r.issuer.ID); err == nil {
			break
		}
	}
	released()

	// Both jobs are done when two CRLs are stored (the first job's, then
	// the second's with both; or the second's first, then the first's).
	for deadline := time.Now().Add(20 * time.Second); paused.stored.Load() < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d CRLs stored within 20s, want 2", paused.stored.Load())
		}
	}
	time.Sleep(500 * time.Millisecond) // a later CRL, if any job were left, is stored by now
	c, err := r.st.CRLLatest(context.Background(), r.issuer.ID)
	if err != nil {
		t.Fatal(err)
	}
	crl, err := x509.ParseRevocationList(c.DER)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range crl.RevokedCertificateEntries {
		listed[e.SerialNumber.Text(16)] = true
	}
	for _, s := range serials {
		if !listed[strings.TrimLeft(s, "0")] {
			t.Errorf("the newest CRL, %d, leaves out revoked %s (lists %d entries)", c.Number, s, len(crl.RevokedCertificateEntries))
		}
	}
}

// TestSilentTargetsHoldNoOneUp: validations of targets that accept a
// connection and never answer (more of them than worker.concurrency) wait
// out the challenge timeout, and a client whose target answers is
// validated meanwhile, not after them.
func TestSilentTargetsHoldNoOneUp(t *testing.T) {
	const silent = 12 // above worker.concurrency's default of 8
	hangUp := make(chan struct{})
	var mu sync.Mutex
	answers := map[string]string{} // token → key authorization
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.Host, "silent-") {
			select {
			case <-hangUp:
			case <-req.Context().Done():
			}
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, answers[strings.TrimPrefix(req.URL.Path, "/.well-known/acme-challenge/")])
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	r := newRig(t, rigOpts{httpPort: ln.Addr().(*net.TCPAddr).Port})
	// Before the rig's own clean-up stops the worker, which waits for them.
	t.Cleanup(func() { close(hangUp) })
	if r.cfg.Worker.Concurrency >= silent || r.cfg.Worker.ValidationConcurrency <= silent {
		t.Fatalf("defaults changed (concurrency %d, validation_concurrency %d): the test needs more silent targets than the one, fewer than the other",
			r.cfg.Worker.Concurrency, r.cfg.Worker.ValidationConcurrency)
	}

	ctx := context.Background()
	// The answering client is another account: one account's validations
	// hold at most its share of the places (TestBlackHoleAccountHoldsNoOneUp).
	silentAcct, answeringAcct := r.account(t), r.account(t)
	claim := func(acct *store.Account, name string) string {
		o := r.order(t, acct, "default", name)
		az, err := r.st.AuthzByID(ctx, o.AuthzIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		ch := az.Challenges[0]
		mu.Lock()
		answers[ch.Token] = ch.Token + "." + acct.Thumbprint
		mu.Unlock()
		if _, claimed, err := r.st.ChallengeClaim(ctx, store.SignedUse{}, ch.ID); err != nil || !claimed {
			t.Fatalf("claim of %s: %v %v", name, claimed, err)
		}
		return ch.ID
	}
	var held []string
	for i := range silent {
		held = append(held, claim(silentAcct, fmt.Sprintf("silent-%d.worker.test", i)))
	}
	answering := claim(answeringAcct, "answers.worker.test")

	deadline := time.Now().Add(time.Duration(r.cfg.Challenge.TimeoutMS)*time.Millisecond + 20*time.Second)
	for {
		got, err := storetest.ChallengeByID(ctx, r.st, answering)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == acme.StatusValid {
			break
		}
		if got.Status != acme.StatusProcessing {
			t.Fatalf("the answering target's challenge is %s (%+v), want valid", got.Status, got.Error)
		}
		if time.Now().After(deadline) {
			t.Fatal("the answering target's challenge is still processing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := 0
	for _, id := range held {
		if got, err := storetest.ChallengeByID(ctx, r.st, id); err != nil || got.Status != acme.StatusProcessing {
			done++
		}
	}
	if done > 0 {
		t.Fatalf("the answering target was validated only after %d of the %d silent ones had timed out", done, silent)
	}
}

// TestResolverDownIsNoVerdict: when the worker's own resolver is down
// (every query refused at the transport level), neither validation nor
// the CAA recheck at issuance ran, so neither records a verdict on the
// client's challenge or order: each attempt is "could not run" and
// retried, and the existing policy abandons the subject with serverInternal
// after the last attempt. Before, the first attempt recorded a dns problem
// blaming the client. CAA still fails closed: the order is never signed.
func TestResolverDownIsNoVerdict(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := pc.LocalAddr().String()
	pc.Close() // nothing listens there now: queries are refused
	r := newRig(t, rigOpts{})
	r.stopFirst(t)
	r.cfg.Challenge.Resolvers = []string{down}
	r.startWorker(t, "resolver-down", r.issuer, 0)
	ctx := context.Background()
	acct := r.account(t)

	for _, tc := range []struct {
		name string
		kind string
		run  func(t *testing.T, name string) (acme.Status, *acme.Problem)
	}{
		{"validation", jobs.ChallengeValidateArgs{}.Kind(), func(t *testing.T, name string) (acme.Status, *acme.Problem) {
			o := r.order(t, acct, "default", name)
			az, _ := r.st.AuthzByID(ctx, o.AuthzIDs[0])
			ch := az.Challenges[0]
			if _, claimed, err := r.st.ChallengeClaim(ctx, store.SignedUse{}, ch.ID); err != nil || !claimed {
				t.Fatalf("claim: %v %v", claimed, err)
			}
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				got, _ := storetest.ChallengeByID(ctx, r.st, ch.ID)
				if got.Status != acme.StatusProcessing {
					return got.Status, got.Error
				}
			}
			t.Fatal("challenge still processing after 30s")
			return "", nil
		}},
		{"CAA recheck at issuance", jobs.SignerIssueArgs{}.Kind(), func(t *testing.T, name string) (acme.Status, *acme.Problem) {
			o := r.order(t, acct, "default", name)
			r.ready(t, o)
			db, err := sqlite.Open(r.path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`UPDATE challenges SET validated_at = validated_at - $1 WHERE authz_id = $2`, (8 * time.Hour).Microseconds(), o.AuthzIDs[0]); err != nil {
				t.Fatal(err)
			}
			key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if _, _, err := r.st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil {
				t.Fatal(err)
			}
			got := r.waitOrder(t, o.ID, acme.StatusInvalid)
			if got.CertSerial != "" {
				t.Fatalf("order signed (%s) without its CAA being read", got.CertSerial)
			}
			return got.Status, got.Error
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, p := tc.run(t, strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")+".resolver-down.worker.test")
			if status != acme.StatusInvalid || p == nil || p.Type != acme.ProblemServerInternal {
				t.Fatalf("status %s, problem %+v; want invalid with serverInternal (abandoned after retries), not a verdict blaming the client", status, p)
			}
			js, err := jobs.List(ctx, r.db.Queue, jobs.ListFilter{Kinds: []string{tc.kind}})
			if err != nil || len(js) == 0 {
				t.Fatalf("listing %s jobs: %v %d", tc.kind, err, len(js))
			}
			j := js[0]
			if j.Attempt != j.MaxAttempts || len(j.Errors) == 0 || !strings.Contains(j.Errors[0].Error, "could not run") ||
				!strings.Contains(j.Errors[0].Error, "no configured DNS resolver could be reached") {
				t.Fatalf("job ran %d of %d attempts, errors %+v; want every attempt retried as could-not-run for the resolver", j.Attempt, j.MaxAttempts, j.Errors)
			}
		})
	}
}

// TestNewRefusesNoResolvers: a worker without challenge.resolvers could
// not validate or check CAA at all (it never asks the system's resolver);
// it refuses to start, naming the setting, rather than retry every job.
func TestNewRefusesNoResolvers(t *testing.T) {
	_, err := worker.New(testworker.Config(nil), nil, worker.Options{})
	if err == nil || !strings.Contains(err.Error(), "challenge.resolvers") {
		t.Fatalf("worker.New = %v, want an error naming challenge.resolvers", err)
	}
}

// exec runs one statement, written with $n placeholders, on the rig's
// database through a connection of its own, as another process would.
func (r *rig) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	ctx := context.Background()
	if strings.HasPrefix(r.url, "sqlite:") {
		db, err := sqlite.Open(r.path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return
	}
	c, err := pgx.Connect(ctx, r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// lapsingStore records the orders whose certificate was signed (each
// reaches OrderIssued), and for the orders in lapse runs its statement
// just before storing: a deactivation that commits while the certificate
// is signed.
type lapsingStore struct {
	store.Store
	r     *rig
	t     *testing.T
	mu    sync.Mutex
	lapse map[string]string // order ID → statement
	saw   map[string]bool   // orders that reached OrderIssued
}

func (l *lapsingStore) OrderIssued(ctx context.Context, in store.Issued) error {
	l.mu.Lock()
	l.saw[in.OrderID] = true
	q := l.lapse[in.OrderID]
	l.mu.Unlock()
	if q != "" {
		l.r.exec(l.t, q)
	}
	return l.Store.OrderIssued(ctx, in)
}

func (l *lapsingStore) signed(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.saw[id]
}

// TestLapsedOrderNotIssued: an order finalized whose account (or one of
// whose authorizations) is deactivated before the worker signs ends
// invalid with unauthorized, with no certificate stored and none signed;
// deactivated while it is signed, with none stored. Orders born valid
// (a pre-validating binding) are the ones it matters for: AccountDeactivate
// moves the account's unfinished orders to invalid, and the worker then
// leaves them, but on PostgreSQL its statements run at READ COMMITTED,
// each on its own snapshot, so an order newOrder commits after its UPDATE
// of orders and before its COMMIT is left as it was, ready (born valid, it
// needs no challenge) with a valid authorization, on an account then
// deactivated; a finalize whose account check read before that COMMIT
// queues it. The test sets that state directly (the deactivation's account
// row, not the order it did not see). Before, the worker signed and stored
// the certificate.
func TestLapsedOrderNotIssued(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, rigOpts{kind: kind})
			r.stopFirst(t) // the orders are set up before any worker takes them
			deactivateAccount := func(o *store.Order) string {
				return "UPDATE accounts SET status = 'deactivated' WHERE id = '" + o.AccountID + "'"
			}
			deactivateAuthz := func(o *store.Order) string {
				return "UPDATE authorizations SET status = 'deactivated' WHERE id = '" + o.AuthzIDs[0] + "'"
			}
			cases := []struct {
				name string
				// before runs after the finalize, before any worker runs;
				// during, as the certificate is stored. Either may be nil.
				before  func(t *testing.T, o *store.Order)
				during  func(o *store.Order) string
				problem string // in the order's error; "" when it is issued
				signed  bool
			}{
				{"nothing lapsed", nil, nil, "", true},
				{"account deactivated by AccountDeactivate", func(t *testing.T, o *store.Order) {
					if _, err := r.st.AccountDeactivate(context.Background(), o.AccountID); err != nil {
						t.Fatal(err)
					}
				}, nil, "the account was deactivated", false},
				{"account deactivated, the order unseen by the deactivation", func(t *testing.T, o *store.Order) { r.exec(t, deactivateAccount(o)) },
					nil, "the account is deactivated", false},
				{"authorization deactivated, the order unseen by the deactivation", func(t *testing.T, o *store.Order) { r.exec(t, deactivateAuthz(o)) },
					nil, "is no longer valid", false},
				{"account deactivated while the certificate is signed", nil, deactivateAccount, "the account is deactivated", true},
			}
			lapsing := &lapsingStore{r: r, t: t, lapse: map[string]string{}, saw: map[string]bool{}}
			orders := make([]*store.Order, len(cases))
			for i, tc := range cases {
				name := fmt.Sprintf("n%d.lapsed.worker.test", i)
				now, _ := r.st.Now(context.Background())
				id := acme.Identifier{Type: acme.IdentifierDNS, Value: name}
				// Born valid: no challenge, the order ready at once.
				o, err := r.st.OrderCreate(context.Background(), store.SignedUse{}, store.NewOrder{AccountID: r.account(t).ID, Profile: "default",
					Identifiers: []acme.Identifier{id}, Expires: now.Add(time.Hour),
					Authzs: []*store.Authorization{{Identifier: id, Status: acme.StatusValid, Expires: now.Add(time.Hour)}}})

				if err != nil || o.Status != acme.StatusReady {
					t.Fatalf("born valid order: %+v, %v; want ready", o, err)
				}
				key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				if _, claimed, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil || !claimed {
					t.Fatalf("finalize: %v %v", claimed, err)
				}
				if tc.before != nil {
					tc.before(t, o)
				}
				if tc.during != nil {
					lapsing.lapse[o.ID] = tc.during(o)
				}
				orders[i] = o
			}
			r.wrap = func(st store.Store) store.Store { lapsing.Store = st; return lapsing }
			r.startWorker(t, "lapse-worker", r.issuer, 0)
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					o := orders[i]
					if tc.problem == "" {
						r.issued(t, o.ID)
					} else {
						got := r.waitOrder(t, o.ID, acme.StatusInvalid)
						if got.Error == nil || got.Error.Type != acme.ProblemUnauthorized || !strings.Contains(got.Error.Detail, tc.problem) {
							t.Errorf("order error = %+v, want unauthorized saying %q", got.Error, tc.problem)
						}
						if got.CertSerial != "" {
							t.Errorf("the invalid order names certificate %s", got.CertSerial)
						}
						// A certificate signed before the lapse was seen is
						// recorded, revoked, never delivered; none else.
						want := 0
						if tc.signed {
							want = 1
						}
						certs, _, err := r.st.CertificatesList(context.Background(), store.CertFilter{AccountID: o.AccountID}, store.Page{})
						if err != nil || len(certs) != want {
							t.Fatalf("certificates of the account: %d, %v; want %d", len(certs), err, want)
						}
						for _, c := range certs {
							if c.RevokedAt == nil || c.RevocationReason != 5 || c.OrderID != o.ID {
								t.Errorf("undelivered certificate %s of order %s: revoked %v with reason %d; want revoked with 5 (cessationOfOperation)", c.Serial, c.OrderID, c.RevokedAt, c.RevocationReason)
							}
						}
					}
					if s := lapsing.signed(o.ID); s != tc.signed {
						t.Errorf("signed a certificate: %v, want %v", s, tc.signed)
					}
				})
			}
		})
	}
}

// abandoningStore abandons an order (as `hallmark jobs abandon` does) just
// before the worker stores its certificate: an operator who gave up on a
// job while its certificate was being signed.
type abandoningStore struct {
	store.Store
	t *testing.T
}

func (a *abandoningStore) OrderIssued(ctx context.Context, in store.Issued) error {
	moved, err := a.Store.Abandon(ctx, jobs.Subject{Kind: jobs.KindSignerIssue, ID: in.OrderID},
		acme.Problem{Type: acme.ProblemServerInternal, Detail: "abandoned by the operator"})
	if err != nil || !moved {
		a.t.Errorf("abandoning order %s: moved=%v, %v", in.OrderID, moved, err)
	}
	return a.Store.OrderIssued(ctx, in)
}

// finalized is a processing order of acct for name, its CSR of a new key
// claimed as a finalize claims it (with the key's hash), for a worker to
// take.
func (r *rig) finalized(t *testing.T, acct *store.Account, name string) *store.Order {
	t.Helper()
	o := r.order(t, acct, "default", name)
	r.ready(t, o)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	h, err := store.PublicKeyHash(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, claimed, err := r.st.OrderFinalizeBegin(context.Background(), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), h); err != nil || !claimed {
		t.Fatalf("finalize: %v %v", claimed, err)
	}
	return o
}

// TestUndeliveredCertificateRecorded: a certificate signed for an order
// that could no longer take it by the time it was stored is not delivered,
// but the CA keeps it: stored, revoked, audited, and listed by the issuer's
// next CRL. Before, the worker logged its serial and dropped it when an
// operator abandoned the order while it was signed (a signature of the
// CA's key that no record or CRL accounted for), and the certificate
// swap did not look at the key, so a certificate whose key was reported
// compromised while it was signed (a slow HSM, a relay's upstream) was
// delivered.
func TestUndeliveredCertificateRecorded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wrap    func(t *testing.T, st store.Store) store.Store // does it while signing
		problem acme.ProblemType                               // the order's error
		reason  int                                            // the certificate's revocation
	}{
		{"abandoned while signing", func(t *testing.T, st store.Store) store.Store { return &abandoningStore{Store: st, t: t} },
			acme.ProblemServerInternal, 5},
		{"key blocked while signing", func(t *testing.T, st store.Store) store.Store { return &blockingStore{Store: st, t: t} },
			acme.ProblemBadPublicKey, store.ReasonKeyCompromise},
	} {
		for _, kind := range []string{"sqlite", "postgres"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				r := newRig(t, rigOpts{kind: kind})
				r.stopFirst(t)
				acct := r.account(t)
				o := r.finalized(t, acct, "undelivered.worker.test")
				r.wrap = func(st store.Store) store.Store { return tc.wrap(t, st) }
				r.startWorker(t, "undelivered-worker", r.issuer, 0)

				got := r.waitOrder(t, o.ID, acme.StatusInvalid)
				if got.CertSerial != "" || got.Error == nil || got.Error.Type != tc.problem {
					t.Fatalf("order: serial %q, error %+v; want no certificate and %s", got.CertSerial, got.Error, tc.problem)
				}
				var certs []*store.Certificate
				for deadline := time.Now().Add(10 * time.Second); len(certs) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					var err error
					if certs, _, err = r.st.CertificatesList(context.Background(), store.CertFilter{AccountID: acct.ID}, store.Page{}); err != nil {
						t.Fatal(err)
					}
				}
				if len(certs) != 1 {
					t.Fatalf("certificates of the account: %d; want the undelivered one recorded", len(certs))
				}
				c := certs[0]
				if c.OrderID != o.ID || c.RevokedAt == nil || c.RevocationReason != tc.reason || c.IssuerID != r.issuer.ID {
					t.Fatalf("undelivered certificate: order %s, revoked %v, reason %d, issuer %s; want order %s revoked with %d by %s",
						c.OrderID, c.RevokedAt, c.RevocationReason, c.IssuerID, o.ID, tc.reason, r.issuer.ID)
				}
				if x, err := x509.ParseCertificate(c.DER); err != nil || x.CheckSignatureFrom(r.issuer.Cert) != nil {
					t.Fatalf("the stored certificate is not one the issuer signed: %v", err)
				}
				r.waitCRLReason(t, 20*time.Second, tc.reason, c.Serial)
				evs, _, err := r.st.AuditList(context.Background(), store.Page{Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				var audited bool
				for _, ev := range evs {
					audited = audited || (ev.Action == "certificate.undelivered" && ev.Subject == c.Serial && strings.Contains(ev.Detail, o.ID))
				}
				if !audited {
					t.Errorf("audit of %s: %+v; want a certificate.undelivered event naming order %s", c.Serial, evs, o.ID)
				}
			})
		}
	}
}

// blockingStore reports the key of each certificate compromised just
// before it is stored: a key blocked while its certificate was signed.
type blockingStore struct {
	store.Store
	t *testing.T
}

func (b *blockingStore) OrderIssued(ctx context.Context, in store.Issued) error {
	if _, err := b.Store.KeyBlock(ctx, store.BlockedKey{SPKIHash: in.Certificate.SPKIHash, Why: "reported while signing", Actor: "cli:test"}); err != nil {
		b.t.Errorf("blocking the key of %s: %v", in.Certificate.Serial, err)
	}
	return b.Store.OrderIssued(ctx, in)
}

// TestBlockedKeyNotIssued: an order finalized before the key of its CSR
// was reported compromised (store.KeyBlock, as a keyCompromise revocation
// of another certificate of the key or an operator's hallmark keys block
// would) fails with badPublicKey and nothing is signed (CA/B Forum BR
// §6.1.1.3): OrderToIssue reads the block with the order. An order of a
// fresh key, finalized alike, is issued, its certificate stored with its
// key's hash (certRow), by which a later report of the key finds it.
func TestBlockedKeyNotIssued(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, rigOpts{kind: kind})
			r.stopFirst(t) // the orders are finalized and the key blocked before any worker takes them
			ctx := context.Background()
			acct := r.account(t)
			finalize := func(name string, key *ecdsa.PrivateKey) (*store.Order, []byte) {
				now, _ := r.st.Now(ctx)
				id := acme.Identifier{Type: acme.IdentifierDNS, Value: name}
				o, err := r.st.OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: acct.ID, Profile: "default",
					Identifiers: []acme.Identifier{id}, Expires: now.Add(time.Hour),
					Authzs: []*store.Authorization{{Identifier: id, Status: acme.StatusValid, Expires: now.Add(time.Hour)}}})

				if err != nil || o.Status != acme.StatusReady {
					t.Fatalf("born valid order: %+v, %v; want ready", o, err)
				}
				h, err := store.PublicKeyHash(key.Public())
				if err != nil {
					t.Fatal(err)
				}
				if _, claimed, err := r.st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), h); err != nil || !claimed {
					t.Fatalf("finalize: %v %v", claimed, err)
				}
				return o, h
			}
			badKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			goodKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			blocked, badHash := finalize("blocked.worker.test", badKey)
			fresh, goodHash := finalize("fresh.worker.test", goodKey)
			if _, err := r.st.KeyBlock(ctx, store.BlockedKey{SPKIHash: badHash, Why: "reported by a test", Actor: "cli:test"}); err != nil {
				t.Fatal(err)
			}
			r.startWorker(t, "blocked-worker", r.issuer, 0)

			got := r.waitOrder(t, blocked.ID, acme.StatusInvalid)
			if got.Error == nil || got.Error.Type != acme.ProblemBadPublicKey || !strings.Contains(got.Error.Detail, "generate a new key") {
				t.Errorf("order of a blocked key: error %+v, want badPublicKey saying to generate a new key", got.Error)
			}
			c, _ := r.issued(t, fresh.ID)
			if !bytes.Equal(c.SPKIHash, goodHash) {
				t.Errorf("the issued certificate's key hash = %x, want %x (its key's)", c.SPKIHash, goodHash)
			}
			certs, _, err := r.st.CertificatesList(ctx, store.CertFilter{AccountID: acct.ID}, store.Page{})
			if err != nil || len(certs) != 1 || certs[0].Serial != c.Serial {
				t.Errorf("certificates of the account: %d, %v; want only the fresh key's %s (nothing signed for the blocked key)", len(certs), err, c.Serial)
			}
		})
	}
}
