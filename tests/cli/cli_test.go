package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hallmark-cli-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "hallmark")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/hallmark")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building hallmark: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ca is a migrated database with a configuration file naming it.
type ca struct {
	t      *testing.T
	url    string
	config string
	db     *open.DB
}

func newCA(t *testing.T, url string) *ca {
	t.Helper()
	ctx := context.Background()
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	db, err := open.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	cfg := filepath.Join(t.TempDir(), "hallmark.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[database]\nurl = %q\n", url)), 0o600); err != nil {
		t.Fatal(err)
	}
	return &ca{t: t, url: url, config: cfg, db: db}
}

type result struct {
	code   int
	stdout string
	stderr string
}

// run runs the built binary with the CA's configuration.
func (c *ca) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--config", c.config}, args...)...)
	cmd.Env = append(os.Environ(), "HALLMARK_CONFIG=", "HALLMARK_DATABASE_URL=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("running hallmark %v: %v", args, err)
	}
	return r
}

// want runs args and fails unless the exit code is code.
func (c *ca) want(code int, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code {
		c.t.Fatalf("hallmark %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if code != 0 && !strings.HasPrefix(r.stderr, "hallmark: ") {
		c.t.Errorf("hallmark %s: stderr %q does not start with \"hallmark: \"", strings.Join(args, " "), r.stderr)
	}
	if code != 0 && strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		c.t.Errorf("hallmark %s: the error is not one line: %q", strings.Join(args, " "), r.stderr)
	}
	return r
}

// jsonOf runs args with exit code code and decodes stdout into v.
func (c *ca) jsonOf(v any, code int, args ...string) {
	c.t.Helper()
	r := c.want(code, args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("hallmark %s: stdout is not JSON: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

func (c *ca) st() store.Store { return c.db.Store }

// configure appends toml (profiles, backends) to the CA's configuration
// file, which every later command reads.
func (c *ca) configure(toml string) {
	c.t.Helper()
	cfg, err := os.ReadFile(c.config)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.config, append(cfg, toml...), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

func (c *ca) account() *store.Account {
	c.t.Helper()
	a, err := c.st().AccountCreate(context.Background(), &store.Account{
		KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rnd() + `"}`), Thumbprint: rnd(),
		Contact: []string{"mailto:ops@example.com"}, TermsAgreed: true,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return a
}

var seq int

func rnd() string {
	seq++
	return fmt.Sprintf("k%d-%d", time.Now().UnixNano(), seq)
}

// processing creates an order for name, validates it and claims it for
// finalization, which queues its signer_issue job.
func (c *ca) processing(a *store.Account, name string) *store.Order {
	c.t.Helper()
	ctx := context.Background()
	now, err := c.st().Now(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	id := acme.Identifier{Type: acme.IdentifierDNS, Value: name}
	o, err := c.st().OrderCreate(ctx, store.SignedUse{}, store.NewOrder{AccountID: a.ID, Profile: "default", Expires: now.Add(time.Hour),
		Identifiers: []acme.Identifier{id},
		Authzs:      []*store.Authorization{{Identifier: id, Expires: now.Add(time.Hour), Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}}}}})

	if err != nil {
		c.t.Fatal(err)
	}
	az, err := c.st().AuthzByID(ctx, o.AuthzIDs[0])
	if err != nil {
		c.t.Fatal(err)
	}
	ch, claimed, err := c.st().ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[0].ID)
	if err != nil || !claimed {
		c.t.Fatalf("ChallengeClaim: %v %v", claimed, err)
	}
	if err := c.st().ChallengeVerdict(ctx, store.Verdict{ChallengeID: ch.ID, Status: acme.StatusValid}); err != nil {
		c.t.Fatal(err)
	}
	o, claimed, err = c.st().OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil)
	if err != nil || !claimed {
		c.t.Fatalf("OrderFinalizeBegin: %v %v", claimed, err)
	}
	return o
}

// issued creates an order for name and stores its certificate, signed by
// the local issuer "issuer-1" for the default profile.
func (c *ca) issued(a *store.Account, name, serial string) *store.Order {
	c.t.Helper()
	return c.issuedAs(a, name, serial, "issuer-1", "default")
}

// issuedAs is issued for profile, with the issuer id a backend records:
// relay:<backend>, custom:<backend>, or a local issuer's key identifier.
func (c *ca) issuedAs(a *store.Account, name, serial, issuer, profile string) *store.Order {
	c.t.Helper()
	ctx := context.Background()
	o := c.processing(a, name)
	now, _ := c.st().Now(ctx)
	err := c.st().OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: serial, IssuerID: issuer, Profile: profile, DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		Names: []string{name}, NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour),
	}})
	if err != nil {
		c.t.Fatal(err)
	}
	return o
}

