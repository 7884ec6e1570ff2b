package worker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer/custom"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/worker"
)

// TestCustomHooksScheduled: a custom backend's crl hook gets its CRL jobs
// and queue as a local issuer does, and its renewal_info hook an
// upstream_renewal refresh; a custom backend without them gets neither.
func TestCustomHooksScheduled(t *testing.T) {
	def := profile.Default()
	withHooks, plain := def, def
	withHooks.Backend, withHooks.Signer = "custom", "full"
	plain.Backend, plain.Signer = "custom", "bare"
	newCustom := func(name string, optional bool) worker.Backend {
		c := signerconf.Custom{IssueCommand: []string{"/bin/true"}, RevokeCommand: []string{"/bin/true"}}
		if optional {
			c.CRLCommand, c.RenewalInfoCommand = []string{"/bin/true"}, []string{"/bin/true"}
		}
		b, err := custom.New(custom.Config{Name: name, Timeout: time.Second, Custom: c})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	backends := map[string]worker.Backend{"full": newCustom("full", true), "bare": newCustom("bare", false)}
	r := newRig(t, rigOpts{profiles: map[string]profile.Profile{"full": withHooks, "bare": plain}, backends: backends})
	w, err := worker.New(r.cfg, r.st, worker.Options{Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.UpstreamRenewals(), []jobs.UpstreamRenewalArgs{{IssuerID: "custom:full", Profile: "full"}}; !slices.Equal(got, want) {
		t.Errorf("upstream renewals %+v, want %+v (only the backend with a renewal_info hook)", got, want)
	}
	q := w.Queues()
	if !slices.Contains(q, jobs.IssuerQueue("custom:full")) || slices.Contains(q, jobs.IssuerQueue("custom:bare")) {
		t.Errorf("queues %v: want custom:full's CRL queue and not custom:bare's", q)
	}
	var crls []string
	for _, s := range w.Scheduled(time.Hour) {
		if a, ok := s.Args.(jobs.CRLGenerateArgs); ok {
			crls = append(crls, a.IssuerID)
		}
	}
	if !slices.Contains(crls, "custom:full") || slices.Contains(crls, "custom:bare") {
		t.Errorf("scheduled CRLs of %v: want custom:full's and not custom:bare's", crls)
	}
}
