package protocol_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testworker"
	"github.com/hallmark-ca/hallmark/worker"
)

// revokeHook is a custom backend's revoke hook: a real script that logs each
// request it gets (one line per call, naming the serial) and answers as the
// file mode-<serial> next to it says: accept, refuse, badreason, odd (a
// type of its own), down (the backend cannot be reached: exit 1) or slow
// (refuse after 3 s).
const revokeHook = `dir=$1
in=$(cat)
serial=$(printf '%s' "$in" | sed -n 's/.*"serial":"\([0-9a-f]*\)".*/\1/p')
echo "$serial" >> "$dir/calls"
case $(cat "$dir/mode-$serial") in
accept) echo '{"status": "revoked"}' ;;
refuse) echo '{"error": {"type": "unauthorized", "detail": "certificate is under legal hold"}}' ;;
badreason) echo '{"error": {"type": "urn:ietf:params:acme:error:badRevocationReason", "detail": "the registry accepts only keyCompromise"}}' ;;
odd) echo '{"error": {"type": "registryLocked", "detail": "certificate is under legal hold"}}' ;;
slow) sleep 3; echo '{"error": {"type": "unauthorized", "detail": "certificate is under legal hold"}}' ;;
*) echo 'the upstream registry is unreachable' >&2; exit 1 ;;
esac
`

// hookDir is where revokeHook lives and keeps its state.
type hookDir string

func newHook(t *testing.T) (hookDir, *custom.Backend) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "revoke.sh")
	if err := os.WriteFile(script, []byte(revokeHook), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := custom.New(custom.Config{Name: "hooks", Timeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Custom: signerconf.Custom{IssueCommand: []string{"false"}, RevokeCommand: []string{"sh", script, dir}}})
	if err != nil {
		t.Fatal(err)
	}
	return hookDir(dir), b
}

// answer sets how the hook answers for serial from now on.
func (h hookDir) answer(t *testing.T, serial, mode string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(string(h), "mode-"+serial), []byte(mode), 0o600); err != nil {
		t.Fatal(err)
	}
}

// calls counts the hook's runs for serial.
func (h hookDir) calls(serial string) int {
	b, _ := os.ReadFile(filepath.Join(string(h), "calls"))
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == serial {
			n++
		}
	}
	return n
}

// startRevokeWorker starts a real worker over its own handle on e's
// database (on SQLite, as good as another process), mounting b for the
// hooked profile and working only that profile's queue: the harness
// records challenge verdicts and issuances itself.
func startRevokeWorker(t *testing.T, e *env, b worker.Backend) {
	t.Helper()
	ctx := context.Background()
	db, err := open.Open(ctx, e.url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	cfg := testworker.Config(e.cfg.Profiles, "127.0.0.1:1")
	cfg.Worker.ID = "revoke-test-worker"
	cfg.Worker.JobTimeoutMS, cfg.Worker.RescueAfterMS = 10000, 30000
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := worker.New(cfg, db.Store, worker.Options{Logger: log, Backends: map[string]worker.Backend{"hooked": b}})
	if err != nil {
		t.Fatal(err)
	}
	// A backend that is down is retried about every second: a few
	// attempts fit in one request's wait, and the ten River allows outlast
	// the test's retry.
	testworker.Serve(t, w, db.Queue, func(s *jobs.Settings) { s.RetryBase, s.RetryMax = time.Second, time.Second }, jobs.ProfileQueue("hooked"))
}

// revokeJobs counts the signer_revoke jobs of serial.
func (e *env) revokeJobs(t *testing.T, serial string) int {
	t.Helper()
	if e.kind == "sqlite" {
		// The path is an argument: count rewrites each $ of the statement.
		return e.count(t, "SELECT count(*) FROM river_job WHERE kind = $1 AND json_extract(args, $2) = $3", jobs.KindSignerRevoke, "$.serial", serial)
	}
	return e.count(t, "SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'serial' = $2", jobs.KindSignerRevoke, serial)
}

// hookedProfile adds a profile whose backend is the custom backend "hooks",
// and a request deadline that leaves revokeCert 2 s to wait.
func hookedProfile(cfg *protocol.Config) {
	p := cfg.Profiles["default"]
	p.Description, p.Backend, p.Signer = "signed by the operator's hooks", "custom", "hooks"
	cfg.Profiles["hooked"] = p
	cfg.Server.RequestTimeoutMS = 3000
}

// TestRevokeCertRemoteOutcome: revokeCert of a custom backend's certificate,
// through a real worker running real hooks, tells the client what the
// backend answered to this request. A refusal comes back as the backend's
// problem type, naming the backend and quoting its reason, with the
// certificate unrevoked and no CRL queued; a retry asks the backend again
// and takes its new answer. A backend that cannot be reached is still 503
// with Retry-After while the job is retried, and the revocation goes
// through once it is back. A retry while the job is outstanding waits on
// that job rather than queueing a second.
func TestRevokeCertRemoteOutcome(t *testing.T) {
	t.Parallel()
	type step = revokeStep
	cases := []struct {
		name  string
		steps []step
	}{
		{"refused", []step{
			{mode: "refuse", status: http.StatusForbidden, problem: acme.ProblemUnauthorized, calls: 1, jobs: 1},
		}},
		{"refused, then accepted on a retry", []step{
			{mode: "refuse", status: http.StatusForbidden, problem: acme.ProblemUnauthorized, calls: 1, jobs: 1},
			{mode: "refuse", status: http.StatusForbidden, problem: acme.ProblemUnauthorized, calls: 2, jobs: 2},
			{mode: "accept", status: http.StatusOK, calls: 3, jobs: 3, revoked: true},
		}},
		{"refused with the backend's own type", []step{
			{mode: "badreason", status: http.StatusBadRequest, problem: acme.ProblemBadRevocationReason, calls: 1, jobs: 1},
		}},
		{"refused with a type that has no status", []step{
			{mode: "odd", status: http.StatusForbidden, problem: "urn:ietf:params:acme:error:registryLocked", calls: 1, jobs: 1},
		}},
		{"unreachable, then back", []step{
			{mode: "down", status: http.StatusServiceUnavailable, problem: acme.ProblemServerInternal, calls: -2, jobs: 1},
			{mode: "accept", status: http.StatusOK, calls: -3, jobs: 1, revoked: true},
		}},
		{"a retry while the job runs waits on it", []step{
			{mode: "slow", status: http.StatusServiceUnavailable, problem: acme.ProblemServerInternal, calls: 1, jobs: 1},
			{status: http.StatusForbidden, problem: acme.ProblemUnauthorized, calls: 1, jobs: 1},
		}},
	}
	withStores(t, hookedProfile, func(t *testing.T, e *env) {
		url := e.base + "/acme/revoke-cert"
		a := e.register(t)
		hook, backend := newHook(t)
		certs := make([]issued, len(cases))
		for i := range cases {
			certs[i] = e.issue(t, a, "hooked", fmt.Sprintf("case%d.hooked.example", i))
		}
		// After issuing: the worker finds each order's signer_issue job done.
		startRevokeWorker(t, e, backend)
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := certs[i]
				for _, st := range tc.steps {
					if st.mode != "" {
						hook.answer(t, c.serial, st.mode)
					}
					start := time.Now()
					r := e.post(t, a, url, revokePayload(c.der, 4))
					t.Logf("%s, hook %q: answered %d after %v", e.kind, cmp.Or(st.mode, "unchanged"), r.status, time.Since(start).Round(time.Millisecond))
					st.check(t, e, hook, c.serial, r)
				}
			})
		}
	})
}

