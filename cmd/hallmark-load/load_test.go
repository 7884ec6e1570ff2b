package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestResponders checks what a CA validating against the generator sees:
// every name is A 127.0.0.1 with no AAAA, and a published token is served
// at its http-01 path until dropped.
func TestResponders(t *testing.T) {
	t.Parallel()
	r, err := startResponders("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		qtype uint16
		want  int
	}{{dns.TypeA, 1}, {dns.TypeAAAA, 0}, {dns.TypeCAA, 0}} {
		m := new(dns.Msg)
		m.SetQuestion("i1-abc.load.test.", tc.qtype)
		in, err := dns.Exchange(m, r.DNSAddr)
		if err != nil {
			t.Fatal(err)
		}
		if in.Rcode != dns.RcodeSuccess || len(in.Answer) != tc.want {
			t.Fatalf("%s: rcode %d, %d answers, want NOERROR and %d", dns.TypeToString[tc.qtype], in.Rcode, len(in.Answer), tc.want)
		}
		if tc.want == 1 && in.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
			t.Fatalf("A = %s", in.Answer[0])
		}
	}
	r.Tokens.put("tok", "tok.thumb")
	url := "http://127.0.0.1:" + strconv.Itoa(r.HTTPPort) + challengePrefix + "tok"
	if got := get(t, url); got != "tok.thumb" {
		t.Fatalf("token body %q", got)
	}
	r.Tokens.drop("tok")
	if got := get(t, url); !strings.Contains(got, "404") {
		t.Fatalf("dropped token still served: %q", got)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.Status
	}
	return string(b)
}

// TestClientStaysOnLoopback: the generator's HTTP client refuses to dial
// anything but loopback, whatever a directory names.
func TestClientStaysOnLoopback(t *testing.T) {
	t.Parallel()
	hc := newHTTPClient(nil, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://192.0.2.1/directory", nil)
	_, err := hc.Do(req)
	if err == nil || !strings.Contains(err.Error(), "only talks to loopback") {
		t.Fatalf("dialing 192.0.2.1: %v, want a refusal", err)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%.0f = %d, want %d", tc.p*100, got, tc.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// TestProcReadings reads this process's own CPU time and peak RSS.
func TestProcReadings(t *testing.T) {
	t.Parallel()
	end := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(end) { // burn a little CPU
	}
	cpu, err := procCPU(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Fatalf("procCPU = %s, %v", cpu, err)
	}
	if procHWM(os.Getpid()) <= 0 {
		t.Fatal("no VmHWM for this process")
	}
	// Sleeping switches this thread out; the count is the sum over every
	// thread, so it only grows.
	before := procSwitches(os.Getpid())
	for range 3 {
		time.Sleep(time.Millisecond)
	}
	if after := procSwitches(os.Getpid()); before <= 0 || after <= before {
		t.Fatalf("procSwitches = %d, then %d after sleeping", before, after)
	}
	if selfSwitches() <= 0 {
		t.Fatal("getrusage reports no context switches for this process")
	}
}

// TestAnonPeaks: the sampler keeps the highest anonymous resident memory
// it saw of a group, not the last: this process touches 64 MiB, lets it
// go and returns it to the kernel, and the peak still holds it.
func TestAnonPeaks(t *testing.T) {
	p := procSet{pids: map[string][]int{"self": {os.Getpid()}}}
	base := procStatusKiB(os.Getpid(), "RssAnon:")
	if base <= 0 {
		t.Fatal("no RssAnon for this process")
	}
	ctx, cancel := context.WithCancel(context.Background())
	peaks := p.anonPeaks(ctx, 5*time.Millisecond)
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = 1 // resident, page by page
	}
	time.Sleep(300 * time.Millisecond) // sampled while held, on a busy machine too
	runtime.KeepAlive(buf)
	buf = nil
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(50 * time.Millisecond) // sampled after it went back
	cancel()
	got := peaks()["self"]
	if got < base+60<<10 {
		t.Fatalf("peak anonymous memory %d KiB, want at least %d (what it started at, %d, plus the 64 MiB held)", got, base+60<<10, base)
	}
	if now := procStatusKiB(os.Getpid(), "RssAnon:"); now >= got {
		t.Logf("RssAnon %d KiB after release; peak %d", now, got)
	}
}

// TestStallWatch: a run whose last issuance finished longer ago than the
// limit is stopped; one that finishes issuances is left alone.
func TestStallWatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		last     time.Time
		limit    time.Duration
		wantStop bool
	}{
		{"nothing finished for an hour", time.Now().Add(-time.Hour), 40 * time.Millisecond, true},
		{"an issuance just finished", time.Now().Add(time.Hour), 40 * time.Millisecond, false},
		{"a limit too small to divide", time.Now().Add(-time.Hour), 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w stallWatch
			w.finished(tc.last)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			stopped := make(chan struct{}, 1)
			w.watch(ctx, tc.limit, func() { stopped <- struct{}{} })
			if got := len(stopped) == 1; got != tc.wantStop {
				t.Fatalf("stopped = %v, want %v", got, tc.wantStop)
			}
		})
	}
}

