package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
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
			cfg, err := os.ReadFile(c.config)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.config, append(cfg, backendsConfig...), 0o600); err != nil {
				t.Fatal(err)
			}
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