func (c *ca) cert(serial string) *store.Certificate {
	c.t.Helper()
	got, err := c.st().CertificateBySerial(context.Background(), serial)
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func (c *ca) audit() []store.AuditEvent {
	c.t.Helper()
	evs, _, err := c.st().AuditList(context.Background(), store.Page{Limit: 100})
	if err != nil {
		c.t.Fatal(err)
	}
	return evs
}

var dialects = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return testdb.SQLite(t) }},
	{"postgres", func(t *testing.T) string { return testdb.Postgres(t) }},
}

func cliActor(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return "cli:" + u.Username
}

// TestRevoke: dry run changes nothing; revoking an account's certificates
// goes through the shared path (revocation row, CRL queued, audit event by
// cli:<user>); repeating it is "nothing to do"; a reason the CA must not
// use is a usage error.
func TestRevoke(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			a, b := c.account(), c.account()
			c.issued(a, "one.example.com", "0a01")
			c.issued(a, "two.example.com", "a02")
			ob := c.issued(b, "three.example.com", "b03")

			r := c.want(0, "revoke", "--dry-run", "--account", a.ID, "--reason", "superseded")
			for _, want := range []string{"dry run: would revoke account " + a.ID, "a01", "a02", "would-revoke", "reason 4 (superseded)", "nothing was changed"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("dry run output lacks %q:\n%s", want, r.stdout)
				}
			}
			if c.cert("0a01").RevokedAt != nil {
				t.Fatal("a dry run revoked a certificate")
			}

			var rep struct {
				DryRun       bool     `json:"dry_run"`
				Reason       int      `json:"reason"`
				Actor        string   `json:"actor"`
				CRLQueued    []string `json:"crl_queued"`
				Certificates []struct {
					Serial, Outcome, Backend string
				} `json:"certificates"`
			}
			c.jsonOf(&rep, 0, "revoke", "--json", "--account", a.ID, "--reason", "4")
			if rep.DryRun || rep.Reason != 4 || rep.Actor != cliActor(t) || len(rep.Certificates) != 2 || len(rep.CRLQueued) != 1 || rep.CRLQueued[0] != "issuer-1" {
				t.Fatalf("revoke --json = %+v", rep)
			}
			for _, cr := range rep.Certificates {
				if cr.Outcome != "revoked" || cr.Backend != "local" {
					t.Errorf("certificate %s: outcome %s backend %s, want revoked local", cr.Serial, cr.Outcome, cr.Backend)
				}
				if got := c.cert(cr.Serial); got.RevokedAt == nil || got.RevocationReason != 4 {
					t.Errorf("certificate %s in the store: %+v", cr.Serial, got)
				}
			}
			revs, err := c.st().Revocations(context.Background(), "issuer-1")
			if err != nil || len(revs) != 2 {
				t.Fatalf("revocations for the CRL: %v %v", revs, err)
			}
			audited := 0
			for _, ev := range c.audit() {
				if ev.Action == "revoke" && ev.Actor == cliActor(t) && strings.Contains(ev.Detail, "hallmark revoke") && !ev.At.IsZero() {
					audited++
				}
			}
			if audited != 2 {
				t.Errorf("%d revoke audit events by %s, want 2: %+v", audited, cliActor(t), c.audit())
			}
			var js []struct{ Kind, State string }
			c.jsonOf(&js, 0, "jobs", "list", "--json", "--kind", "crl_generate")
			if len(js) != 1 {
				t.Errorf("crl_generate jobs after revoking two certificates of one issuer together: %+v, want one", js)
			}

			// Again: every certificate is already revoked.
			r = c.want(4, "revoke", "--account", a.ID)
			if !strings.Contains(r.stderr, "already revoked") || !strings.Contains(r.stdout, "already-revoked") {
				t.Errorf("second revoke: stdout %q stderr %q", r.stdout, r.stderr)
			}
			// One serial, in openssl's form, already revoked.
			c.want(4, "revoke", "0A:01")
			// Its key reported compromised after: the reason becomes
			// keyCompromise (its time kept) and its CRL is queued again;
			// reported twice, it is already revoked so.
			before := c.cert("0a01")
			r = c.want(0, "revoke", "--reason", "keyCompromise", "0A:01")
			if got := c.cert("0a01"); got.RevocationReason != 1 || !got.RevokedAt.Equal(*before.RevokedAt) || !strings.Contains(r.stdout, "revoked") {
				t.Errorf("after reporting the key of a certificate revoked as superseded: reason %d at %v (was %v); output:\n%s", got.RevocationReason, got.RevokedAt, before.RevokedAt, r.stdout)
			}
			c.want(4, "revoke", "--reason", "keyCompromise", "0A:01")
			// By order: the text says what it did and that the CRL follows.
			r = c.want(0, "revoke", "--order", ob.ID, "--reason", "keyCompromise")
			t.Logf("hallmark revoke --order:\n%s", r.stdout)
			for _, want := range []string{"b03", "revoked", "the next CRL of issuer issuer-1 is queued"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("revoke --order output lacks %q:\n%s", want, r.stdout)
				}
			}
			if got := c.cert("b03"); got.RevocationReason != 1 {
				t.Errorf("reason of b03 = %d, want 1 (keyCompromise)", got.RevocationReason)
			}

			for _, tc := range []struct {
				code int
				args []string
				says string
			}{
				{2, []string{"revoke", "--reason", "certificateHold", "b03"}, "not allowed"},
				{2, []string{"revoke", "--reason", "7", "b03"}, "not allowed"},
				{2, []string{"revoke", "--reason", "nonsense", "b03"}, "is not a revocation reason"},
				{2, []string{"revoke"}, "exactly one"},
				{2, []string{"revoke", "--order", "x", "--account", "y"}, "exactly one"},
				{2, []string{"revoke", "b03", "--reason", "1"}, "flags before"},
				{2, []string{"revoke", "--no-such-flag"}, "--help"},
				{3, []string{"revoke", "ffff"}, "not issued by this CA"},
				{3, []string{"revoke", "--order", "nope"}, "does not exist"},
				{3, []string{"revoke", "--account", "nope"}, "does not exist"},
			} {
				r := c.want(tc.code, tc.args...)
				if !strings.Contains(r.stderr, tc.says) {
					t.Errorf("hallmark %v: stderr %q lacks %q", tc.args, r.stderr, tc.says)
				}
			}
		})
	}
}

