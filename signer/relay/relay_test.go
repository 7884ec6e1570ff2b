package relay_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/relay"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/pebble"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// journal is a real store, as the worker gives the relay: a SQLite file
// in the test's directory.
func journal(t *testing.T) store.Store {
	t.Helper()
	return testdb.Open(t, "sqlite").Store
}

// order creates a Hallmark order for names in st and returns the request
// and CSR the worker hands the relay for it.
func order(t *testing.T, st store.Store, names ...string) (signer.Request, *x509.CertificateRequest) {
	t.Helper()
	ctx := context.Background()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, _ := x509.ParseCertificateRequest(der)
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	acct, err := st.AccountCreate(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + stamp + `"}`),
		Thumbprint: "thumb-" + stamp, TermsAgreed: true})
	if err != nil {
		t.Fatal(err)
	}
	now, _ := st.Now(ctx)
	no := store.NewOrder{AccountID: acct.ID, Profile: "upstream", Expires: now.Add(time.Hour)}
	for _, n := range names {
		id := acme.Identifier{Type: acme.IdentifierDNS, Value: n}
		no.Identifiers = append(no.Identifiers, id)
		no.Authzs = append(no.Authzs, &store.Authorization{Identifier: id, Expires: now.Add(time.Hour),
			Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}}})
	}
	o, err := st.OrderCreate(ctx, store.SignedUse{}, no)
	if err != nil {
		t.Fatal(err)
	}
	return signer.Request{Profile: profile.Profile{ValidityHours: 48}, ProfileName: "upstream", OrderID: o.ID,
		Names: no.Identifiers, PublicKey: key.Public()}, csr
}

// TestRelayIssueRevokeWithPebble: a certificate for the order's names and
// CSR key comes back from a real Pebble, and is revoked there.
func TestRelayIssueRevokeWithPebble(t *testing.T) {
	p := pebble.Start(t)
	st := journal(t)
	b, err := relay.New(relay.Config{Name: "up", Journal: st, Timeout: 30 * time.Second,
		Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, CACert: p.CACert, AccountKey: filepath.Join(t.TempDir(), "account.key"), Contact: []string{"ops@example.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	r, csr := order(t, st, "relay.example.test", "www.relay.example.test")
	issued, err := b.Issue(context.Background(), r, csr)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if j, err := st.UpstreamOrderFor(context.Background(), r.OrderID, "up"); err != nil || !strings.HasPrefix(j.OrderURL, "https://") || !strings.HasPrefix(j.AccountURL, "https://") {
		t.Errorf("the journal of upstream orders holds %+v, %v; want the upstream order and account", j, err)
	}
	leaf, _ := x509.ParseCertificate(issued.DER)
	if len(leaf.DNSNames) != 2 {
		t.Fatalf("upstream certificate names %v", leaf.DNSNames)
	}
	if b.IssuerID() != "relay:up" {
		t.Fatalf("IssuerID %q", b.IssuerID())
	}
	if err := b.Revoke(context.Background(), issued.SerialHex, issued.DER, 4); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
}

// TestRelayUpstreamDownIsRetried: an upstream that does not answer is
// signer.ErrUnavailable (the job is retried), never a verdict.
func TestRelayUpstreamDownIsRetried(t *testing.T) {
	t.Parallel()
	st := journal(t)
	b, err := relay.New(relay.Config{Name: "down", Journal: st, Timeout: 3 * time.Second,
		Relay: signerconf.Relay{DirectoryURL: "https://127.0.0.1:1/dir", AccountKey: filepath.Join(t.TempDir(), "account.key")}})
	if err != nil {
		t.Fatal(err)
	}
	r, csr := order(t, st, "down.example.test")
	if _, err := b.Issue(context.Background(), r, csr); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("Issue with the upstream down: %v, want signer.ErrUnavailable", err)
	}
	if err := b.Ready(context.Background()); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("Ready with the upstream down: %v", err)
	}
}

// TestRelayNeedsItsJournal: a relay is not built without a journal of its
// upstream orders, and refuses a request that names no Hallmark order
// (nothing to journal its upstream order under) before it contacts the
// upstream: an internal error, not a retry.
func TestRelayNeedsItsJournal(t *testing.T) {
	t.Parallel()
	cfg := relay.Config{Name: "nojournal", Timeout: 3 * time.Second,
		Relay: signerconf.Relay{DirectoryURL: "https://127.0.0.1:1/dir", AccountKey: filepath.Join(t.TempDir(), "account.key")}}
	if _, err := relay.New(cfg); err == nil || !strings.Contains(err.Error(), "backends.nojournal") {
		t.Errorf("New without a journal: %v, want an error naming backends.nojournal", err)
	}
	st := journal(t)
	cfg.Journal = st
	b, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, csr := order(t, st, "nojournal.example.test")
	r.OrderID = ""
	_, err = b.Issue(context.Background(), r, csr)
	var ae *acme.Error
	if !errors.As(err, &ae) || ae.Problem.Type != acme.ProblemServerInternal || errors.Is(err, signer.ErrUnavailable) {
		t.Errorf("Issue of a request naming no order: %v, want serverInternal before the upstream is asked", err)
	}
}

// faultAfterFinalize carries the relay's requests to Pebble, counts the
// orders it places, and fails the first certificate download: the attempt
// dies after the upstream has issued, as on a timeout or a worker's lost
// connection.
type faultAfterFinalize struct {
	base     http.RoundTripper
	newOrder string // the directory's newOrder URL

	mu        sync.Mutex
	orders    int
	certFails int
	certs     []string // the certificate URLs asked for, the failed one too
}

// counts are the orders placed and the downloads failed so far.
func (f *faultAfterFinalize) counts() (orders, certFails int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.orders, f.certFails
}

// certURLs are the certificate URLs asked for so far.
func (f *faultAfterFinalize) certURLs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.certs...)
}

