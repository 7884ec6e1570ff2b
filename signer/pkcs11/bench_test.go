package pkcs11_test

import (
	"context"
	"testing"

	"github.com/hallmark-ca/hallmark/signer"
)

// BenchmarkIssue compares whole issuances (template, lint, sign) and the raw
// signature through SoftHSM2 with the same through a PEM key file.
//
//	go test ./signer/pkcs11 -run '^$' -bench . -benchtime 2s
func BenchmarkIssue(b *testing.B) {
	for _, kt := range []string{"p256", "rsa2048"} {
		c := newCA(b, "bench-"+kt+"-"+b.Name(), kt)
		b.Run("softhsm2-"+kt, func(b *testing.B) { benchIssue(b, c.iss) })
	}
	dir := b.TempDir()
	if _, err := signer.InitLocal(dir, "Bench"); err != nil {
		b.Fatal(err)
	}
	local, err := signer.LoadLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("keyfile-p256", func(b *testing.B) { benchIssue(b, local) })

}

func benchIssue(b *testing.B, iss *signer.Issuer) {
	req := leafRequest(b, iss, "bench.example.test")
	if _, err := iss.Issue(context.Background(), req); err != nil { // warm the lint key
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := iss.Issue(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
