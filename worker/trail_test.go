package worker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/store"
)

// lockedLog is a log the workers write while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestTrailFromTheJob: what a request queued the worker records on the
// issuance trail with the request's origin — a certificate stored, an
// order failed, a validation failed — each in the transaction of its
// verdict, and its log lines for the job carry the request's id.
func TestTrailFromTheJob(t *testing.T) {
	// Answers wrong for wrong.trail.test; keeps the other names' checks
	// waiting, so that the test's own verdicts (rig.ready) come first.
	var validKA atomic.Value // the key authorization valid.trail.test answers
	validKA.Store("")
	wrong := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.Host, "valid.trail.test") {
			fmt.Fprint(w, validKA.Load())
			return
		}
		if strings.HasPrefix(req.Host, "wrong.trail.test") {
			fmt.Fprint(w, "not-it")
			return
		}
		<-req.Context().Done()
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wrong.Listener = ln
	wrong.Start()
	t.Cleanup(wrong.Close)
	p := profile.Default()
	p.KeyTypes = []string{"p256"}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var logs lockedLog
			log := slog.New(slog.NewTextHandler(&logs, nil))
			r := newRig(t, rigOpts{kind: kind, httpPort: ln.Addr().(*net.TCPAddr).Port, log: log,
				profiles: map[string]profile.Profile{"ecdsa-only": p}})
			acct := r.account(t)
			asked := func(id string) context.Context {
				return origin.NewContext(context.Background(), &origin.Origin{RequestID: id, ClientAddr: "192.0.2.44", UserAgent: "certbot/2 (é)"})
			}

			o := r.order(t, acct, "ecdsa-only", "issued.trail.test")
			r.ready(t, o)
			key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if _, _, err := r.st.OrderFinalizeBegin(asked("req-issue"), store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, "issued.trail.test"), nil); err != nil {
				t.Fatal(err)
			}
			c, _ := r.issued(t, o.ID)
			wantWorkerTrail(t, r, "req-issue", store.ActionCertificateIssued, c.Serial)
			waitLog(t, &logs, "certificate issued", "request_id=req-issue")

			o = r.order(t, acct, "ecdsa-only", "refused.trail.test")
			r.ready(t, o)
			rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
			if _, _, err := r.st.OrderFinalizeBegin(asked("req-refuse"), store.SignedUse{}, o.ID, o.Profile, csrFor(t, rsaKey, "refused.trail.test"), nil); err != nil {
				t.Fatal(err)
			}
			r.waitOrder(t, o.ID, acme.StatusInvalid)
			wantWorkerTrail(t, r, "req-refuse", store.ActionOrderInvalid, o.ID)
			waitLog(t, &logs, "order failed", "request_id=req-refuse")

			o = r.order(t, acct, "default", "wrong.trail.test")
			az, _ := r.st.AuthzByID(context.Background(), o.AuthzIDs[0])
			if _, _, err := r.st.ChallengeClaim(asked("req-validate"), store.SignedUse{}, az.Challenges[0].ID); err != nil {
				t.Fatal(err)
			}
			r.waitOrder(t, o.ID, acme.StatusInvalid)
			wantWorkerTrail(t, r, "req-validate", store.ActionValidationFailed, az.Challenges[0].ID)
			waitLog(t, &logs, "challenge validated", "request_id=req-validate")

			o = r.order(t, acct, "default", "valid.trail.test")
			az, _ = r.st.AuthzByID(context.Background(), o.AuthzIDs[0])
			validKA.Store(az.Challenges[0].Token + "." + acct.Thumbprint)
			if _, _, err := r.st.ChallengeClaim(asked("req-valid"), store.SignedUse{}, az.Challenges[0].ID); err != nil {
				t.Fatal(err)
			}
			r.waitOrder(t, o.ID, acme.StatusReady)
			wantWorkerTrail(t, r, "req-valid", store.ActionValidationValid, az.Challenges[0].ID)
		})
	}
}

// wantWorkerTrail asserts one trail event of request id: action on
// subject, by the account, with the request's origin.
func wantWorkerTrail(t *testing.T, r *rig, id, action, subject string) {
	t.Helper()
	evs, _, err := r.st.AuditFind(context.Background(), store.AuditFilter{RequestID: id}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	want := origin.Origin{RequestID: id, ClientAddr: "192.0.2.44", UserAgent: "certbot/2 (é)"}
	if len(evs) != 1 || evs[0].Action != action || evs[0].Subject != subject || evs[0].Origin != want || !evs[0].Trail ||
		!strings.HasPrefix(evs[0].Actor, "acme:") || !strings.Contains(evs[0].Detail, "worker test-worker") {
		t.Fatalf("trail of %s = %+v, want one %s on %s from %+v", id, evs, action, subject, want)
	}
}

// waitLog waits for a line of the log with every one of parts.
func waitLog(t *testing.T, l *lockedLog, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(l.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line has %q; log:\n%s", parts, l.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHousekeepingPrunesTheTrail: with audit.retention_days set,
// housekeeping deletes the trail events older than it and keeps the newer
// ones and every operator's action, however old.
func TestHousekeepingPrunesTheTrail(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.stopFirst(t)
	ctx := context.Background()
	now, err := r.st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := now.Add(-49 * time.Hour)
	for _, ev := range []store.AuditEvent{
		{Actor: "cli:alice", Action: "revoke", Subject: "operator-old", At: old},
		{Actor: "acme:a", Action: store.ActionCertificateIssued, Subject: "trail-old", At: old, Trail: true},
		{Actor: "acme:a", Action: store.ActionCertificateIssued, Subject: "trail-new", At: now.Add(-47 * time.Hour), Trail: true},
	} {
		if err := r.st.AuditRecord(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	r.cfg.Audit.RetentionDays = 2
	r.scheduled = true // housekeeping at start, as hallmark-worker runs it
	r.startWorker(t, "pruner", r.issuer, 0)
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs, _, err := r.st.AuditList(ctx, store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(evs))
		for i, e := range evs {
			got[i] = e.Subject
		}
		if strings.Join(got, " ") == "trail trail-new operator-old" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log %v 20s after the worker started, want [trail trail-new operator-old] (the pruning's record first)", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
