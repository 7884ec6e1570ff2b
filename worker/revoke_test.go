package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/worker"
)

// TestRevokeGoesToTheIssuingBackend: a signer_revoke job is run by the
// backend that issued the certificate, as its issuer id says, whichever
// profile's queue it came on (profiles change; a job queued by an older
// frontend names the certificate's profile as it was). A certificate the
// worker signed is recorded for its issuer's CRL, never handed to hooks that
// did not issue it (they would say "revoked" and no CRL would list it); a
// custom backend's certificate queued on a local profile goes to its hooks,
// never into a revocation row (whose crl_generate for "custom:hooks" cannot
// be queued, so the job would be retried forever).
func TestRevokeGoesToTheIssuingBackend(t *testing.T) {
	dir := t.TempDir()
	hookLog := filepath.Join(dir, "revoked")
	// The revoke hook appends each request to hookLog and says revoked.
	hooks, err := custom.New(custom.Config{Name: "hooks", Timeout: 5 * time.Second,
		Custom: signerconf.Custom{IssueCommand: []string{"false"}, RevokeCommand: []string{"sh", "-c", `cat >> "$0"; echo >> "$0"; echo '{"status": "revoked"}'`, hookLog}}})
	if err != nil {
		t.Fatal(err)
	}
	def := profile.Default()
	hooked := def
	hooked.Backend, hooked.Signer = "custom", "hooks"
	r := newRig(t, rigOpts{profiles: map[string]profile.Profile{"hooked": hooked}, backends: map[string]worker.Backend{"hooked": hooks}})
	ctx := context.Background()
	acct := r.account(t)
	queue := func(serial, profile string) {
		t.Helper()
		if _, err := r.st.RevokeQueue(ctx, serial, profile, 1, store.AuditEvent{Actor: "test", Action: "revoke", Subject: serial}); err != nil {
			t.Fatal(err)
		}
	}
	// hooksIssued stores serial for name as the hooks would have issued
	// it, with profile recorded, for an order no worker signs (its
	// profile is not mounted).
	hooksIssued := func(serial, profile, name string) {
		t.Helper()
		o := r.order(t, acct, "unmounted", name)
		r.ready(t, o)
		if _, _, err := r.st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil {
			t.Fatal(err)
		}
		now, _ := r.st.Now(ctx)
		if err := r.st.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{Serial: serial, IssuerID: hooks.IssuerID(), Profile: profile,
			DER: []byte{0x30, 0x01}, Names: []string{name}, NotBefore: now, NotAfter: now.Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	asked := func(serial string) bool {
		b, _ := os.ReadFile(hookLog)
		return strings.Contains(string(b), `"serial":"`+serial+`"`)
	}

	t.Run("a local certificate queued on a custom profile", func(t *testing.T) {
		serial := r.issue(t, acct, "local.worker.test")
		queue(serial, "hooked")
		r.waitCRL(t, 20*time.Second, serial)
		if asked(serial) {
			t.Errorf("the hooks were asked to revoke %s, which the worker signed", serial)
		}
	})

	t.Run("a custom certificate queued on a local profile", func(t *testing.T) {
		// Stored as the hooks issued it, of a profile that is local now.
		hooksIssued("c0ffee", "default", "hooked.worker.test")
		queue("c0ffee", "default")
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			c, err := r.st.CertificateBySerial(ctx, "c0ffee")
			if err != nil {
				t.Fatal(err)
			}
			if c.RevokedAt != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the custom backend's certificate is not revoked 20 s after its signer_revoke job was queued on a local profile")
			}
		}
		if !asked("c0ffee") {
			t.Error("recorded revoked without asking the hooks that issued it")
		}
		if revs, err := r.st.Revocations(ctx, hooks.IssuerID()); err != nil || len(revs) != 0 {
			t.Errorf("revocation rows for %s = %+v, %v; want none (Hallmark signs no CRL for it)", hooks.IssuerID(), revs, err)
		}
	})

	t.Run("a key compromise that joins a queued revocation", func(t *testing.T) {
		// Queued as superseded while no worker runs, then reported as a
		// key compromise: one job, and the hooks are told keyCompromise.
		// Before, they were told the first request's reason.
		hooksIssued("c0ffe2", "hooked", "joined.worker.test")
		r.stopFirst(t)
		first, err := r.st.RevokeQueue(ctx, "c0ffe2", "hooked", 4, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "c0ffe2"})
		if err != nil {
			t.Fatal(err)
		}
		if joined, err := r.st.RevokeQueue(ctx, "c0ffe2", "hooked", 1, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "c0ffe2"}); err != nil || joined != first {
			t.Fatalf("the key compromise report: job %d, %v; want it to join job %d", joined, err, first)
		}
		r.startWorker(t, "joined-worker", r.issuer, 0)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if c, err := r.st.CertificateBySerial(ctx, "c0ffe2"); err == nil && c.RevokedAt != nil {
				if c.RevocationReason != 1 {
					t.Errorf("recorded revoked with reason %d, want 1 (keyCompromise)", c.RevocationReason)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("not revoked 20 s after the worker started")
			}
		}
		b, _ := os.ReadFile(hookLog)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"serial":"c0ffe2"`) && !strings.Contains(line, `"reason":1`) {
				t.Errorf("the hooks were asked %s; want reason 1", line)
			}
		}
	})
}
