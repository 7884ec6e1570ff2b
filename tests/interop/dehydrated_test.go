package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dehydratedRunner drives dehydrated (Debian's 0.7.0), the bash + curl +
// openssl client and the nearest packaged relative of acme.sh, against one
// CA. Everything it keeps (configuration, account, certificates, the
// WELLKNOWN directory its http-01 answers go to) lives under dir.
type dehydratedRunner struct {
	ca     *CA
	bin    string
	dir    string
	config string
}

func newDehydrated(t *testing.T, ca *CA, bin string) dehydratedRunner {
	t.Helper()
	d := dehydratedRunner{ca: ca, bin: bin, dir: t.TempDir()}
	d.config = filepath.Join(d.dir, "config")
	if err := os.Mkdir(d.wellKnown(), 0o755); err != nil {
		t.Fatal(err)
	}
	d.configure(t, "interop@hallmark.test")
	return d
}

// configure writes dehydrated's configuration file, bash that it sources,
// with contact as the account's email. KEYSIZE is the RSA account key's
// size (4096 by default, which only makes openssl slower here);
// certificate keys stay at dehydrated's default, P-384.
func (d dehydratedRunner) configure(t *testing.T, contact string) {
	t.Helper()
	conf := fmt.Sprintf("CA='%s/directory'\nBASEDIR='%s'\nWELLKNOWN='%s'\nCONTACT_EMAIL='%s'\nKEYSIZE=2048\n",
		d.ca.BaseURL, d.dir, d.wellKnown(), contact)
	if err := os.WriteFile(d.config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

// accountKey is the account key dehydrated generated for this CA:
// accounts/<CA hash>/account_key.pem.
func (d dehydratedRunner) accountKey(t *testing.T) string {
	t.Helper()
	keys, _ := filepath.Glob(filepath.Join(d.dir, "accounts", "*", "account_key.pem"))
	if len(keys) != 1 {
		t.Fatalf("dehydrated's account keys: %q, want one", keys)
	}
	return keys[0]
}

func (d dehydratedRunner) wellKnown() string { return filepath.Join(d.dir, "wellknown") }

func (d dehydratedRunner) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(d.bin, append([]string{"--config", d.config}, args...)...)
	// dehydrated talks to the CA with the curl command, which reads its CA
	// bundle from CURL_CA_BUNDLE; the system's trust store is untouched.
	cmd.Env = append(os.Environ(), "CURL_CA_BUNDLE="+d.ca.Root)
	// dehydrated makes a mktemp directory a run under TMPDIR and leaves
	// some behind: under the test's own directory they go with it, not
	// into the machine's /tmp, 40-odd a CI run.
	tmp := filepath.Join(d.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	cmd.Env = append(cmd.Env, d.ca.hookEnv()...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (d dehydratedRunner) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.run(t, args...)
	if err != nil {
		t.Fatalf("dehydrated %s: %v\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	return out
}

// cert is where dehydrated keeps a certificate's current file (fullchain.pem,
// cert.pem, privkey.pem): certs/<first domain or alias>/.
func (d dehydratedRunner) cert(name, file string) string {
	return filepath.Join(d.dir, "certs", name, file)
}

// dns01 makes dehydrated answer dns-01 through the test binary as its
// hook (deploy_challenge / clean_challenge).
func (d dehydratedRunner) dns01(t *testing.T) []string {
	return []string{"--challenge", "dns-01", "--hook", hookWrapper(t, "dehydrated")}
}

// TestDehydrated runs dehydrated through every scenario it supports against
// every store and signing backend. Cells run in parallel: each has its own
// CA and ports.
func TestDehydrated(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		for _, be := range backends {
			t.Run(st.Name+"/"+be.name, func(t *testing.T) {
				t.Parallel()
				bin := requireTool(t, "dehydrated", "apt-get install dehydrated")
				ca := startCA(t, st.URL(t), be.setup)
				dehydratedScenarios(t, cell{"dehydrated", st.Name, be.name}, newDehydrated(t, ca, bin))
			})
		}
	}
}

func dehydratedScenarios(t *testing.T, c cell, d dehydratedRunner) {
	ca := d.ca
	httpName := "http.dehydrated.test"

	registered := c.scenario(t, "register", func(t *testing.T) {
		d.mustRun(t, "--register", "--accept-terms")
		wantContact(t, ca.accountByKey(t, d.accountKey(t)), "interop@hallmark.test")
	})
	if !registered {
		return
	}
	c.scenario(t, "http-01/wellknown", func(t *testing.T) {
		// dehydrated writes each answer into WELLKNOWN and expects a web
		// server to publish that directory; the test is that server.
		ca.serveWebroot(t, d.wellKnown())
		d.mustRun(t, "--cron", "--domain", httpName, "--challenge", "http-01")
		ca.verifyChain(t, d.cert(httpName, "fullchain.pem"), httpName)
	})
	c.scenario(t, "dns-01/hook", func(t *testing.T) {
		name := "dns.dehydrated.test"
		d.mustRun(t, append([]string{"--cron", "--domain", name}, d.dns01(t)...)...)
		ca.verifyChain(t, d.cert(name, "fullchain.pem"), name)
	})
	c.scenario(t, "dns-01/wildcard", func(t *testing.T) {
		// dehydrated names a certificate's directory after its first
		// domain and wants an alias when that is a wildcard.
		alias := "wild.dehydrated.test"
		d.mustRun(t, append([]string{"--cron", "--domain", "*.wild.dehydrated.test", "--domain", "wild.dehydrated.test", "--alias", alias}, d.dns01(t)...)...)
		leaf := ca.verifyChain(t, d.cert(alias, "fullchain.pem"), "any.wild.dehydrated.test")
		if len(leaf.DNSNames) != 2 {
			t.Fatalf("wildcard certificate names %v, want *.wild.dehydrated.test and wild.dehydrated.test", leaf.DNSNames)
		}
	})
	c.scenario(t, "renew/force", func(t *testing.T) {
		before := readCert(t, d.cert(httpName, "fullchain.pem"))
		ca.serveWebroot(t, d.wellKnown())
		// --force: renew now, whatever the remaining lifetime (RENEW_DAYS).
		d.mustRun(t, "--cron", "--domain", httpName, "--challenge", "http-01", "--force")
		after := ca.verifyChain(t, d.cert(httpName, "fullchain.pem"), httpName)
		if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
			t.Fatal("--cron --force left the same certificate in place")
		}
	})
	c.scenario(t, "revoke/no-reason", func(t *testing.T) {
		// dehydrated 0.7.0 has no reason option: its revokeCert carries
		// none, which RFC 8555 §7.6 allows, and the CRL entry then has no
		// reasonCode extension (RFC 5280 §5.3.1: absent rather than
		// unspecified), which reads as 0.
		leaf := readCert(t, d.cert(httpName, "cert.pem"))
		d.mustRun(t, "--revoke", d.cert(httpName, "cert.pem"))
		ca.waitRevoked(t, leaf, 0)
	})

	// Failures a user can cause, and the problem dehydrated must show them.
	c.scenario(t, "fail/wrong-http-01", func(t *testing.T) {
		// dehydrated writes the answer to WELLKNOWN, which nobody serves;
		// the port answers with something else.
		ca.serveWrongHTTP01(t)
		out, err := d.run(t, "--cron", "--domain", "wrong.dehydrated.test", "--challenge", "http-01")
		wantProblem(t, out, err, "unauthorized")
	})
	c.scenario(t, "fail/caa", func(t *testing.T) {
		name := "caa.dehydrated.test"
		ca.DNS.SetCAA(name, 0, "issue", otherCA)
		out, err := d.run(t, append([]string{"--cron", "--domain", name}, d.dns01(t)...)...)
		wantProblem(t, out, err, "caa")
	})
	c.scenario(t, "fail/policy", func(t *testing.T) {
		out, err := d.run(t, append([]string{"--cron", "--domain", "host." + deniedDomain}, d.dns01(t)...)...)
		wantProblem(t, out, err, "rejectedIdentifier")
	})

	// The account's life ends here.
	c.scenario(t, "update_account", func(t *testing.T) {
		// --account sends the configuration's CONTACT_EMAIL.
		d.configure(t, "changed@hallmark.test")
		d.mustRun(t, "--account")
		wantContact(t, ca.accountByKey(t, d.accountKey(t)), "changed@hallmark.test")
	})
	c.scenario(t, "deactivate", func(t *testing.T) {
		client := ca.accountByKey(t, d.accountKey(t))
		d.mustRun(t, "--deactivate")
		wantDeactivated(t, client)
	})
}
