package worker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/worker"
)

// TestProfileIssuersRotateAndPickByKey: a running worker signs with the
// issuers the store names for its profile, read afresh after a rotation
// (no restart): before it, the configured issuer; after it, of the two
// new ones, the one of the CSR key's family (ECDSA or RSA).
func TestProfileIssuersRotateAndPickByKey(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			// The names' http-01 targets accept and never answer, so the
			// worker's own validation cannot settle a challenge before the
			// test validates it (rig.ready).
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			silent := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) { <-req.Context().Done() }))
			silent.Listener = ln
			silent.Start()
			t.Cleanup(silent.Close)
			r := newRig(t, rigOpts{kind: kind, httpPort: ln.Addr().(*net.TCPAddr).Port})
			t.Cleanup(silent.CloseClientConnections) // before the worker stops, which waits for them
			r.stopFirst(t)
			ctx := context.Background()
			dir := t.TempDir()
			if _, err := signer.InitLocal(dir, signer.CAOptions{Name: "Rotate", URLBase: "http://ca.test"}); err != nil {
				t.Fatal(err)
			}
			first, err := signer.LoadLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			ec, err := signer.CreateIntermediate(dir, signer.CAOptions{URLBase: "http://ca.test"}, "Rotate E1", "p256")
			if err != nil {
				t.Fatal(err)
			}
			rs, err := signer.CreateIntermediate(dir, signer.CAOptions{URLBase: "http://ca.test"}, "Rotate R1", "rsa2048")
			if err != nil {
				t.Fatal(err)
			}
			for _, iss := range []*signer.Issuer{first, ec, rs} {
				kt, _ := signer.KeyType(iss.Cert.PublicKey)
				if err := r.st.IssuerRecordPut(ctx, store.IssuerRecord{ID: iss.ID, Name: iss.Cert.Subject.CommonName, KeyType: kt, NotAfter: iss.Cert.NotAfter}, iss.Cert.Raw, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.st.ProfileIssuerDefault(ctx, "default", first.ID); err != nil {
				t.Fatal(err)
			}
			w, err := worker.New(r.cfg, r.st, worker.Options{Issuers: map[string]*signer.Issuer{"default": first},
				Load: func(id string) (*signer.Issuer, error) { return signer.LoadIntermediate(dir, id) }})
			if err != nil {
				t.Fatal(err)
			}
			serveWorker(t, r, w)
			t.Cleanup(silent.CloseClientConnections) // before this worker stops too

			ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
			acct := r.account(t)
			issue := func(name string, key any) string {
				o := r.order(t, acct, "default", name)
				r.ready(t, o)
				if _, claimed, err := r.st.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, csrFor(t, key, name), nil); err != nil || !claimed {
					t.Fatalf("finalize: %v %v", claimed, err)
				}
				c, _ := r.issued(t, o.ID)
				return c.IssuerID
			}
			if got := issue("before.rotate.test", ecKey); got != first.ID {
				t.Fatalf("before the rotation signed by %s, want the configured %s", got, first.ID)
			}
			retiring, err := r.st.IssuerRotate(ctx, "default", []string{ec.ID, rs.ID}, store.AuditEvent{Actor: "test", Action: "issuer.rotate"})
			if err != nil || len(retiring) != 1 || retiring[0] != first.ID {
				t.Fatalf("IssuerRotate = %v, %v", retiring, err)
			}
			time.Sleep(1200 * time.Millisecond) // the worker's mapping lives a second
			if got := issue("ec.rotate.test", ecKey); got != ec.ID {
				t.Fatalf("an ECDSA CSR after the rotation signed by %s, want %s", got, ec.ID)
			}
			if got := issue("rsa.rotate.test", rsaKey); got != rs.ID {
				t.Fatalf("an RSA CSR after the rotation signed by %s, want %s", got, rs.ID)
			}
		})
	}
}

// serveWorker runs w's jobs on the rig's queue until the test ends.
func serveWorker(t *testing.T, r *rig, w *worker.Worker) {
	t.Helper()
	reg, err := w.Registry()
	if err != nil {
		t.Fatal(err)
	}
	s := w.JobSettings()
	s.Periodic, s.Scheduled = nil, nil
	runner, err := r.db.Queue.Start(context.Background(), reg, s)
	if err != nil {
		t.Fatal(err)
	}
	w.Attach(runner)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Stop(sctx)
	})
}
