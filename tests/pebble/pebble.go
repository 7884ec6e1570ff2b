// Package pebble runs Let's Encrypt's test CA, Pebble, on loopback for
// tests: the relay backend's upstream. The binary comes from the Go module
// proxy (`go install github.com/letsencrypt/pebble/v2/cmd/pebble@Version`),
// built once into a cache directory and reused by every later test binary;
// HALLMARK_PEBBLE names a prebuilt binary instead.
package pebble

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/testproc"
)

// Version is the Pebble release the tests run.
const Version = "v2.10.3"

// Server is a running Pebble.
type Server struct {
	DirectoryURL string
	// ManagementURL is Pebble's management interface (HTTPS, the same
	// TLS certificate): its /set-renewal-info/ moves a certificate's ARI
	// window as an upstream CA does in an incident.
	ManagementURL string
	CACert        string // PEM file: the trust anchor of Pebble's TLS listener
	// Transport trusts CACert: for a test's own requests to Pebble, or to
	// wrap for a client under test.
	Transport *http.Transport
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary returns the Pebble binary, building it at most once per machine
// (cached under the temp dir by version) within five minutes.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("HALLMARK_PEBBLE"); p != "" {
			binary = p
			return
		}
		dir := filepath.Join(os.TempDir(), "hallmark-pebble-"+Version)
		binary = filepath.Join(dir, "pebble")
		if _, err := os.Stat(binary); err == nil {
			return
		}
		tmp, err := os.MkdirTemp(os.TempDir(), "hallmark-pebble-build-")
		if err != nil {
			buildErr = err
			return
		}
		defer os.RemoveAll(tmp)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "install", "github.com/letsencrypt/pebble/v2/cmd/pebble@"+Version)
		cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go install github.com/letsencrypt/pebble/v2/cmd/pebble@%s: %v\n%s", Version, err, out)
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		buildErr = os.Rename(filepath.Join(tmp, "pebble"), binary)
	})
	return binary, buildErr
}

// Options change how Pebble runs; the zero value is Start's.
type Options struct {
	// DNSServer ("127.0.0.1:port"), when set, switches validation on:
	// Pebble resolves the challenges' names through it (-dnsserver).
	DNSServer string
	// EABKeys, when set, makes external account binding required: each
	// key ID with its base64url HMAC key.
	EABKeys map[string]string
	// HTTPPort is the port Pebble's validator connects to for http-01
	// (default 5002).
	HTTPPort int
}

// Start runs Pebble with validation switched off (PEBBLE_VA_ALWAYS_VALID:
// the relay's subscriber was validated by Hallmark) and no random nonce
// rejection, until the test ends. Without a Pebble it fails in CI and skips
// loudly elsewhere.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith runs Pebble as Start does, changed by o.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_TOOLS") == "1" {
			t.Fatalf("pebble is required here: %v", err)
		}
		t.Skipf("SKIPPING: pebble could not be built from the module proxy: %v", err)
	}
	dir := t.TempDir()
	caFile, certFile, keyFile := tlsFiles(t, dir)
	listen, mgmt := freeAddr(t), freeAddr(t)
	pcfg := map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": certFile, "privateKey": keyFile,
		"httpPort": cmp.Or(o.HTTPPort, 5002), "tlsPort": 5001, "ocspResponderURL": "",
		"externalAccountBindingRequired": len(o.EABKeys) > 0,
	}
	if len(o.EABKeys) > 0 {
		pcfg["externalAccountMACKeys"] = o.EABKeys
	}
	cfg := map[string]any{"pebble": pcfg}
	data, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-config", cfgFile, "-strict=false"}
	env := append(os.Environ(), "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_AUTHZREUSE=0")
	if o.DNSServer != "" {
		args = append(args, "-dnsserver", o.DNSServer)
	} else {
		env = append(env, "PEBBLE_VA_ALWAYS_VALID=1")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	testproc.Start(t, "pebble", cmd, filepath.Join(dir, "pebble.log"))
	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(caFile)
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("pebble's CA certificate %s holds no PEM certificate", caFile)
	}
	s := &Server{DirectoryURL: "https://" + listen + "/dir", ManagementURL: "https://" + mgmt, CACert: caFile,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	c := &http.Client{Timeout: time.Second, Transport: s.Transport}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get(s.DirectoryURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not answer at %s: %v", s.DirectoryURL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// tlsFiles makes a CA and a 127.0.0.1/localhost server certificate for
// Pebble's listener.
func tlsFiles(t testing.TB, dir string) (ca, cert, key string) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pebble test TLS CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, srvKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(srvKey)
	ca, cert, key = filepath.Join(dir, "tls-ca.pem"), filepath.Join(dir, "tls.pem"), filepath.Join(dir, "tls.key")
	for path, blk := range map[string]*pem.Block{ca: {Type: "CERTIFICATE", Bytes: caDER}, cert: {Type: "CERTIFICATE", Bytes: srvDER}, key: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}