func (f *faultAfterFinalize) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	if req.Method == http.MethodPost && req.URL.String() == f.newOrder {
		f.orders++
	}
	// Pebble serves certificates under /certZ/<serial>.
	cert := strings.HasPrefix(req.URL.Path, "/certZ/")
	if cert {
		f.certs = append(f.certs, req.URL.String())
	}
	fail := cert && f.certFails == 0
	if fail {
		f.certFails++
	}
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer (injected)")
	}
	return f.base.RoundTrip(req)
}

// upstream is a Pebble, and a fault in front of it with counts of its own
// for each call of newFault.
func upstream(t *testing.T) (p *pebble.Server, newFault func() *faultAfterFinalize) {
	t.Helper()
	p = pebble.Start(t)
	dir, err := (&xacme.Client{DirectoryURL: p.DirectoryURL, HTTPClient: &http.Client{Transport: p.Transport}}).Discover(context.Background())
	if err != nil || dir.OrderURL == "" {
		t.Fatalf("Pebble's directory: %v (newOrder %q)", err, dir.OrderURL)
	}
	return p, func() *faultAfterFinalize { return &faultAfterFinalize{base: p.Transport, newOrder: dir.OrderURL} }
}

// failAfterIssue runs an attempt that the fault kills once the upstream
// has issued, and checks that it did.
func failAfterIssue(t *testing.T, b *relay.Backend, fault *faultAfterFinalize, r signer.Request, csr *x509.CertificateRequest) {
	t.Helper()
	if _, err := b.Issue(context.Background(), r, csr); !errors.Is(err, signer.ErrUnavailable) {
		t.Fatalf("the attempt whose download failed: %v, want signer.ErrUnavailable (retried)", err)
	}
	if orders, certFails := fault.counts(); certFails != 1 || orders != 1 {
		t.Fatalf("%d upstream orders, %d certificate downloads failed, want 1 and 1: the fault was not where the test puts it", orders, certFails)
	}
}

// TestRelayRetryResumesTheUpstreamOrder: an attempt that fails after the
// upstream issued is retried (signer.ErrUnavailable), and the retry fetches
// the certificate of the order already placed instead of placing a second
// one, whether the same backend retries or a fresh one (a worker
// restarted, or the job rescued by another worker: nothing in memory) with
// the same account key and the same journal, a real store: one upstream
// order, and the certificate is the one the failed download was of.
func TestRelayRetryResumesTheUpstreamOrder(t *testing.T) {
	p, newFault := upstream(t)
	for _, tc := range []struct {
		name  string
		fresh bool // the retry runs in a new Backend
	}{
		{"the same backend retries", false},
		{"a fresh backend retries (a restarted or another worker)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fault := newFault()
			st, key := journal(t), filepath.Join(t.TempDir(), "account.key")
			newBackend := func() *relay.Backend {
				b, err := relay.New(relay.Config{Name: "resume", Transport: fault, Journal: st, Timeout: 30 * time.Second,
					Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, AccountKey: key}})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			b := newBackend()
			r, csr := order(t, st, "resume.example.test")
			failAfterIssue(t, b, fault, r, csr)
			if tc.fresh {
				b = newBackend()
			}
			issued, err := b.Issue(context.Background(), r, csr)
			if err != nil {
				t.Fatalf("the retry: %v", err)
			}
			leaf, err := x509.ParseCertificate(issued.DER)
			if err != nil || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "resume.example.test" {
				t.Fatalf("the retry's certificate: %v, %v", leaf, err)
			}
			if orders, _ := fault.counts(); orders != 1 {
				t.Fatalf("%d upstream orders placed for one order, want 1: the retry placed another instead of resuming", orders)
			}
			if certs := fault.certURLs(); len(certs) != 2 || certs[0] != certs[1] {
				t.Errorf("certificates asked for %v, want the failed one, then the same one again", certs)
			}
		})
	}
}

