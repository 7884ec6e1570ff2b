package worker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// TestNotificationsDelivered: every event reaches a webhook, a real SMTP
// server (STARTTLS, AUTH) and a program exactly once, each event's job
// inserted with the write it reports; the webhook is down while the
// events happen, and its jobs are retried until it is up, not lost.
func TestNotificationsDelivered(t *testing.T) {
	// The worker may validate a claimed challenge before the test records
	// its verdict: it then finds the right answer, except for wrong.*.
	wrong := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Host, "wrong.") {
			fmt.Fprint(w, "not-it")
			return
		}
		fmt.Fprint(w, path.Base(r.URL.Path)+".thumb-notify")
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wrong.Listener = ln
	wrong.Start()
	t.Cleanup(wrong.Close)
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var hook, mails tally
			hookAddr := reservePort(t) // down: nothing listens there yet
			smtpAddr, caFile := smtpServer(t, "hallmark", "s3cret", &mails)
			pwFile := filepath.Join(t.TempDir(), "smtp-password")
			if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			outDir := t.TempDir()
			t.Setenv("NOTIFY_TEST_DIR", outDir)
			conf := notify.Config{ExpiryDays: []int{365}, Destinations: []notify.Destination{
				{Name: "hook", Kind: notify.KindWebhook, URL: "http://" + hookAddr + "/hallmark", TimeoutMS: 2000},
				{Name: "mail", Kind: notify.KindEmail, SMTP: smtpAddr, From: "ca@hallmark.test", To: []string{"ops@hallmark.test"},
					Username: "hallmark", PasswordFile: pwFile, CAFile: caFile},
				{Name: "prog", Kind: notify.KindProgram, Events: []string{notify.CertificateIssued, notify.CertificateRevoked},
					Command: []string{"/bin/sh", "-c", `cat > "$NOTIFY_TEST_DIR/$$.json"`}, Env: []string{"NOTIFY_TEST_DIR"}},
			}}
			conf.Defaults()
			if err := conf.Validate(); err != nil {
				t.Fatal(err)
			}
			r := newRig(t, rigOpts{kind: kind, httpPort: ln.Addr().(*net.TCPAddr).Port, notify: &conf})
			want := makeEvents(t, r)

			// The webhook's jobs fail (connection refused) and are retried.
			waitJobs(t, r, "every webhook delivery tried thrice", func(js []jobs.JobInfo) bool {
				n := 0
				for _, j := range js {
					if strings.Contains(string(j.Args), `"hook"`) && j.Attempt >= 3 {
						n++
					}
				}
				return n == len(want)
			})
			webhookAt(t, hookAddr, &hook)
			waitJobs(t, r, "every notify_send job completed", func(js []jobs.JobInfo) bool {
				done := 0
				for _, j := range js {
					if j.State == "completed" {
						done++
					}
				}
				return done == 2*len(want)+3
			})
			time.Sleep(500 * time.Millisecond) // a duplicate would arrive now

			for _, key := range want {
				if n := hook.snapshot()[key+"/hook"]; n != 1 {
					t.Errorf("webhook received %s %d times, want once; got %v", key, n, hook.snapshot())
				}
			}
			if got := len(hook.snapshot()); got != len(want) {
				t.Errorf("webhook received %d events, want %d: %v", got, len(want), hook.snapshot())
			}
			m := mails.snapshot()
			if len(m) != len(want) {
				t.Errorf("SMTP server received %d distinct mails, want %d: %v", len(m), len(want), m)
			}
			for k, n := range m {
				if n != 1 {
					t.Errorf("SMTP server received %q %d times", k, n)
				}
			}
			files, _ := filepath.Glob(filepath.Join(outDir, "*.json"))
			if len(files) != 3 {
				t.Errorf("the program ran %d times, want 3 (2 issued, 1 revoked)", len(files))
			}
			for _, f := range files {
				b, _ := os.ReadFile(f)
				if !strings.Contains(string(b), `"event":"certificate_`) || !strings.Contains(string(b), `"text":"Certificate `) {
					t.Errorf("the program got %s, want the event as JSON with its text", b)
				}
			}
			js := notifyJobs(t, r)
			retried := 0
			for _, j := range js {
				if j.MaxAttempts != jobs.NotifyMaxAttempts {
					t.Errorf("job %d: max attempts %d, want %d", j.ID, j.MaxAttempts, jobs.NotifyMaxAttempts)
				}
				if j.Attempt > 1 {
					retried++
				}
			}
			if retried == 0 {
				t.Error("no delivery was retried, though the webhook was down")
			}
			t.Logf("%s: %d notify_send jobs completed, %d after retries", kind, len(js), retried)
		})
	}
}