// TestInspect: accounts, orders and certificates as tables and as JSON,
// with their filters; unknown records are exit code 3.
func TestInspect(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			a, b := c.account(), c.account()
			c.issued(a, "one.example.com", "c1")
			stuck := c.processing(b, "stuck.example.com")
			// A relay order that failed after its upstream order was
			// placed, and the stuck one's upstream order.
			failed := c.processing(a, "failed.example.com")
			ctx := context.Background()
			for _, u := range []store.UpstreamOrder{
				{OrderID: stuck.ID, Backend: "corp", AccountURL: "https://up.example/acct/7", OrderURL: "https://up.example/order/stuck"},
				{OrderID: failed.ID, Backend: "corp", AccountURL: "https://up.example/acct/7", OrderURL: "https://up.example/order/failed"},
			} {
				if err := c.st().UpstreamOrderRecord(ctx, u, ""); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.st().OrderFail(ctx, failed.ID, acme.Problem{Type: acme.ProblemServerInternal, Detail: "the upstream timed out"}); err != nil {
				t.Fatal(err)
			}

			r := c.want(0, "accounts", "list")
			if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
				t.Errorf("accounts list:\n%s", r.stdout)
			}
			var accts []struct{ ID, Status string }
			c.jsonOf(&accts, 0, "accounts", "list", "--json")
			if len(accts) != 2 || accts[0].ID != b.ID || accts[1].Status != "valid" {
				t.Errorf("accounts list --json = %+v", accts)
			}
			r = c.want(0, "accounts", "show", a.ID)
			for _, want := range []string{a.ID, "mailto:ops@example.com", "recent certificates (1)", "c1", "one.example.com"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("accounts show lacks %q:\n%s", want, r.stdout)
				}
			}
			c.want(3, "accounts", "show", "nope")
			c.want(2, "accounts", "show")

			var orders []struct {
				ID, Status, Account string
			}
			c.jsonOf(&orders, 0, "orders", "list", "--json", "--status", "processing")
			if len(orders) != 1 || orders[0].ID != stuck.ID {
				t.Errorf("orders list --status processing = %+v", orders)
			}
			c.jsonOf(&orders, 0, "orders", "list", "--json", "--identifier", "ONE.example.com")
			if len(orders) != 1 || orders[0].Status != "valid" || orders[0].Account != a.ID {
				t.Errorf("orders list --identifier = %+v", orders)
			}
			c.jsonOf(&orders, 0, "orders", "list", "--json", "--account", b.ID)
			if len(orders) != 1 || orders[0].ID != stuck.ID {
				t.Errorf("orders list --account = %+v", orders)
			}
			c.want(2, "orders", "list", "--status", "stuck")
			r = c.want(0, "orders", "show", stuck.ID)
			for _, want := range []string{"processing", "stuck.example.com", "http-01", "valid", "jobs list --kind signer_issue"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("orders show lacks %q:\n%s", want, r.stdout)
				}
			}
			for _, want := range []string{"upstream orders", "https://up.example/order/stuck", "https://up.example/acct/7"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("orders show of a relay order lacks %q:\n%s", want, r.stdout)
				}
			}
			var shown struct {
				ID             string
				Authorizations []struct {
					Status     string
					Challenges []struct{ Type, Status string }
				}
				UpstreamOrders []struct {
					Backend  string `json:"backend"`
					OrderURL string `json:"order_url"`
				} `json:"upstream_orders"`
			}
			c.jsonOf(&shown, 0, "orders", "show", "--json", stuck.ID)
			if shown.ID != stuck.ID || len(shown.Authorizations) != 1 || len(shown.Authorizations[0].Challenges) != 1 || shown.Authorizations[0].Challenges[0].Type != "http-01" {
				t.Errorf("orders show --json = %+v", shown)
			}
			if len(shown.UpstreamOrders) != 1 || shown.UpstreamOrders[0].Backend != "corp" || shown.UpstreamOrders[0].OrderURL != "https://up.example/order/stuck" {
				t.Errorf("orders show --json's upstream_orders = %+v", shown.UpstreamOrders)
			}
			// A failed relay order says where an unstored upstream
			// certificate may be; an order that never reached a relay
			// shows no upstream section.
			r = c.want(0, "orders", "show", failed.ID)
			for _, want := range []string{"invalid", "https://up.example/order/failed", "revoke it with the upstream account's key"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("orders show of a failed relay order lacks %q:\n%s", want, r.stdout)
				}
			}
			c.jsonOf(&orders, 0, "orders", "list", "--json", "--identifier", "one.example.com")
			if len(orders) != 1 {
				t.Fatalf("orders list --identifier one.example.com = %+v", orders)
			}
			if r := c.want(0, "orders", "show", orders[0].ID); strings.Contains(r.stdout, "upstream") {
				t.Errorf("orders show of an order no relay saw names upstream orders:\n%s", r.stdout)
			}
			c.want(3, "orders", "show", "nope")

			var certs []struct {
				Serial string
				Names  []string
			}
			c.jsonOf(&certs, 0, "certs", "list", "--json", "--name", "one.example.com")
			if len(certs) != 1 || certs[0].Serial != "c1" {
				t.Errorf("certs list --name = %+v", certs)
			}
			c.jsonOf(&certs, 0, "certs", "list", "--json", "--expiring-before", "2000-01-01")
			if len(certs) != 0 {
				t.Errorf("certs list --expiring-before 2000-01-01 = %+v", certs)
			}
			c.jsonOf(&certs, 0, "certs", "list", "--json", "--expiring-before", time.Now().AddDate(1, 0, 0).Format("2006-01-02"))
			if len(certs) != 1 {
				t.Errorf("certs list --expiring-before next year = %+v", certs)
			}
			c.want(2, "certs", "list", "--expiring-before", "soon")
			r = c.want(0, "certs", "show", "--pem", "C1")
			for _, want := range []string{"serial:", "c1", "issuer-1", "backend:", "local", "revoked:", "no", "BEGIN CERTIFICATE"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("certs show lacks %q:\n%s", want, r.stdout)
				}
			}
			c.want(3, "certs", "show", "dead")
		})
	}
}