// revokeStep is one revokeCert request and what it must come to.
type revokeStep struct {
	mode    string // the hook's answer from this step on; "" leaves it
	status  int
	problem acme.ProblemType // "" for 200
	calls   int              // the hook's runs for the certificate after the step; -n for at least n
	jobs    int              // its signer_revoke jobs after the step
	revoked bool
}

func (st revokeStep) check(t *testing.T, e *env, hook hookDir, serial string, r *response) {
	t.Helper()
	if st.problem == "" {
		wantStatus(t, r, st.status)
	} else {
		p := wantProblem(t, e, r, st.problem, st.status)
		refusal := st.status != http.StatusServiceUnavailable
		if named := strings.Contains(p.Detail, "refused by the custom backend: "); named != refusal {
			t.Errorf("detail %q names the refusing backend: %v, want %v", p.Detail, named, refusal)
		}
		if refusal && !strings.Contains(p.Detail, "legal hold") && !strings.Contains(p.Detail, "only keyCompromise") {
			t.Errorf("detail %q does not quote the hook's reason", p.Detail)
		}
		if !refusal && r.header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
	}
	ctx := context.Background()
	got, err := e.st.CertificateBySerial(ctx, serial)
	if err != nil {
		t.Fatal(err)
	}
	if (got.RevokedAt != nil) != st.revoked || st.revoked && got.RevocationReason != 4 {
		t.Errorf("certificate revoked at %v with reason %d after the request; want revoked %v (reason 4)", got.RevokedAt, got.RevocationReason, st.revoked)
	}
	if n := hook.calls(serial); st.calls >= 0 && n != st.calls || st.calls < 0 && n < -st.calls {
		t.Errorf("the hook ran %d times for %s, want %d (negative: at least)", n, serial, st.calls)
	}
	if n := e.revokeJobs(t, serial); n != st.jobs {
		t.Errorf("%d signer_revoke jobs for %s, want %d", n, serial, st.jobs)
	}
	// Hallmark signs no CRL for a custom backend's certificate, refused or
	// revoked.
	if n := e.jobCount(t, jobs.KindCRLGenerate); n != 0 {
		t.Errorf("%d crl_generate jobs, want none", n)
	}
	if revs, err := e.st.Revocations(ctx, "custom:hooks"); err != nil || len(revs) != 0 {
		t.Errorf("revocation rows of custom:hooks = %+v, %v; want none", revs, err)
	}
}
