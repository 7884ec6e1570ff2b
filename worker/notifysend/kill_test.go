package notifysend_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
	"github.com/hallmark-ca/hallmark/worker/notifysend"
)

const (
	helperURLEnv  = "HALLMARK_NOTIFY_HELPER_DB"
	helperHookEnv = "HALLMARK_NOTIFY_HELPER_HOOK"
	doomedWorker  = "doomed-notifier"
)

func hookConfig(url string) notify.Config {
	c := notify.Config{Destinations: []notify.Destination{{Name: "hook", Kind: notify.KindWebhook, URL: url, TimeoutMS: 20000}}}
	c.Defaults()
	return c
}

// startNotifier runs notify_send jobs over db as worker id.
func startNotifier(t testing.TB, db *open.DB, c notify.Config, id string, jobTimeout, rescueAfter time.Duration) {
	t.Helper()
	s, err := notifysend.New(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	reg := &jobs.Registry{}
	if err := jobs.Register(reg, s.Handle); err != nil {
		t.Fatal(err)
	}
	r, err := db.Queue.Start(context.Background(), reg, jobs.Settings{WorkerID: id, Queues: []string{jobs.QueueNotify},
		JobTimeout: jobTimeout, RescueAfter: rescueAfter, RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
}

// TestHelperNotifier is the worker process TestNotifierKilledMidDelivery
// kills; it does nothing when run on its own.
func TestHelperNotifier(t *testing.T) {
	url := os.Getenv(helperURLEnv)
	if url == "" {
		t.Skip("run by TestNotifierKilledMidDelivery")
	}
	db, err := open.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	startNotifier(t, db, hookConfig(os.Getenv(helperHookEnv)), doomedWorker, 25*time.Second, time.Minute)
	time.Sleep(90 * time.Second) // the parent kills us long before
}

// TestNotifierKilledMidDelivery: a worker process killed (SIGKILL) while
// its webhook delivery is in flight leaves its one job running; River's
// rescuer hands it to another worker, which delivers it. The job is not
// duplicated, and the receiver sees the same Idempotency-Key both times,
// so it can tell the retry from a new event.
func TestNotifierKilledMidDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the dead worker's leadership to expire and the rescuer (~20 s)")
	}
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			answered := 0
			held, release := make(chan struct{}, 1), make(chan struct{})
			defer close(release)
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				first := len(keys) == 1
				mu.Unlock()
				if first { // the doomed worker's delivery: hold it until the worker is dead
					held <- struct{}{}
					select {
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				mu.Lock()
				answered++
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(hook.Close)
			url := testdb.SQLite(t)
			if dialect == "postgres" {
				url = testdb.Postgres(t)
			}
			db := testdb.OpenURL(t, url)
			c := hookConfig(hook.URL)
			db.NotifyRoute(c.Route)
			acct, err := db.Store.AccountCreateTrailed(context.Background(), &store.Account{KeyJWK: []byte(`{"kty":"OKP","crv":"Ed25519","x":"k"}`),
				Thumbprint: "thumb-k", TermsAgreed: true}, "", store.AuditEvent{Action: store.ActionAccountCreated, Trail: true})
			if err != nil {
				t.Fatal(err)
			}

			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNotifier$")
			cmd.Env = append(os.Environ(), helperURLEnv+"="+url, helperHookEnv+"="+hook.URL)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			t.Cleanup(func() {
				if !killed {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			})
			select {
			case <-held:
			case <-time.After(30 * time.Second):
				t.Fatal("the worker process never delivered")
			}
			_ = cmd.Process.Kill() // SIGKILL, mid-delivery
			_ = cmd.Wait()
			killed = true
			killedAt := time.Now()

			startNotifier(t, db, c, "rescuer", time.Second, 2*time.Second)
			var js []jobs.JobInfo
			deadline := time.Now().Add(90 * time.Second)
			for {
				js, err = jobs.List(context.Background(), db.Queue, jobs.ListFilter{Kinds: []string{jobs.KindNotifySend}})
				if err != nil {
					t.Fatal(err)
				}
				if len(js) == 1 && js[0].State == "completed" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the job was not rescued and completed: %+v", js)
				}
				time.Sleep(200 * time.Millisecond)
			}
			j := js[0]
			if !slices.Equal(j.AttemptedBy, []string{doomedWorker, "rescuer"}) || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "Stuck job rescued") {
				t.Errorf("job attempted by %v, errors %+v: want the dead worker, the rescue, then the rescuer", j.AttemptedBy, j.Errors)
			}
			mu.Lock()
			defer mu.Unlock()
			want := notify.AccountCreated + "/" + acct.ID + "/hook"
			if len(keys) != 2 || keys[0] != want || keys[1] != want || answered != 1 {
				t.Errorf("receiver saw %v and acknowledged %d: want %s twice (the killed attempt and the rescue), acknowledged once", keys, answered, want)
			}
			t.Logf("%s: rescued and delivered %s after the kill", dialect, time.Since(killedAt).Round(time.Millisecond))
		})
	}
}
