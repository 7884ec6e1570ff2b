// Command hook is a custom-backend hook for the end-to-end tests: it
// implements the JSON contract of docs/backends.md with a local CA in the
// directory named by its first argument ("issue", "revoke" or "crl" is the
// second).
package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

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
	case "crl":
		crl(iss)
	}
}

// crl signs the CRL Hallmark asks for with the hook's CA.
func crl(iss *signer.Issuer) {
	var req struct {
		Number            int64     `json:"number"`
		ThisUpdate        time.Time `json:"this_update"`
		NextUpdate        time.Time `json:"next_update"`
		DistributionPoint string    `json:"distribution_point"`
		Revoked           []struct {
			Serial    string    `json:"serial"`
			RevokedAt time.Time `json:"revoked_at"`
			Reason    int       `json:"reason"`
		} `json:"revoked"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail(err)
	}
	var entries []signer.RevokedEntry
	for _, r := range req.Revoked {
		serial, _ := new(big.Int).SetString(r.Serial, 16)
		entries = append(entries, signer.RevokedEntry{Serial: serial, RevokedAt: r.RevokedAt, Reason: r.Reason})
	}
	der, err := iss.SignCRL(req.Number, req.ThisUpdate, req.NextUpdate, entries, req.DistributionPoint)
	if err != nil {
		fail(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"crl": string(pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "e2e hook:", err)
	os.Exit(1)
}
