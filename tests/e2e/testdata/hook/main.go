// Command hook is a custom-backend hook for the end-to-end tests: it
// implements the JSON contract of docs/backends.md with a local CA in the
// directory named by its first argument ("issue" or "revoke" is the second).
package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer"
)

func main() {
	dir, action := os.Args[1], os.Args[2]
	fmt.Fprintln(os.Stderr, "e2e hook:", action)
	iss, err := signer.LoadLocal(dir)
	if err != nil {
		fail(err)
	}
	switch action {
	case "issue":
		var req struct {
			Identifiers []acme.Identifier `json:"identifiers"`
			CSR         string            `json:"csr"`
			Validity    int               `json:"validity_hours"`
		}
		if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
			fail(err)
		}
		blk, _ := pem.Decode([]byte(req.CSR))
		csr, err := x509.ParseCertificateRequest(blk.Bytes)
		if err != nil {
			fail(err)
		}
		out, err := iss.Issue(context.Background(), signer.Request{
			Profile:   profile.Profile{ValidityHours: req.Validity, KeyUsages: []string{"digitalSignature"}, ExtKeyUsages: []string{"serverAuth"}},
			Names:     req.Identifiers,
			PublicKey: csr.PublicKey,
			IssuerURL: "http://127.0.0.1:1/hook-issuer", CRLURL: "http://127.0.0.1:1/hook-crl",
		})
		if err != nil {
			fail(err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"certificate_chain": string(out.ChainPEM)})
	case "revoke":
		var req struct {
			Serial string `json:"serial"`
			Reason int    `json:"reason"`
		}
		if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
			fail(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "revoked-"+req.Serial), []byte(fmt.Sprint(req.Reason)), 0o644); err != nil {
			fail(err)
		}
		fmt.Println(`{"status":"revoked"}`)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "e2e hook:", err)
	os.Exit(1)
}
