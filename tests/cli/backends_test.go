package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/tests/testworker"
	"github.com/hallmark-ca/hallmark/worker"
)

// backendsConfig is a deployment that mixes backends: the built-in local
// profile, a relay profile and a custom one, each naming its backend.
const backendsConfig = `
[profiles.default]
backend = "local"
validity_hours = 2160
challenges = ["dns-01"]

[profiles.upstream]
backend = "relay"
signer = "corp"
validity_hours = 2160
challenges = ["dns-01"]

[profiles.hooked]
backend = "custom"
signer = "hooks"
validity_hours = 2160
challenges = ["dns-01"]

[backends.corp]
type = "relay"
directory_url = "https://acme.corp.example/directory"
account_key = "relay-account.key"

[backends.hooks]
type = "custom"
issue_command = ["/bin/false"]
revoke_command = ["/bin/false"]
timeout_ms = 1000
`

// TestRevokeFollowsTheIssuer: which backend revokes a certificate is the
// one that issued it, as its issuer id says, not what its profile names
// today. A deployment's profiles change: a relay profile is removed or
// renamed, a profile moves from a key file to a relay. A relay's or custom
// backend's certificate must still reach that backend through signer_revoke
// (queued on a profile that names the backend), never a local revocation
// row, whose crl_generate job cannot even be queued ("crl_relay:corp" is
// no River queue name); a certificate Hallmark signed itself is revoked
// locally and listed in its issuer's CRL. A remote certificate whose backend
// no profile names any more is refused with what to do.
func TestRevokeFollowsTheIssuer(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			c.configure(backendsConfig)
			a := c.account()
			for _, tc := range []struct {
				name, serial, issuer, profile string
				code                          int
				backend, outcome              string
				queue                         string // the signer_revoke job's queue; "" for none
				stderr                        string
			}{
				{name: "a relay's certificate of its profile", serial: "d1", issuer: "relay:corp", profile: "upstream", backend: "relay", outcome: "queued", queue: "profile_upstream"},
				{name: "a relay's certificate of a removed profile", serial: "d2", issuer: "relay:corp", profile: "old-relay", backend: "relay", outcome: "queued", queue: "profile_upstream"},
				{name: "a relay's certificate of a profile now local", serial: "d3", issuer: "relay:corp", profile: "default", backend: "relay", outcome: "queued", queue: "profile_upstream"},
				{name: "a custom backend's certificate of a removed profile", serial: "d4", issuer: "custom:hooks", profile: "gone", backend: "custom", outcome: "queued", queue: "profile_hooked"},
				{name: "a local certificate of a profile now relayed", serial: "d5", issuer: "issuer-1", profile: "upstream", backend: "local", outcome: "revoked"},
				{name: "a relay no profile names", serial: "d6", issuer: "relay:retired", profile: "retired", code: 1, stderr: `add a profile with backend = "relay" and signer = "retired"`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c.issuedAs(a, tc.serial+".example.com", tc.serial, tc.issuer, tc.profile)
					var rep struct {
						CRLQueued    []string `json:"crl_queued"`
						Certificates []struct {
							Backend, Outcome string
						}
					}
					r := c.run("revoke", "--json", tc.serial)
					if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
						t.Fatalf("hallmark revoke %s: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", tc.serial, r.code, tc.code, tc.stderr, r.stdout, r.stderr)
					}
					if tc.code != 0 {
						if got := c.cert(tc.serial); got.RevokedAt != nil {
							t.Errorf("certificate %s revoked after a refusal", tc.serial)
						}
						return
					}
					if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
						t.Fatal(err)
					}
					if len(rep.Certificates) != 1 || rep.Certificates[0].Backend != tc.backend || rep.Certificates[0].Outcome != tc.outcome {
						t.Fatalf("hallmark revoke %s = %+v, want backend %s, outcome %s", tc.serial, rep, tc.backend, tc.outcome)
					}
					revs, err := c.st().Revocations(context.Background(), tc.issuer)
					if err != nil {
						t.Fatal(err)
					}
					listed := len(revs) > 0 && revs[len(revs)-1].Serial == tc.serial
					if listed != (tc.queue == "") {
						t.Errorf("a revocation row for %s is %v, want %v (rows are for Hallmark's own CRLs)", tc.serial, listed, tc.queue == "")
					}
					var js []struct {
						Queue string
						Args  struct{ Serial string }
					}
					c.jsonOf(&js, 0, "jobs", "list", "--json", "--kind", "signer_revoke")
					var queues []string
					for _, j := range js {
						if j.Args.Serial == tc.serial {
							queues = append(queues, j.Queue)
						}
					}
					if want := fmt.Sprint([]string{tc.queue}); tc.queue != "" && fmt.Sprint(queues) != want || tc.queue == "" && len(queues) != 0 {
						t.Errorf("signer_revoke jobs of %s are on queues %v, want %q", tc.serial, queues, tc.queue)
					}
				})
			}
		})
	}
}

// refusingHook is a custom backend's revoke hook, a real script: it counts
// its runs in the file calls next to it and answers as the file mode says,
// refusing (the default) or revoking.
const refusingHook = `dir=$1
cat > /dev/null
echo run >> "$dir/calls"
if [ "$(cat "$dir/mode" 2>/dev/null)" = accept ]; then
	echo '{"status": "revoked"}'
else
	echo '{"error": {"type": "malformed", "detail": "certificate is under legal hold"}}'
fi
`

