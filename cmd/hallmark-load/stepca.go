package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// StepCAVersion is the step-ca release `make bench` builds and the docs cite.
const StepCAVersion = "v0.30.2"

// startStepCA runs Smallstep's step-ca as a second reference beside
// Pebble: a fresh root and intermediate made here, an ACME provisioner
// named "acme", a badger database in the run's directory, on loopback.
// step-ca validates http-01 on port 80 unless --insecure
// --acme-http-port says otherwise (commands/app.go sets
// acme.InsecurePortHTTP01), and resolves names with the system resolver
// unless --resolver names one: both point at the generator.
func (e *benchEnv) startStepCA(ctx context.Context) (*target, error) {
	if e.StepCA == "" {
		return nil, fmt.Errorf("no step-ca binary: CGO_ENABLED=0 GOBIN=<dir> go install github.com/smallstep/certificates/cmd/step-ca@%s and pass --step-ca", StepCAVersion)
	}
	dir, err := os.MkdirTemp(e.WorkDir, "step-ca-")
	if err != nil {
		return nil, err
	}
	t := &target{Label: "step-ca (badger)"}
	var stopProc func()
	t.stop = func() {
		if stopProc != nil {
			stopProc()
		}
		if !e.Keep {
			os.RemoveAll(dir)
		}
	}
	fail := func(err error) (*target, error) { t.stop(); return nil, err }
	root, err := stepCAPKI(dir)
	if err != nil {
		return fail(err)
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	cfg, _ := json.MarshalIndent(map[string]any{
		"root":     filepath.Join(dir, "root_ca.crt"),
		"crt":      filepath.Join(dir, "intermediate_ca.crt"),
		"key":      filepath.Join(dir, "intermediate_ca_key"),
		"address":  listen,
		"dnsNames": []string{"127.0.0.1"},
		"logger":   map[string]string{"format": "text"},
		"db":       map[string]string{"type": "badgerv2", "dataSource": filepath.Join(dir, "db")},
		"authority": map[string]any{
			"provisioners": []map[string]any{{"type": "ACME", "name": "acme"}},
		},
	}, "", "  ")
	cfgPath := filepath.Join(dir, "ca.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return fail(err)
	}
	// STEPPATH keeps step-ca's own files (contexts, defaults) in the run's
	// directory rather than ~/.step.
	env := []string{"STEPPATH=" + filepath.Join(dir, "step")}
	pid, stop, err := e.startProcess(dir, "step-ca.log", env, e.StepCA,
		"--resolver", e.Resp.DNSAddr, "--insecure", "--acme-http-port", fmt.Sprint(e.HTTPPort), cfgPath)
	if err != nil {
		return fail(err)
	}
	stopProc = stop
	t.Procs.pids = map[string][]int{"step-ca": {pid}}
	t.Roots = x509.NewCertPool()
	t.Roots.AddCert(root)
	t.RootPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
	t.Directory = "https://" + listen + "/acme/acme/directory"
	if err := waitDirectory(ctx, t); err != nil {
		logText, _ := os.ReadFile(filepath.Join(dir, "step-ca.log"))
		return fail(fmt.Errorf("%w; its log:\n%s", err, tail(logText, 2000)))
	}
	return t, nil
}

// stepCAPKI writes a fresh P-256 root (root_ca.crt) and an intermediate
// signed by it (intermediate_ca.crt, its key unencrypted in
// intermediate_ca_key) into dir, and returns the root.
func stepCAPKI(dir string) (*x509.Certificate, error) {
	now := time.Now()
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	rootTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hallmark-load step-ca root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true, MaxPathLen: 1,
	}
	root, err := createCert(rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		return nil, err
	}
	interKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	interTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hallmark-load step-ca intermediate"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	inter, err := createCert(interTmpl, root, interKey.Public(), rootKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(interKey)
	if err != nil {
		return nil, err
	}
	files := map[string]*pem.Block{
		"root_ca.crt":         {Type: "CERTIFICATE", Bytes: root.Raw},
		"intermediate_ca.crt": {Type: "CERTIFICATE", Bytes: inter.Raw},
		"intermediate_ca_key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	}
	for name, blk := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o600); err != nil {
			return nil, err
		}
	}
	return root, nil
}

func createCert(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}