// TestOperatorActions: deactivating an account, retrying and abandoning a
// job; each is audited as cli:<user>, and abandon fails the order so its
// client stops polling.
func TestOperatorActions(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			a, b := c.account(), c.account()
			stuck := c.processing(a, "stuck.example.com")

			var js []struct {
				ID      int64
				Kind    string
				State   string
				Subject string
			}
			c.jsonOf(&js, 0, "jobs", "list", "--json", "--kind", "signer_issue")
			if len(js) != 1 || js[0].Subject != "order "+stuck.ID || js[0].State != "available" {
				t.Fatalf("jobs list = %+v", js)
			}
			id := fmt.Sprint(js[0].ID)
			r := c.want(0, "jobs", "list", "--state", "available")
			if !strings.Contains(r.stdout, "signer_issue") || !strings.Contains(r.stdout, "order "+stuck.ID) {
				t.Errorf("jobs list:\n%s", r.stdout)
			}
			c.want(0, "jobs", "retry", id)
			r = c.want(0, "jobs", "show", id)
			t.Logf("hallmark jobs show:\n%s", r.stdout)
			for _, want := range []string{"signer_issue", "attempt log:", "no attempt yet", stuck.ID} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("jobs show lacks %q:\n%s", want, r.stdout)
				}
			}
			var shown struct {
				ID     int64
				Errors []any
			}
			c.jsonOf(&shown, 0, "jobs", "show", "--json", id)
			if shown.ID != js[0].ID || shown.Errors == nil {
				t.Errorf("jobs show --json = %+v", shown)
			}
			r = c.want(0, "jobs", "abandon", "--detail", "the signer is down for maintenance; order again", id)
			if !strings.Contains(r.stdout, "cancelled") || !strings.Contains(r.stdout, "order "+stuck.ID) {
				t.Errorf("jobs abandon:\n%s", r.stdout)
			}
			o, err := c.st().OrderByID(context.Background(), stuck.ID)
			if err != nil || o.Status != acme.StatusInvalid || o.Error == nil || o.Error.Type != acme.ProblemServerInternal || !strings.Contains(o.Error.Detail, "maintenance") {
				t.Fatalf("order after abandon: %+v %v", o, err)
			}
			c.want(3, "jobs", "show", "999999")
			c.want(3, "jobs", "abandon", "999999")
			c.want(2, "jobs", "retry", "abc")
			c.want(2, "jobs", "list", "--state", "stuck")

			var acct struct{ ID, Status string }
			c.jsonOf(&acct, 0, "accounts", "deactivate", "--json", b.ID)
			if acct.Status != "deactivated" {
				t.Errorf("accounts deactivate --json = %+v", acct)
			}
			r = c.want(4, "accounts", "deactivate", b.ID)
			if !strings.Contains(r.stderr, "already deactivated") {
				t.Errorf("second deactivate: %q", r.stderr)
			}
			c.want(3, "accounts", "deactivate", "nope")

			got := map[string]store.AuditEvent{}
			for _, ev := range c.audit() {
				if ev.Actor == cliActor(t) {
					got[ev.Action] = ev
				}
			}
			for action, subject := range map[string]string{"account.deactivate": b.ID, "job.retry": id, "job.abandon": id} {
				if ev, ok := got[action]; !ok || ev.Subject != subject || ev.At.IsZero() {
					t.Errorf("audit event %s: %+v (found %v), want subject %s", action, ev, ok, subject)
				}
			}
		})
	}
}

