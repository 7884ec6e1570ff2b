package interop

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// uacmeRunner drives uacme (Debian's 1.7.4), the small C client of routers
// and OpenWrt, against one CA. Its account and certificate keys and its
// certificates live in conf (its --confdir); its hook is the test binary.
//
// Trusting the CA's root. uacme 1.7.4 talks HTTPS through libcurl-gnutls
// and sets no CA option of its own: it has no command-line option for one
// and reads no environment variable (UACME_CAINFO arrived in uacme 1.7.6),
// and Debian's libcurl-gnutls reads neither CURL_CA_BUNDLE (the curl
// command's variable) nor SSL_CERT_FILE (OpenSSL's); it trusts what is in
// the compiled-in CA path, /etc/ssl/certs. So the test runs uacme in a
// mount namespace of its own (unshare(1)) in which a directory holding only
// the CA's root is bind-mounted over /etc/ssl/certs: uacme verifies the
// CA's certificate for real, against that root alone, and no file on the
// machine changes. The tls/root-not-trusted scenario shows that uacme,
// run without the namespace, refuses the CA. The namespace needs root or
// unprivileged user namespaces; where a container allows neither, unshare
// fails and so does every uacme row (in CI): there is no weaker fallback.
type uacmeRunner struct {
	ca      *CA
	bin     string
	unshare string
	conf    string // uacme's --confdir
	trust   string // mounted over /etc/ssl/certs: the CA's root and nothing else
	webroot string // http-01 answers the hook writes and the test serves
	hook    string
}

