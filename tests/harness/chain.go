package harness

import (
	"crypto/x509"
	"os"
	"testing"

	"github.com/hallmark-ca/hallmark/signer"
)

// ReadChain reads every certificate of a PEM file a client saved, leaf
// first.
func ReadChain(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	certs, err := signer.ReadCertificates(path)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// WantChainTo fails unless the chain in chainPath has its top certificate
// issued by rootCN and verifies, for dnsName ("" for any), to the root in
// rootPath.
func WantChainTo(t *testing.T, chainPath, rootPath, rootCN, dnsName string) {
	t.Helper()
	certs := ReadChain(t, chainPath)
	if top := certs[len(certs)-1]; len(certs) < 2 || top.Issuer.CommonName != rootCN {
		t.Fatalf("%s holds %d certificates, the top one issued by %q; want the chain to %q", chainPath, len(certs), top.Issuer.CommonName, rootCN)
	}
	rootPEM, err := os.ReadFile(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{DNSName: dnsName, Roots: roots, Intermediates: inter}); err != nil {
		t.Fatalf("the chain in %s does not verify to %s: %v", chainPath, rootPath, err)
	}
}