// TestCRLStatus: an issuer with revocations and no CRL is stale (exit 5);
// once a CRL listing them is stored it is fresh (exit 0).
func TestCRLStatus(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			c.issued(c.account(), "one.example.com", "d1")
			c.want(0, "revoke", "d1")
			var rows []struct {
				Issuer      string
				Number      int64
				Revocations int
				Stale       bool
				Why         string
			}
			c.jsonOf(&rows, 5, "crl", "status", "--json")
			if len(rows) != 1 || rows[0].Issuer != "issuer-1" || !rows[0].Stale || rows[0].Revocations != 1 {
				t.Fatalf("crl status before any CRL = %+v", rows)
			}
			ctx := context.Background()
			now, _ := c.st().Now(ctx)
			if err := c.st().CRLStore(ctx, store.CRL{IssuerID: "issuer-1", Number: 7, ThisUpdate: now.Add(time.Second), NextUpdate: now.Add(24 * time.Hour), DER: harness.SignedCRL(t, now.Add(time.Second), "d1")}); err != nil {
				t.Fatal(err)
			}
			r := c.want(0, "crl", "status")
			t.Logf("hallmark crl status:\n%s", r.stdout)
			for _, want := range []string{"ISSUER", "issuer-1", "7", "fresh"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("crl status lacks %q:\n%s", want, r.stdout)
				}
			}
			// A relay's certificates, revoked too: the upstream publishes
			// their status, so its issuer is listed but never stale, and a
			// monitor of the exit code is not woken for it.
			c.issuedAs(c.account(), "relayed.example.com", "e1", "relay:upstream", "default")
			if err := c.st().RevokeRecorded(ctx, "e1", 1, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "e1"}); err != nil {
				t.Fatal(err)
			}
			rows = nil
			c.jsonOf(&rows, 0, "crl", "status", "--json")
			if len(rows) != 2 || rows[1].Issuer != "relay:upstream" || rows[1].Stale || rows[1].Revocations != 1 || !strings.Contains(rows[1].Why, "publishes its own revocation status") {
				t.Fatalf("crl status with a relay's revoked certificate = %+v, want issuer-1 fresh and relay:upstream not stale, with its 1 revoked certificate", rows)
			}
		})
	}
}