// hookedConfig names the hooks as a profile's custom backend.
const hookedConfig = `
[profiles.hooked]
backend = "custom"
signer = "hooks"
validity_hours = 2160
challenges = ["dns-01"]

[backends.hooks]
type = "custom"
issue_command = ["/bin/false"]
revoke_command = ["/bin/sh", %q, %q]
timeout_ms = 5000
`

// TestRevokeRefusedByTheBackend: `hallmark revoke --wait` of a custom
// backend's certificate, run by a real worker with a real hook, prints the
// backend's refusal and exits 6 (a refusal of type malformed is not a usage
// error, exit 2); run again, it asks the backend again, and revokes once the
// backend accepts. Without --wait it says the backend has not answered and
// how to see its answer.
func TestRevokeRefusedByTheBackend(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			c := newCA(t, d.url(t))
			dir := t.TempDir()
			script := filepath.Join(dir, "revoke.sh")
			if err := os.WriteFile(script, []byte(refusingHook), 0o700); err != nil {
				t.Fatal(err)
			}
			c.configure(fmt.Sprintf(hookedConfig, script, dir))
			startHookWorker(t, c, script, dir)
			a := c.account()
			calls := func() int {
				b, _ := os.ReadFile(filepath.Join(dir, "calls"))
				return strings.Count(string(b), "run\n")
			}
			const serial = "ee01"
			c.issuedAs(a, "hooked.example.com", serial, "custom:hooks", "hooked")
			for _, tc := range []struct {
				name   string
				accept bool
				args   []string
				code   int
				// outcome is the certificate's in --json; stdout is in the
				// table's output, stderr in the error line.
				outcome, stdout, stderr string
				calls                   int
				revoked                 bool
			}{
				{name: "refused", args: []string{"--wait", "20s"}, code: 6, outcome: "refused",
					stderr: "refused by the custom backend: certificate is under legal hold", calls: 1},
				{name: "refused again: asked again", args: []string{"--wait", "20s"}, code: 6, outcome: "refused",
					stderr: "refused by the custom backend: certificate is under legal hold", calls: 2},
				{name: "accepted", accept: true, args: []string{"--wait", "20s"}, outcome: "revoked", calls: 3, revoked: true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if tc.accept {
						if err := os.WriteFile(filepath.Join(dir, "mode"), []byte("accept"), 0o600); err != nil {
							t.Fatal(err)
						}
					}
					r := c.run(append(append([]string{"revoke", "--json", "--reason", "superseded"}, tc.args...), serial)...)
					if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
						t.Fatalf("hallmark revoke: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, tc.stderr, r.stdout, r.stderr)
					}
					var rep struct {
						Certificates []struct{ Outcome, Error string }
					}
					if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Certificates) != 1 || rep.Certificates[0].Outcome != tc.outcome {
						t.Fatalf("hallmark revoke --json = %s (%v); want one certificate, outcome %s", r.stdout, err, tc.outcome)
					}
					if n := calls(); n != tc.calls {
						t.Errorf("the hook ran %d times, want %d", n, tc.calls)
					}
					if got := c.cert(serial); (got.RevokedAt != nil) != tc.revoked {
						t.Errorf("certificate revoked at %v, want revoked %v", got.RevokedAt, tc.revoked)
					}
				})
			}
			t.Run("the table says so", func(t *testing.T) {
				if err := os.WriteFile(filepath.Join(dir, "mode"), []byte("refuse"), 0o600); err != nil {
					t.Fatal(err)
				}
				c.issuedAs(a, "hooked2.example.com", "ee02", "custom:hooks", "hooked")
				r := c.want(6, "revoke", "--wait", "20s", "ee02")
				if !strings.Contains(r.stdout, "refused") || !strings.Contains(r.stderr, "hallmark: refused by the custom backend: certificate is under legal hold") {
					t.Errorf("hallmark revoke of a refused certificate prints\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				}
				// Not waiting, the backend has not answered: say how to
				// get its answer, not that `certs show` has it.
				c.issuedAs(a, "hooked3.example.com", "ee03", "custom:hooks", "hooked")
				r = c.want(0, "revoke", "ee03")
				if !strings.Contains(r.stdout, "has not answered yet; run `hallmark revoke --wait") {
					t.Errorf("hallmark revoke without --wait prints\n%s", r.stdout)
				}
			})
		})
	}
}

// startHookWorker starts a real worker on c's database mounting the hooks
// for the hooked profile, working only that profile's queue (the tests
// store their certificates themselves).
func startHookWorker(t *testing.T, c *ca, script, dir string) {
	t.Helper()
	hooks, err := custom.New(custom.Config{Name: "hooks", Timeout: 5 * time.Second,
		Custom: signerconf.Custom{IssueCommand: []string{"/bin/false"}, RevokeCommand: []string{"/bin/sh", script, dir}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testworker.Config(map[string]profile.Profile{"hooked": {Backend: "custom", Signer: "hooks", ValidityHours: 2160}}, "127.0.0.1:1")
	cfg.Worker.ID = "cli-test-worker"
	w, err := worker.New(cfg, c.st(), worker.Options{Backends: map[string]worker.Backend{"hooked": hooks}})
	if err != nil {
		t.Fatal(err)
	}
	testworker.Serve(t, w, c.db.Queue, nil, jobs.ProfileQueue("hooked"))
}