// TestRelayResumeByAnotherAccount: a retry by a backend with another
// account key (a worker configured with a key of its own) cannot read the
// upstream order the first placed: it logs a warning naming that order as
// a possible orphan, places a new one, and issues, with no error; the
// journal then holds the new order, placed by the new account.
func TestRelayResumeByAnotherAccount(t *testing.T) {
	p, newFault := upstream(t)
	fault, st := newFault(), journal(t)
	var logs bytes.Buffer
	newBackend := func(keyFile string) *relay.Backend {
		b, err := relay.New(relay.Config{Name: "resume", Transport: fault, Journal: st, Timeout: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, AccountKey: filepath.Join(t.TempDir(), keyFile)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r, csr := order(t, st, "other-account.example.test")
	failAfterIssue(t, newBackend("a.key"), fault, r, csr)
	first, err := st.UpstreamOrderFor(context.Background(), r.OrderID, "resume")
	if err != nil {
		t.Fatalf("the first attempt's upstream order is not in the journal: %v", err)
	}
	issued, err := newBackend("b.key").Issue(context.Background(), r, csr)
	if err != nil {
		t.Fatalf("the retry with another account: %v, want a certificate from a new upstream order", err)
	}
	if leaf, err := x509.ParseCertificate(issued.DER); err != nil || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "other-account.example.test" {
		t.Fatalf("the retry's certificate: %v, %v", leaf, err)
	}
	if orders, _ := fault.counts(); orders != 2 {
		t.Errorf("%d upstream orders, want 2: the other account's and a new one", orders)
	}
	var warned bool
	for _, line := range strings.Split(logs.String(), "\n") {
		warned = warned || (strings.Contains(line, "level=WARN") && strings.Contains(line, first.OrderURL) && strings.Contains(line, "orphan"))
	}
	if !warned {
		t.Errorf("no warning names the other account's upstream order %s as a possible orphan; the log:\n%s", first.OrderURL, logs.String())
	}
	now, err := st.UpstreamOrderFor(context.Background(), r.OrderID, "resume")
	if err != nil || now.OrderURL == first.OrderURL || now.AccountURL == first.AccountURL {
		t.Errorf("the journal holds %+v, %v after the retry; want the new order, placed by the new account (not %+v)", now, err, first)
	}
	// The replaced order's URL outlives the worker's log: the audit log
	// names it, for an operator to revoke it upstream if it issued.
	events, _, err := st.AuditList(context.Background(), store.Page{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var audited bool
	for _, ev := range events {
		audited = audited || (ev.Action == "upstream_order.replaced" && ev.Subject == r.OrderID &&
			strings.Contains(ev.Detail, first.OrderURL) && strings.Contains(ev.Detail, first.AccountURL))
	}
	if !audited {
		t.Errorf("no upstream_order.replaced audit event names the replaced upstream order %s and its account; events: %+v", first.OrderURL, events)
	}
}

// TestRelayResumeOfAnOrderTheUpstreamForgot: the journal names an upstream
// order the upstream answers 404 for (it removes orders some time after
// they expire; a job recovered days later meets it). The retry places a new
// order and issues, rather than failing the Hallmark order with the 404's
// problem as if the upstream had refused it, and the audit log keeps the
// forgotten order's URL.
func TestRelayResumeOfAnOrderTheUpstreamForgot(t *testing.T) {
	p, newFault := upstream(t)
	fault, st := newFault(), journal(t)
	b, err := relay.New(relay.Config{Name: "forgot", Transport: fault, Journal: st, Timeout: 30 * time.Second,
		Relay: signerconf.Relay{DirectoryURL: p.DirectoryURL, AccountKey: filepath.Join(t.TempDir(), "account.key")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, csr := order(t, st, "forgot.example.test")
	failAfterIssue(t, b, fault, r, csr)
	first, err := st.UpstreamOrderFor(ctx, r.OrderID, "forgot")
	if err != nil {
		t.Fatal(err)
	}
	// An order URL on the same upstream that it does not know: Pebble
	// answers 404 for it, as an upstream does for an order it dropped.
	forgotten := first.OrderURL + "-forgotten"
	if err := st.UpstreamOrderRecord(ctx, store.UpstreamOrder{OrderID: r.OrderID, Backend: "forgot", AccountURL: first.AccountURL, OrderURL: forgotten}, first.OrderURL); err != nil {
		t.Fatal(err)
	}
	issued, err := b.Issue(ctx, r, csr)
	if err != nil {
		t.Fatalf("the retry of an order whose upstream order is gone: %v, want a certificate from a new upstream order", err)
	}
	if leaf, err := x509.ParseCertificate(issued.DER); err != nil || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "forgot.example.test" {
		t.Fatalf("the retry's certificate: %v, %v", leaf, err)
	}
	if orders, _ := fault.counts(); orders != 2 {
		t.Errorf("%d upstream orders, want 2: the first and the one replacing the forgotten", orders)
	}
	now, err := st.UpstreamOrderFor(ctx, r.OrderID, "forgot")
	if err != nil || now.OrderURL == forgotten || now.OrderURL == first.OrderURL {
		t.Errorf("the journal holds %+v, %v; want the new upstream order", now, err)
	}
	events, _, err := st.AuditList(ctx, store.Page{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var audited bool
	for _, ev := range events {
		audited = audited || (ev.Action == "upstream_order.replaced" && strings.Contains(ev.Detail, forgotten))
	}
	if !audited {
		t.Errorf("no upstream_order.replaced audit event names the forgotten upstream order %s; events: %+v", forgotten, events)
	}
}