// TestConfigErrors: a configuration that cannot be read is exit code 2, a
// database that cannot be reached is 1.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	c := &ca{t: t, config: filepath.Join(t.TempDir(), "missing.toml")}
	r := c.want(2, "accounts", "list")
	if !strings.Contains(r.stderr, "fix the configuration") {
		t.Errorf("missing config: %q", r.stderr)
	}
	// A command that does not exist is a usage error (2), not a record
	// that does not exist (3), and says where the right ones are listed.
	for _, args := range [][]string{{"acounts", "list"}, {"certs", "lsit"}} {
		r = c.want(2, args...)
		if want := "--help` lists them"; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, args[len(args)-1]) {
			t.Errorf("hallmark %v: stderr %q, want the unknown command named and %q", args, r.stderr, want)
		}
	}
	writeConfig := func(url string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "hallmark.toml")
		if err := os.WriteFile(p, []byte("[database]\nurl = \""+url+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A URL no store takes is the configuration's fault: 2.
	c.config = writeConfig("mysql://x")
	// (Its message lists every problem, a line each.)
	r = c.run("certs", "list")
	if r.code != 2 || !strings.Contains(r.stderr, "database.url") {
		t.Errorf("unusable database URL: exit %d (%q), want 2 naming database.url", r.code, r.stderr)
	}
	// A database that does not answer (nothing listens on the port) is 1,
	// with what to check.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	c.config = writeConfig("postgres://postgres@" + closed + "/postgres?sslmode=disable&connect_timeout=5")
	r = c.want(1, "certs", "list")
	if !strings.Contains(r.stderr, "check database.url") {
		t.Errorf("unreachable database: %q", r.stderr)
	}
	c.want(0, "version")
}

// TestMigrateAdvice: `hallmark migrate` tells the operator setting up the
// database what in its settings would lose certificates or slow issuance
// as the tables grow, on stderr, and still succeeds; SQLite has nothing to
// say.
func TestMigrateAdvice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.Postgres(t)
	c := newCA(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	r := c.want(0, "migrate")
	if !strings.Contains(r.stdout, "database is up to date") || strings.Contains(r.stderr, "autovacuum is off for") {
		t.Errorf("migrate as PostgreSQL ships:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE river_job SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	r = c.want(0, "migrate")
	if !strings.Contains(r.stderr, "warning: PostgreSQL's autovacuum is off for river_job:") {
		t.Errorf("migrate with river_job left out of autovacuum does not name it:\n%s", r.stderr)
	}

	lite := newCA(t, testdb.SQLite(t))
	if r := lite.want(0, "migrate"); r.stderr != "" {
		t.Errorf("migrate on SQLite warns: %q", r.stderr)
	}
}