// TestRatePerSec: a stalled run is rated over the span until its last
// issuance, not over the wait that ended it.
func TestRatePerSec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    result
		want float64
	}{
		{"finished", result{OK: 100, Wall: 2 * time.Second, Active: time.Second}, 50},
		{"stalled", result{OK: 100, Wall: 12 * time.Second, Active: time.Second, Stalled: true}, 100},
		{"stalled before any", result{OK: 0, Wall: 10 * time.Second, Stalled: true}, 0},
	} {
		if got := tc.r.RatePerSec(); got != tc.want {
			t.Errorf("%s: RatePerSec = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTableReference: every row's "vs Pebble" is against Pebble's best
// completed run at its concurrency, or its best rate until a stall when
// every run stalled; the reference reads 1.00×.
func TestTableReference(t *testing.T) {
	t.Parallel()
	run := func(label string, c, ok int, wall, active time.Duration, stalled bool) *result {
		return &result{Label: label, Spec: loadSpec{Concurrency: c}, OK: ok, Wall: wall, Active: active, Stalled: stalled}
	}
	for _, tc := range []struct {
		name string
		rs   []*result
		want []string
	}{
		{"every run stalled", []*result{
			run("pebble (in memory)", 32, 900, 11*time.Second, 6*time.Second, true), // 150/s until it stalled
			run("hallmark postgres local", 32, 1000, 20*time.Second, 20*time.Second, false),
			run("pebble (in memory)", 32, 100, 6*time.Second, time.Second, true), // 100/s
			run("hallmark postgres local", 1, 300, 10*time.Second, 10*time.Second, false),
		}, []string{"| 150.0 until it stalled | 1.00× |", "| 50.0 | 0.33× |", "| 100.0 until it stalled | 0.67× |", "| 30.0 | — |"}},
		{"a completed run, slower than a stall", []*result{
			run("pebble (in memory)", 32, 900, 11*time.Second, 6*time.Second, true),  // 150/s until it stalled
			run("pebble (in memory)", 32, 1000, 8*time.Second, 8*time.Second, false), // 125/s, whole
			run("hallmark postgres local", 32, 1000, 20*time.Second, 20*time.Second, false),
		}, []string{"| 150.0 until it stalled | 1.20× |", "| 125.0 | 1.00× |", "| 50.0 | 0.40× |"}},
	} {
		var b strings.Builder
		printTable(&b, tc.rs)
		rows := strings.Split(strings.TrimSpace(b.String()), "\n")[2:]
		for i, want := range tc.want {
			if !strings.Contains(rows[i], want) {
				t.Errorf("%s: row %d = %s, want it to contain %q", tc.name, i, rows[i], want)
			}
		}
	}
}

// TestUntilCompleted: a target whose series of batches ends in a stall is
// run again, fresh, until a series completes or the attempts are spent; an
// error stops it.
func TestUntilCompleted(t *testing.T) {
	t.Parallel()
	boom := errors.New("could not start")
	for _, tc := range []struct {
		name      string
		attempts  int
		stalls    []bool // whether each run's last batch stalled; past the end, it completes
		failAt    int    // 1-based run that fails; 0 for none
		wantCalls int
		wantErr   error
	}{
		{"completes at once", 3, nil, 0, 1, nil},
		{"stalls twice, then completes", 3, []bool{true, true}, 0, 3, nil},
		{"stalls every time", 3, []bool{true, true, true, true}, 0, 3, nil},
		{"one attempt", 1, []bool{true}, 0, 1, nil},
		{"no attempts means one", 0, []bool{true}, 0, 1, nil},
		{"fails to start", 3, []bool{true}, 2, 2, boom},
		{"fails at once", 3, nil, 1, 1, boom},
	} {
		calls := 0
		err := untilCompleted(tc.attempts, func() (bool, error) {
			calls++
			if calls == tc.failAt {
				return false, boom
			}
			return calls <= len(tc.stalls) && tc.stalls[calls-1], nil
		})
		if !errors.Is(err, tc.wantErr) || calls != tc.wantCalls {
			t.Errorf("%s: %d runs, error %v; want %d, %v", tc.name, calls, err, tc.wantCalls, tc.wantErr)
		}
	}
}

// TestPrintRequests: a run's report has each request kind's p50 and how
// many of it an issuance took, polls above one when a wait needed more.
func TestPrintRequests(t *testing.T) {
	t.Parallel()
	millis := func(n ...int) []time.Duration {
		var ds []time.Duration
		for _, v := range n {
			ds = append(ds, time.Duration(v)*time.Millisecond)
		}
		return ds
	}
	r := &result{Label: "x", OK: 2, Wall: time.Second, RequestTimes: map[string][]time.Duration{
		reqNewOrder:  millis(3, 5),
		reqAuthzPoll: millis(2, 2, 4),
	}}
	var b strings.Builder
	r.print(&b)
	for _, want := range []string{
		"request newOrder             p50    3.0 p99    5.0 ms, 1.00 per certificate",
		"request authorization poll   p50    2.0 p99    4.0 ms, 1.50 per certificate",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "request finalize") {
		t.Errorf("report names a request kind the run never made:\n%s", b.String())
	}
}

// TestStallCreatingAccounts: a CA that stops answering while the accounts
// are made, before the clock starts (Pebble's deadlock, seen at newAccount
// after ~1,600 certificates), ends the run as stalled within --stall, with
// nothing issued, rather than holding it to the HTTP timeout and failing
// the bench.
func TestStallCreatingAccounts(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("GET /dir", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"newNonce":%q,"newAccount":%q,"newOrder":%q}`, srv.URL+"/nonce", srv.URL+"/acct", srv.URL+"/order")
	})
	mux.HandleFunc("HEAD /nonce", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Replay-Nonce", "n1") })
	mux.HandleFunc("POST /acct", func(w http.ResponseWriter, r *http.Request) {
		select { // deadlocked: never answers
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv = httptest.NewTLSServer(mux)
	defer srv.Close()
	defer close(release)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	start := time.Now()
	r, err := runLoad(context.Background(), loadSpec{Directory: srv.URL + "/dir", Roots: roots, Concurrency: 2, Count: 4,
		Timeout: time.Minute, Stall: 300 * time.Millisecond, Poll: 10 * time.Millisecond, Responders: &responders{Tokens: &tokenStore{}}})
	if err != nil {
		t.Fatalf("runLoad: %v, want a stalled result", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the run took %s to notice a stall of 300ms", took)
	}
	if !r.Stalled || r.OK != 0 || r.Errors["stalled creating accounts (--stall reached)"] != 1 {
		t.Fatalf("result stalled=%v ok=%d errors=%v, want a stall creating accounts", r.Stalled, r.OK, r.Errors)
	}
}

// TestMatrixGoesOn: a peer's run that fails (Pebble deadlocked past what
// --stall ends) costs its row, and the bench goes on to the next target
// and concurrency with exit status 0; a Hallmark run that fails also gets
// its row, the bench still goes on, and the error says which failed. A
// failed Pebble row is no reference for the others.
func TestMatrixGoesOn(t *testing.T) {
	t.Parallel()
	boom := errors.New("newAccount: context deadline exceeded")
	for _, tc := range []struct {
		name    string
		fail    map[string]bool // "target@c"
		wantErr string
	}{
		{"pebble fails at c=32", map[string]bool{"pebble@32": true}, ""},
		{"hallmark fails at c=1", map[string]bool{"hallmark-sqlite@1": true}, "hallmark-sqlite at c=1"},
	} {
		var ran []string
		m := matrix{
			concurrencies: []int{1, 32}, targets: []string{"pebble", "hallmark-sqlite", "step-ca"},
			skip:     func(string) string { return "" },
			attempts: func(string) int { return 1 },
			run: func(tg string, n int, keep func(*result)) (bool, error) {
				ran = append(ran, fmt.Sprintf("%s@%d", tg, n))
				if tc.fail[fmt.Sprintf("%s@%d", tg, n)] {
					return false, boom
				}
				keep(&result{Label: tg, Spec: loadSpec{Concurrency: n}, OK: 10, Wall: time.Second})
				return false, nil
			},
		}
		rs, err := m.runAll(context.Background(), io.Discard, io.Discard)
		if want := "pebble@1 hallmark-sqlite@1 step-ca@1 pebble@32 hallmark-sqlite@32 step-ca@32"; strings.Join(ran, " ") != want {
			t.Errorf("%s: ran %v, want %s", tc.name, ran, want)
		}
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.wantErr)
		}
		var b strings.Builder
		printTable(&b, rs)
		if len(rs) != 6 || strings.Count(b.String(), "| FAILED: "+boom.Error()) != 1 {
			t.Errorf("%s: want 6 rows, one failed:\n%s", tc.name, b.String())
		}
		if tc.fail["pebble@32"] && !strings.Contains(b.String(), "| hallmark-sqlite | 32 | 10 | 10.0 | — | 1.00× |") {
			t.Errorf("%s: the row beside a failed Pebble should compare with step-ca only:\n%s", tc.name, b.String())
		}
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{{nil, 0}, {[]time.Duration{3}, 3}, {[]time.Duration{9, 1, 5}, 5}, {[]time.Duration{8, 2, 4, 6}, 5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