// makeEvents makes one of each event through the store and the worker
// and returns their idempotency keys (event/subject).
func makeEvents(t *testing.T, r *rig) []string {
	t.Helper()
	ctx := context.Background()
	acct, err := r.st.AccountCreateTrailed(ctx, &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"notify"}`),
		Thumbprint: "thumb-notify", TermsAgreed: true}, "", store.AuditEvent{Action: store.ActionAccountCreated, Trail: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{notify.AccountCreated + "/" + acct.ID}
	var certs []*store.Certificate
	for _, name := range []string{"a.notify.test", "b.notify.test"} {
		o := r.order(t, acct, "default", name)
		readyRacing(t, r, o)
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if _, _, err := r.st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil {
			t.Fatal(err)
		}
		c, _ := r.issued(t, o.ID)
		certs = append(certs, c)
		keys = append(keys, notify.CertificateIssued+"/"+c.Serial)
	}
	o := r.order(t, acct, "default", "wrong.notify.test")
	az, _ := r.st.AuthzByID(ctx, o.AuthzIDs[0])
	if _, _, err := r.st.ChallengeClaim(ctx, store.SignedUse{}, az.Challenges[0].ID); err != nil {
		t.Fatal(err)
	}
	r.waitOrder(t, o.ID, acme.StatusInvalid)
	keys = append(keys, notify.ChallengeFailed+"/"+az.Challenges[0].ID)
	if _, err := r.st.Revoke(ctx, certs[0].Serial, 0, store.AuditEvent{Actor: "cli:test", Action: "revoke", Subject: certs[0].Serial}); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, notify.CertificateRevoked+"/"+certs[0].Serial)
	// The revoked certificate is not expiring; the live one is, once.
	for i, want := range []int{1, 0} {
		if n, err := r.st.NotifyExpiring(ctx, 365, 100); err != nil || n != want {
			t.Fatalf("housekeeping run %d reported %d expiring certificates (%v), want %d", i+1, n, err, want)
		}
	}
	keys = append(keys, fmt.Sprintf("%s/%s/365", notify.CertificateExpiring, certs[1].Serial))
	other := r.account(t)
	if _, err := r.st.AccountDeactivate(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	return append(keys, notify.AccountDeactivated+"/"+other.ID)
}

func notifyJobs(t *testing.T, r *rig) []jobs.JobInfo {
	t.Helper()
	js, err := jobs.List(context.Background(), r.db.Queue, jobs.ListFilter{Kinds: []string{jobs.KindNotifySend}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func waitJobs(t *testing.T, r *rig, what string, ok func([]jobs.JobInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok(notifyJobs(t, r)) {
		if time.Now().After(deadline) {
			for _, j := range notifyJobs(t, r) {
				last := ""
				if len(j.Errors) > 0 {
					last = j.Errors[len(j.Errors)-1].Error
				}
				t.Logf("job %d %s attempt %d %s %s", j.ID, j.State, j.Attempt, j.Args, last)
			}
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readyRacing is rig.ready for a rig whose worker validates too: a verdict
// the worker recorded first (valid, from the responder) is as good.
func readyRacing(t *testing.T, r *rig, o *store.Order) {
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
		err = r.st.ChallengeVerdict(ctx, store.Verdict{ChallengeID: ch.ID, Status: acme.StatusValid})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			t.Fatal(err)
		}
	}
	r.waitOrder(t, o.ID, acme.StatusReady)
}
