package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// fakeNetBox answers NetBox's ip-addresses list as NetBox does (the shape
// of protocol/access/ipam/testdata), for the lab client 127.0.0.1 only;
// it refuses a request without the token.
func fakeNetBox(t *testing.T, token string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Token "+token {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"detail": "Invalid token"}`)
			return
		}
		if r.URL.Path != "/api/ipam/ip-addresses/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("address") != "127.0.0.1" {
			fmt.Fprint(w, `{"count": 0, "next": null, "previous": null, "results": []}`)
			return
		}
		fmt.Fprint(w, `{"count": 1, "next": null, "previous": null, "results": [{
			"id": 1842, "url": "https://netbox.corp.example/api/ipam/ip-addresses/1842/",
			"family": {"value": 4, "label": "IPv4"}, "address": "127.0.0.1/8", "vrf": null, "tenant": null,
			"status": {"value": "active", "label": "Active"}, "role": null,
			"assigned_object_type": null, "assigned_object_id": null, "assigned_object": null,
			"dns_name": "ws1.e2e-access.test", "description": "the lab's build host",
			"custom_fields": {"acme_names": ["api.e2e-access.test"]}, "tags": []}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAccessPolicyIPAM: the ipam check on the real binaries, asking a
// NetBox (a test server with NetBox's API shape: NetBox cannot run here):
// lego from the lab host gets a certificate for the names NetBox gives its
// address, is refused rejectedIdentifier for another, and gets a 503 once
// NetBox stops answering.
func TestAccessPolicyIPAM(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "netbox.token"), []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	netbox := fakeNetBox(t, "0123456789abcdef")
	ca := harness.StartCA(t, dialects[0].URL(t), harness.Options{Dir: dir, Tables: fmt.Sprintf(`
[access.checks.owned]
kind = "ipam"
[access.checks.owned.source]
kind = "netbox"
url = %q
token_file = "netbox.token"
custom_field = "acme_names"

[[access.rules]]
name = "not-yours"
when = "not owned"
action = "deny"
problem = "rejectedIdentifier"
message = "the IPAM does not give your host that name"
`, netbox.URL)})
	path := t.TempDir()
	run := func(names ...string) (string, error) {
		args := []string{"--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort)}
		for _, n := range names {
			args = append(args, "--domains", n)
		}
		return lego(t, ca, path, append(args, "run")...)
	}
	if out, err := run("ws1.e2e-access.test", "api.e2e-access.test"); err != nil {
		t.Fatalf("lego for the host's own names: %v\n%s", err, out)
	}
	if out, err := run("other.e2e-access.test"); err == nil || !strings.Contains(out, "urn:ietf:params:acme:error:rejectedIdentifier :: the IPAM does not give your host that name") {
		t.Fatalf("lego for a name NetBox does not give the host: %v\n%s", err, out)
	}
	netbox.Close()
	if out, err := run("ws1.e2e-access.test"); err == nil || !strings.Contains(out, "could not complete its access checks") {
		t.Fatalf("lego with NetBox down: %v, want a 503\n%s", err, out)
	}
	var certs []json.RawMessage
	if err := json.Unmarshal([]byte(ca.Run("hallmark", "--config", ca.Config, "certs", "list", "--json")), &certs); err != nil || len(certs) != 1 {
		t.Errorf("certificates issued: %d (%v), want the one", len(certs), err)
	}
}
