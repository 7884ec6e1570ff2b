package admin_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

var renewalRE = regexp.MustCompile(`(?s)<dd id="cert-renewal">(.*?)</dd>`)

// TestCertPageRenewalWindow: a certificate's page shows the renewal window
// its ARI clients are told and whose it is, by renewalInfo's own rule
// (protocol/renewal): the profile's third of the validity; for a relay's
// certificate, the upstream CA's window once the worker fetched it, with
// its explanation link; an operator's move when it ends first, with the
// reason. Before, the panel showed no window, and an operator could not see
// that an upstream's window had overtaken a move.
func TestCertPageRenewalWindow(t *testing.T) {
	t.Parallel()
	srv, st := panel(t)
	ctx := context.Background()
	issuedCert(t, st, "a1", "ari.example.com", "relay:corp", "upstream")
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: noRedirect}
	window := func() string {
		t.Helper()
		_, page := do(t, c, "GET", srv.URL+"/certs/a1", "Bearer "+token, nil)
		m := renewalRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the certificate page shows no renewal window:\n%s", page)
		}
		return m[1]
	}
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"the profile's", func() {}, []string{"the profile's"}},
		{"the upstream's", func() {
			if err := st.UpstreamRecord(ctx, store.UpstreamWindow{Serial: "a1", Start: now.Add(24 * time.Hour), End: now.Add(48 * time.Hour),
				ExplanationURL: "https://upstream.example/why", CheckedAt: now, NextCheckAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}, []string{"the upstream CA's", `href="https://upstream.example/why"`, now.Add(48 * time.Hour).UTC().Format("2006-01-02 15:04:05Z")}},
		{"an operator's move, ending first", func() {
			if _, err := st.RenewalMove(ctx, store.RenewalSelector{Serial: "a1"}, now.Add(-time.Hour), now.Add(-time.Second), "key ceremony redo",
				store.AuditEvent{Actor: "test", Action: "ari.move", Subject: "a1"}); err != nil {
				t.Fatal(err)
			}
		}, []string{"moved by an operator: key ceremony redo"}},
	}
	for _, step := range steps {
		step.do()
		got := window()
		for _, w := range step.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: renewal window %q, want it to say %q", step.name, got, w)
			}
		}
	}
}
