package signer

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSignCRLShards signs 1,000,000 revocations spread over an
// issuer's 64 CRL shards (ca.crl_shards' default), each shard linted and
// signed by the issuer's key on its own, GOMAXPROCS shards at a time, as a
// worker runs the shards' crl_generate jobs side by side. ns/op is the
// whole round of shards; it reports the largest shard's size and the CPU
// time the round took (cpu-s/op: on a shared machine ns/op waits for the
// other processes, and an idle one's wall time is about cpu-s/op divided
// by its cores).
//
//	go test ./signer -run '^$' -bench 'SignCRLShards' -benchtime 1x
func BenchmarkSignCRLShards(b *testing.B) {
	const total, shards = 1_000_000, 64
	iss, _, _ := testCA(b, "p256", 5*365*24*time.Hour)
	now := time.Now().Truncate(time.Second)
	parts := make([][]RevokedEntry, shards)
	for n := range total {
		s, err := newSerial()
		if err != nil {
			b.Fatal(err)
		}
		e := RevokedEntry{Serial: s, RevokedAt: now.Add(-time.Duration(n) * time.Second), Reason: []int{0, 1, 4, 5}[n%4]}
		parts[n%shards] = append(parts[n%shards], e)
	}
	sizes := make([]int, shards)
	cpu0 := cpuTime(b)
	for b.Loop() {
		next := make(chan int, shards)
		for k := range shards {
			next <- k
		}
		close(next)
		var wg sync.WaitGroup
		errs := make(chan error, shards)
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for k := range next {
					der, err := iss.SignCRL(42, now, now.Add(7*24*time.Hour), parts[k], testCRLURL+"/"+strconv.Itoa(k))
					if err != nil {
						errs <- err
						return
					}
					sizes[k] = len(der)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(slices.Max(sizes)), "largest-shard-bytes")
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
