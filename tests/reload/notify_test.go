package reload

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// TestReloadAddsNotification: a webhook destination added by a reload
// receives the next certificate_issued event, and not the one issued
// before: the store's routes (in both processes) and the worker's senders
// switched together.
func TestReloadAddsNotification(t *testing.T) {
	for _, d := range harness.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
			}))
			defer hook.Close()
			received := func() string {
				mu.Lock()
				defer mu.Unlock()
				return strings.Join(bodies, "\n")
			}

			ca := startCA(t, d.URL(t))
			order(t, ca, "unheard."+d.Name+".test")
			edit(t, ca, func(s string) string {
				return s + fmt.Sprintf("\n[notify]\n[[notify.destinations]]\nname = \"hook\"\nkind = \"webhook\"\nevents = [\"certificate_issued\"]\ntimeout_ms = 5000\nurl = %q\n", hook.URL)
			})
			hangup(t, ca)
			for _, p := range []string{"frontend", "worker"} {
				if a, r := outcomes(ca, p); a != 1 || r != 0 {
					t.Fatalf("%s: %d applied, %d refused; want 1 applied\n%s", p, a, r, harness.Tail(ca.Log(p), 3000))
				}
			}
			name := "heard." + d.Name + ".test"
			order(t, ca, name)
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(received(), name); {
				if time.Now().After(deadline) {
					t.Fatalf("the webhook added by the reload did not hear %s's certificate; it got:\n%s\nworker:\n%s", name, received(), harness.Tail(ca.Log("worker"), 3000))
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			if got := received(); strings.Contains(got, "unheard.") || strings.Count(got, name) == 0 {
				t.Fatalf("the webhook got %q: want the certificate issued after the reload only", got)
			}
		})
	}
}
