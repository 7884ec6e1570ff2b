package signer

import (
	"context"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// BenchmarkIssue is one issuance by a P-256 issuer: template, tbsCertificate,
// lint (the copy with a throwaway key's signature, parsed by zcrypto, zlint), the
// issuer's signature of the same tbsCertificate, chain PEM.
//
//	go test -run '^$' -bench . -benchmem ./signer/
func BenchmarkIssue(b *testing.B) {
	iss, _, _ := testCA(b, "p256", 5*365*24*time.Hour)
	names := []acme.Identifier{dns("www.example.com"), dns("*.example.com"), ip("10.0.0.5")}
	for _, leaf := range []string{"p256", "rsa2048"} {
		b.Run("leaf="+leaf, func(b *testing.B) {
			r := request(defaultProfile(), testKey(b, leaf).Public(), names...)
			for b.Loop() {
				if _, err := iss.Issue(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLintCertificate is the lint share of BenchmarkIssue.
func BenchmarkLintCertificate(b *testing.B) {
	iss, _, _ := testCA(b, "p256", 5*365*24*time.Hour)
	r := request(defaultProfile(), testKey(b, "p256").Public(), dns("www.example.com"), dns("*.example.com"), ip("10.0.0.5"))
	tmpl, err := iss.template(r, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := iss.lintCertificate(tmpl, r.PublicKey); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignCRL signs a CRL of 100,000 revoked certificates (lint and
// real signature), the size of a busy private CA's 90-day window.
func BenchmarkSignCRL(b *testing.B) {
	iss, _, _ := testCA(b, "p256", 5*365*24*time.Hour)
	now := time.Now().Truncate(time.Second)
	entries := make([]RevokedEntry, 100_000)
	for n := range entries {
		s, err := newSerial()
		if err != nil {
			b.Fatal(err)
		}
		entries[n] = RevokedEntry{Serial: s, RevokedAt: now.Add(-time.Duration(n) * time.Second), Reason: []int{0, 1, 4, 5}[n%4]}
	}
	var size int
	for b.Loop() {
		der, err := iss.SignCRL(42, now, now.Add(7*24*time.Hour), entries, testCRLURL)
		if err != nil {
			b.Fatal(err)
		}
		size = len(der)
	}
	b.ReportMetric(float64(size), "crl-bytes")
}