func newUacme(t *testing.T, ca *CA, bin, unshare string) uacmeRunner {
	t.Helper()
	u := uacmeRunner{ca: ca, bin: bin, unshare: unshare, conf: t.TempDir(), trust: t.TempDir(), webroot: t.TempDir(), hook: hookWrapper(t, "uacme")}
	root, err := os.ReadFile(ca.Root)
	if err == nil {
		err = os.WriteFile(filepath.Join(u.trust, "hallmark-interop-root.pem"), root, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// command is uacme with the CA's directory, its confdir, its hook and
// args, run in a mount namespace that trusts only the CA's root (see
// uacmeRunner). challenge is the type the hook accepts.
func (u uacmeRunner) command(challenge string, args ...string) *exec.Cmd {
	uacme := append([]string{u.bin, "-v", "-a", u.ca.BaseURL + "/directory", "-c", u.conf, "-h", u.hook}, args...)
	ns := []string{"--mount"}
	if os.Geteuid() != 0 {
		// Unprivileged: a user namespace in which we are root, to mount.
		ns = append(ns, "--map-root-user")
	}
	// unshare makes the new namespace's mounts private, so the bind mount
	// is seen by uacme and its hook only.
	script := `mount --bind "$0" /etc/ssl/certs && exec "$@"`
	cmd := exec.Command(u.unshare, append(append(ns, "sh", "-c", script, u.trust), uacme...)...)
	cmd.Env = append(os.Environ(), "HALLMARK_INTEROP_CHALLENGE="+challenge, "HALLMARK_INTEROP_WEBROOT="+u.webroot)
	cmd.Env = append(cmd.Env, u.ca.hookEnv()...)
	return cmd
}

func (u uacmeRunner) run(t *testing.T, challenge string, args ...string) (string, error) {
	t.Helper()
	out, err := u.command(challenge, args...).CombinedOutput()
	return string(out), err
}

func (u uacmeRunner) mustRun(t *testing.T, challenge string, args ...string) string {
	t.Helper()
	out, err := u.run(t, challenge, args...)
	if err != nil {
		t.Fatalf("uacme %s: %v\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	return out
}

// cert is where uacme keeps a certificate (with its chain): <confdir>/<first
// identifier, wildcard label dropped>/cert.pem.
func (u uacmeRunner) cert(name string) string { return filepath.Join(u.conf, name, "cert.pem") }

// accountKey is uacme's account key.
func (u uacmeRunner) accountKey() string { return filepath.Join(u.conf, "private", "key.pem") }

// key is the certificate key uacme generated for name.
func (u uacmeRunner) key(name string) string {
	return filepath.Join(u.conf, "private", name, "key.pem")
}

// TestUacme runs uacme through every scenario it supports against every
// store and signing backend. Cells run in parallel: each has its own CA and
// ports.
func TestUacme(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		for _, be := range backends {
			t.Run(st.Name+"/"+be.name, func(t *testing.T) {
				t.Parallel()
				bin := requireTool(t, "uacme", "apt-get install uacme")
				unshare := requireTool(t, "unshare", "apt-get install util-linux")
				ca := startCA(t, st.URL(t), be.setup)
				uacmeScenarios(t, cell{"uacme", st.Name, be.name}, newUacme(t, ca, bin, unshare))
			})
		}
	}
}

var uacmeAccount = regexp.MustCompile(`account created at (\S+)`)

func uacmeScenarios(t *testing.T, c cell, u uacmeRunner) {
	ca := u.ca
	httpName := "http.uacme.test"

	c.scenario(t, "tls/root-not-trusted", func(t *testing.T) {
		// The same uacme outside the namespace: the CA's root is in no
		// trust store it reads, and it must refuse to talk to the CA
		// (after its three retries, five seconds apart).
		out, err := exec.Command(u.bin, "-v", "-a", ca.BaseURL+"/directory", "-c", t.TempDir(), "-y", "new").CombinedOutput()
		// libcurl's words for a failed verification (CURLE_PEER_FAILED_VERIFICATION).
		if err == nil || !strings.Contains(string(out), "SSL peer certificate or SSH remote key was not OK") || strings.Contains(string(out), "account created") {
			t.Fatalf("uacme without the CA's root: %v; want a refusal of the CA's certificate:\n%s", err, tail(string(out), 2000))
		}
	})
	registered := c.scenario(t, "register", func(t *testing.T) {
		out := u.mustRun(t, "", "-y", "new", "interop@hallmark.test")
		m := uacmeAccount.FindStringSubmatch(out)
		if m == nil || !strings.HasPrefix(m[1], ca.BaseURL+"/") {
			t.Fatalf("uacme new did not report an account at the CA:\n%s", tail(out, 2000))
		}
		wantContact(t, ca.accountByKey(t, u.accountKey()), "interop@hallmark.test")
	})
	if !registered {
		return
	}
	c.scenario(t, "http-01/hook", func(t *testing.T) {
		ca.serveWebroot(t, u.webroot)
		u.mustRun(t, "http-01", "issue", httpName)
		ca.verifyChain(t, u.cert(httpName), httpName)
	})
	c.scenario(t, "dns-01/hook", func(t *testing.T) {
		name := "dns.uacme.test"
		u.mustRun(t, "dns-01", "issue", name)
		ca.verifyChain(t, u.cert(name), name)
	})
	c.scenario(t, "dns-01/wildcard", func(t *testing.T) {
		u.mustRun(t, "dns-01", "issue", "*.wild.uacme.test", "wild.uacme.test")
		leaf := ca.verifyChain(t, u.cert("wild.uacme.test"), "any.wild.uacme.test")
		if len(leaf.DNSNames) != 2 {
			t.Fatalf("wildcard certificate names %v, want *.wild.uacme.test and wild.uacme.test", leaf.DNSNames)
		}
	})
	c.scenario(t, "ip/http-01", func(t *testing.T) {
		// uacme sends an address as an "ip" identifier (RFC 8738 §3), the
		// one Debian client that does; the worker fetches the answer from
		// the address itself.
		ca.serveWebroot(t, u.webroot)
		u.mustRun(t, "http-01", "issue", "127.0.0.1")
		leaf := ca.verifyChain(t, u.cert("127.0.0.1"), "127.0.0.1")
		if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || len(leaf.DNSNames) != 0 {
			t.Fatalf("IP certificate names: ip %v dns %v, want exactly 127.0.0.1", leaf.IPAddresses, leaf.DNSNames)
		}
	})
	c.scenario(t, "renew/force", func(t *testing.T) {
		before := readCert(t, u.cert(httpName))
		ca.serveWebroot(t, u.webroot)
		// -f: reissue now, whatever the remaining lifetime.
		u.mustRun(t, "http-01", "-f", "issue", httpName)
		after := ca.verifyChain(t, u.cert(httpName), httpName)
		if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
			t.Fatal("uacme -f issue left the same certificate in place")
		}
	})
	c.scenario(t, "revoke/keyCompromise", func(t *testing.T) {
		// Signed with the account key (kid), like certbot's and lego's.
		leaf := readCert(t, u.cert(httpName))
		u.mustRun(t, "", "-r", "1", "revoke", u.cert(httpName))
		ca.waitRevoked(t, leaf, 1)
	})
	c.scenario(t, "revoke/superseded/cert-key", func(t *testing.T) {
		// Given the certificate's key, uacme signs the request with that
		// key (a jwk JWS, RFC 8555 §7.6), the way to revoke without the
		// account; no other client in the matrix does this.
		name := "dns.uacme.test"
		leaf := readCert(t, u.cert(name))
		u.mustRun(t, "", "-r", "4", "revoke", u.cert(name), u.key(name))
		ca.waitRevoked(t, leaf, 4)
	})

	// Failures a user can cause, and the problem uacme must show them.
	c.scenario(t, "fail/wrong-http-01", func(t *testing.T) {
		// The hook writes the answer to the webroot, which nobody serves;
		// the port answers with something else.
		ca.serveWrongHTTP01(t)
		out, err := u.run(t, "http-01", "issue", "wrong.uacme.test")
		wantProblem(t, out, err, "unauthorized")
	})
	c.scenario(t, "fail/caa", func(t *testing.T) {
		name := "caa.uacme.test"
		ca.DNS.SetCAA(name, 0, "issue", otherCA)
		out, err := u.run(t, "dns-01", "issue", name)
		wantProblem(t, out, err, "caa")
	})
	c.scenario(t, "fail/policy", func(t *testing.T) {
		out, err := u.run(t, "dns-01", "issue", "host."+deniedDomain)
		wantProblem(t, out, err, "rejectedIdentifier")
	})

	// The account's life ends here.
	c.scenario(t, "update_account", func(t *testing.T) {
		u.mustRun(t, "", "update", "changed@hallmark.test")
		wantContact(t, ca.accountByKey(t, u.accountKey()), "changed@hallmark.test")
	})
	c.scenario(t, "deactivate", func(t *testing.T) {
		client := ca.accountByKey(t, u.accountKey())
		u.mustRun(t, "", "deactivate")
		wantDeactivated(t, client)
	})
}
