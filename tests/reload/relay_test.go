package reload

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/pebble"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// relayTOML is a relay profile "upstream" to the Pebble at directory;
// extra are further lines of its [backends.pebble].
func relayTOML(directory, caCert, extra string) string {
	return fmt.Sprintf(`
[profiles.upstream]
description = "relayed to the upstream CA"
backend = "relay"
signer = "pebble"
validity_hours = 2160
key_types = ["p256", "rsa2048"]
challenges = ["http-01"]
identifier_types = ["dns"]

[backends.pebble]
type = "relay"
directory_url = %q
ca_cert = %q
account_key = "relay-account.key"
contact = ["ops@hallmark.test"]
timeout_ms = 6000
%s`, directory, caCert, extra)
}

// TestReloadRelay: a relay profile added by SIGHUP issues through its
// directory URL from the upstream Pebble it names; its upstream then
// changes to another Pebble, which requires external account binding,
// and with eab_kid and eab_hmac_key_file added in the same reload the
// next certificate comes from the new upstream, under a new account
// bound with the key.
func TestReloadRelay(t *testing.T) {
	first := pebble.Start(t)
	hmacKey := make([]byte, 32)
	_, _ = rand.Read(hmacKey)
	encoded := base64.RawURLEncoding.EncodeToString(hmacKey)
	second := pebble.StartWith(t, pebble.Options{EABKeys: map[string]string{"kid-reload": encoded}})
	ca := startCA(t, testdb.SQLite(t))
	if err := os.WriteFile(filepath.Join(ca.Dir, "eab.key"), []byte(encoded+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := ca.BaseURL + "/profile/upstream/directory"

	added := relayTOML(first.DirectoryURL, first.CACert, "")
	edit(t, ca, func(s string) string { return s + added })
	tr := startTraffic(t, ca, 2)
	hangup(t, ca)
	c1, err := legoAt(t, ca, dir, "first.relay.test")
	tr.end(t)
	if err != nil {
		t.Fatalf("lego through the added relay profile: %v\nworker:\n%s", err, harness.Tail(ca.Log("worker"), 3000))
	}
	if !strings.HasPrefix(c1.Issuer.CommonName, "Pebble") {
		t.Fatalf("the relay's certificate is issued by %q, want the upstream Pebble", c1.Issuer.CommonName)
	}

	edit(t, ca, replace(added, relayTOML(second.DirectoryURL, second.CACert, "eab_kid = \"kid-reload\"\neab_hmac_key_file = \"eab.key\"\n")))
	hangup(t, ca)
	c2, err := legoAt(t, ca, dir, "second.relay.test")
	if err != nil {
		t.Fatalf("lego after the relay's upstream changed: %v\nworker:\n%s", err, harness.Tail(ca.Log("worker"), 3000))
	}
	if !strings.HasPrefix(c2.Issuer.CommonName, "Pebble") || c2.Issuer.CommonName == c1.Issuer.CommonName {
		t.Fatalf("after the reload the certificate is issued by %q, want the second Pebble (the first is %q)", c2.Issuer.CommonName, c1.Issuer.CommonName)
	}
	for _, p := range []string{"frontend", "worker"} {
		if a, r := outcomes(ca, p); a != 2 || r != 0 {
			t.Fatalf("%s: %d reloads applied, %d refused; want 2 applied\n%s", p, a, r, harness.Tail(ca.Log(p), 3000))
		}
	}
}
