package interop

import (
	"testing"
	"time"
)

// TestCertbotProfileDirectory: certbot 2.1, which cannot send
// draft-ietf-acme-profiles' "profile" field, gets a certificate of a
// non-default profile through /profile/<name>/directory.
func TestCertbotProfileDirectory(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			bin := requireTool(t, "certbot", "apt-get install certbot")
			ca := startCA(t, st.URL(t), func(*testing.T, string) caBackend {
				return caBackend{tables: `
[profiles.short]
description = "two-day TLS server certificate"
backend = "local"
validity_hours = 48
key_types = ["rsa2048", "p256"]
challenges = ["http-01"]
identifier_types = ["dns"]
key_usages = ["digitalSignature", "keyEncipherment"]
ext_key_usages = ["serverAuth"]
`}
			})
			cb := certbotRunner{ca: ca, bin: bin, dir: t.TempDir(), directory: ca.BaseURL + "/profile/short/directory"}
			name := "short.certbot.test"
			cb.mustRun(t, "register", "--agree-tos", "--email", "interop@hallmark.test", "--no-eff-email")
			cb.mustRun(t, append(append([]string{"certonly"}, cb.standalone()...), "-d", name)...)
			leaf := ca.verifyChain(t, cb.live(name), name)
			// The signer backdates notBefore by at most a minute (profile.MaxBackdate).
			if got := leaf.NotAfter.Sub(leaf.NotBefore); got < 48*time.Hour-2*time.Minute || got > 48*time.Hour {
				t.Fatalf("certbot's certificate through short's directory is valid for %s, want the short profile's 48h (the default's is 90 days)", got)
			}
		})
	}
}
