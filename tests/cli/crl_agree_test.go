package cli

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/harness"
)

// panelToken is the operator token of the panels these tests start.
const panelToken = "cli-test-operator-token-0123456789abcdef"

// crlView is what one view says of an issuer's CRL.
type crlView struct {
	stale bool
	state string // the status text: the reason, or "fresh"
}

// panelCRLs reads the CRL table of the panel's page path (the CRL page or
// the overview), served by the real handler on c's database, by issuer.
func (c *ca) panelCRLs(path string) map[string]crlView {
	c.t.Helper()
	p, err := admin.New(admin.Options{Store: c.st(), Queue: c.db.Queue, Token: panelToken,
		Revoker: revocation.New(c.st(), map[string]profile.Profile{"default": profile.Default()})})
	if err != nil {
		c.t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+panelToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
	}
	table := crlTableRE.FindString(string(body))
	out := map[string]crlView{}
	for _, m := range crlRowRE.FindAllStringSubmatch(table, -1) {
		out[html.UnescapeString(m[2])] = crlView{stale: m[1] == "bad", state: html.UnescapeString(m[3])}
	}
	return out
}

var (
	crlTableRE = regexp.MustCompile(`(?s)<table class="list" id="crls">.*?</table>`)
	// A row: its class, issuer and last cell (layout.html's crltable).
	crlRowRE = regexp.MustCompile(`(?s)<tr class="(bad)?"><td><code>([^<]*)</code>.*?<td>([^<]*)</td></tr>`)
)

// cliCRLs is what `hallmark crl status --json` says, by issuer, and its
// exit code.
func (c *ca) cliCRLs() (map[string]crlView, int) {
	c.t.Helper()
	r := c.run("crl", "status", "--json")
	var rows []struct {
		Issuer string
		Stale  bool
		Why    string
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		c.t.Fatalf("crl status --json (exit %d): %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	out := map[string]crlView{}
	for _, row := range rows {
		state := row.Why
		if state == "" {
			state = "fresh"
		}
		out[row.Issuer] = crlView{stale: row.Stale, state: state}
	}
	return out, r.code
}

// TestCRLViewsAgree: `hallmark crl status` (the real binary) and the
// panel's CRL page and overview (the real handler), on one database, say
// the same of each issuer's CRL — stale or not, and why — in each case an
// operator meets; the CLI exits 5 exactly when the panel marks a row.
func TestCRLViewsAgree(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		for _, tc := range []struct {
			name  string
			setup func(c *ca, now time.Time)
			want  crlView // issuer-1's, or the remote issuer's
		}{
			{"no CRL, no revocations", func(c *ca, _ time.Time) {
				c.issued(c.account(), "one.example.com", "c1")
			}, crlView{true, "no CRL signed yet; is a worker mounting this issuer running?"}},
			{"CRL current", func(c *ca, now time.Time) {
				c.issued(c.account(), "one.example.com", "c1")
				c.revokeLocal("c1")
				c.storeCRL(now, now.Add(time.Hour), "c1")
			}, crlView{false, "fresh"}},
			{"CRL past nextUpdate", func(c *ca, now time.Time) {
				c.issued(c.account(), "one.example.com", "c1")
				c.storeCRL(now.Add(-2*time.Hour), now.Add(-time.Hour))
			}, crlView{true, "past nextUpdate: relying parties will reject it"}},
			{"revocation not yet listed", func(c *ca, now time.Time) {
				c.issued(c.account(), "one.example.com", "c1")
				c.storeCRL(now, now.Add(time.Hour))
				c.revokeLocal("c1")
			}, crlView{true, "1 revocation(s) not listed yet: a worker mounting this issuer signs the CRL that lists them"}},
			{"relay issuer, revoked certificate", func(c *ca, _ time.Time) {
				c.issuedAs(c.account(), "relayed.example.com", "e1", "relay:upstream", "default")
				if err := c.st().RevokeRecorded(context.Background(), "e1", 1, store.AuditEvent{Actor: "test", Action: "revoke", Subject: "e1"}); err != nil {
					c.t.Fatal(err)
				}
			}, crlView{false, "its backend publishes its own revocation status; Hallmark signs no CRL for it"}},
			{"custom issuer", func(c *ca, _ time.Time) {
				c.issuedAs(c.account(), "hooked.example.com", "e2", "custom:hooks", "default")
			}, crlView{false, "its backend publishes its own revocation status; Hallmark signs no CRL for it"}},
		} {
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				c := newCA(t, d.url(t))
				now, err := c.st().Now(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				tc.setup(c, now)
				cliSays, code := c.cliCRLs()
				if len(cliSays) != 1 {
					t.Fatalf("crl status lists %+v, want one issuer", cliSays)
				}
				for _, path := range []string{"/crls", "/"} {
					panelSays := c.panelCRLs(path)
					if len(panelSays) != len(cliSays) {
						t.Fatalf("GET %s lists %+v; crl status %+v", path, panelSays, cliSays)
					}
					for issuer, v := range cliSays {
						if panelSays[issuer] != v || v != tc.want {
							t.Errorf("issuer %s: crl status says %+v, GET %s %+v; want %+v", issuer, v, path, panelSays[issuer], tc.want)
						}
					}
				}
				if wantCode := map[bool]int{true: exitStale, false: 0}[tc.want.stale]; code != wantCode {
					t.Errorf("crl status exited %d, want %d", code, wantCode)
				}
				if r := c.run("crl", "status"); !strings.Contains(r.stdout, tc.want.state) {
					t.Errorf("crl status's table lacks %q:\n%s", tc.want.state, r.stdout)
				}
			})
		}
	}
}

// exitStale is `hallmark crl status`'s exit code when an issuer is stale.
const exitStale = 5

// revokeLocal revokes a local issuer's certificate as the shared path
// records it.
func (c *ca) revokeLocal(serial string) {
	c.t.Helper()
	if _, err := c.st().Revoke(context.Background(), serial, 0, store.AuditEvent{Actor: "test", Action: "revoke", Subject: serial}); err != nil {
		c.t.Fatal(err)
	}
}

// storeCRL stores issuer-1's next CRL, thisUpdate this, listing serials.
func (c *ca) storeCRL(this, next time.Time, serials ...string) {
	c.t.Helper()
	ctx := context.Background()
	n, err := c.st().CRLNextNumber(ctx, "issuer-1", 0)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.st().CRLStore(ctx, store.CRL{IssuerID: "issuer-1", Number: n, ThisUpdate: this, NextUpdate: next,
		DER: harness.SignedCRL(c.t, this, serials...)}); err != nil {
		c.t.Fatal(err)
	}
}
