package signer

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkSignCRLShards signs 1,000,000 revocations spread over an
// issuer's CRL shards, one shard after another on one goroutine (as one
// worker signing every shard would), each shard linted and signed by the
// issuer's key. It reports the largest shard's size; ns/op is the whole
// round of shards.
//
//	go test ./signer -run '^$' -bench 'SignCRLShards' -benchtime 1x
func BenchmarkSignCRLShards(b *testing.B) {
	const total = 1_000_000
	iss, _, _ := testCA(b, "p256", 5*365*24*time.Hour)
	now := time.Now().Truncate(time.Second)
	all := make([]RevokedEntry, total)
	for n := range all {
		s, err := newSerial()
		if err != nil {
			b.Fatal(err)
		}
		all[n] = RevokedEntry{Serial: s, RevokedAt: now.Add(-time.Duration(n) * time.Second), Reason: []int{0, 1, 4, 5}[n%4]}
	}
	for _, shards := range []int{16, 32} {
		b.Run(strconv.Itoa(shards), func(b *testing.B) {
			parts := make([][]RevokedEntry, shards)
			for n, e := range all {
				parts[n%shards] = append(parts[n%shards], e)
			}
			var largest int
			for b.Loop() {
				for k, entries := range parts {
					der, err := iss.SignCRL(42, now, now.Add(7*24*time.Hour), entries, testCRLURL+"/"+strconv.Itoa(k))
					if err != nil {
						b.Fatal(err)
					}
					largest = max(largest, len(der))
				}
			}
			b.ReportMetric(float64(largest), "largest-shard-bytes")
		})
	}
}
