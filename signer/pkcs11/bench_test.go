package pkcs11_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"log/slog"
	"testing"

	"github.com/hallmark-ca/hallmark/signer"
)

// The throughput of the signing key through SoftHSM2 against the same key
// type in a PEM file, raw (one signature over a SHA-256 digest) and as whole
// issuances (template, zlint, sign), with parallel callers:
//
//	go test ./signer/pkcs11 -run '^$' -bench . -benchtime 2s
func BenchmarkSign(b *testing.B) {
	for _, kt := range []string{"p256", "rsa2048"} {
		c := newCA(b, "bench-sign-"+kt, kt)
		b.Run("softhsm2-"+kt, func(b *testing.B) { benchSign(b, c.iss.Signer) })
	}
	b.Run("keyfile-p256", func(b *testing.B) { benchSign(b, localIssuer(b).Signer) })
}

func BenchmarkIssue(b *testing.B) {
	for _, kt := range []string{"p256", "rsa2048"} {
		c := newCA(b, "bench-issue-"+kt, kt)
		b.Run("softhsm2-"+kt, func(b *testing.B) { benchIssue(b, c.iss) })
	}
	b.Run("keyfile-p256", func(b *testing.B) { benchIssue(b, localIssuer(b)) })
}

func localIssuer(b *testing.B) *signer.Issuer {
	dir := b.TempDir()
	if _, err := signer.InitLocal(dir, signer.CAOptions{Name: "Bench", URLBase: "http://ca.test"}); err != nil {
		b.Fatal(err)
	}
	iss, err := signer.LoadLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	return iss
}

func benchSign(b *testing.B, s crypto.Signer) {
	digest := sha256.Sum256([]byte("to be signed"))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Sign(rand.Reader, digest[:], crypto.SHA256); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchIssue(b *testing.B, iss *signer.Issuer) {
	iss.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
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
