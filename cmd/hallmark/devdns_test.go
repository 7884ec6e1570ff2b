package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDevDNSZoneFile: the dev DNS answers the zone file's records beside
// its *.localhost A 127.0.0.1 (a record of the file wins for its name and
// type), reads the file again when it changes, keeps the records read
// before (and says so) when the file stops parsing, and answers over UDP
// and TCP; the hook lego's exec provider runs adds and deletes TXT records.
func TestDevDNSZoneFile(t *testing.T) {
	data := t.TempDir()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	if err := writeDevZone(data, "hallmark.invalid", addr); err != nil {
		t.Fatal(err)
	}
	zone := filepath.Join(data, devZoneFile)
	logs := &syncBuffer{}
	servers, err := startDevDNS(addr, zone, logs)
	if err != nil {
		t.Skipf("SKIPPING: no port free for UDP and TCP at once: %v", err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Shutdown()
		}
	})
	ask := func(net, name string, qtype uint16) (*dns.Msg, []string) {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		c := &dns.Client{Net: net, Timeout: 2 * time.Second}
		resp, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], net, err)
		}
		var got []string
		for _, rr := range resp.Answer {
			got = append(got, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
		return resp, got
	}
	expect := func(name string, qtype uint16, rcode int, want ...string) {
		t.Helper()
		for _, n := range []string{"udp", "tcp"} {
			resp, got := ask(n, name, qtype)
			if resp.Rcode != rcode || strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("%s %s over %s: %s %q, want %s %q", name, dns.TypeToString[qtype], n,
					dns.RcodeToString[resp.Rcode], got, dns.RcodeToString[rcode], want)
			}
		}
	}
	write := func(text string) {
		t.Helper()
		// A new modification time even on a coarse clock.
		time.Sleep(10 * time.Millisecond)
		if err := os.WriteFile(zone, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The file written on first run has only comments.
	expect("test.localhost", dns.TypeA, dns.RcodeSuccess, "127.0.0.1")
	expect("test.localhost", dns.TypeTXT, dns.RcodeSuccess)
	expect("example.com", dns.TypeA, dns.RcodeNameError)

	write("$ORIGIN localhost.\n_acme-challenge.dns TXT \"one\"\nip A 10.0.0.7\nwww.example.internal. 60 IN A 10.0.0.8\ncaa CAA 0 issue \"hallmark.invalid\"\n")
	expect("_acme-challenge.dns.localhost", dns.TypeTXT, dns.RcodeSuccess, `"one"`)
	expect("ip.localhost", dns.TypeA, dns.RcodeSuccess, "10.0.0.7")
	expect("www.example.internal", dns.TypeA, dns.RcodeSuccess, "10.0.0.8")
	expect("www.example.internal", dns.TypeTXT, dns.RcodeSuccess)
	expect("caa.localhost", dns.TypeCAA, dns.RcodeSuccess, `0 issue "hallmark.invalid"`)
	expect("other.example.internal", dns.TypeA, dns.RcodeNameError)

	hook := filepath.Join(data, devZoneHook)
	run := func(args ...string) {
		t.Helper()
		if out, err := execCommand(hook, args...); err != nil {
			t.Fatalf("%s %v: %v\n%s", hook, args, err, out)
		}
	}
	run("present", "_acme-challenge.dns.localhost.", "two")
	expect("_acme-challenge.dns.localhost", dns.TypeTXT, dns.RcodeSuccess, `"one"`, `"two"`)
	run("cleanup", "_acme-challenge.dns.localhost.", "two")
	expect("_acme-challenge.dns.localhost", dns.TypeTXT, dns.RcodeSuccess, `"one"`)

	write("$ORIGIN localhost.\n_acme-challenge.dns TXT \"one\"\nbroken IN A not-an-address\n")
	expect("_acme-challenge.dns.localhost", dns.TypeTXT, dns.RcodeSuccess, `"one"`)
	expect("ip.localhost", dns.TypeA, dns.RcodeSuccess, "10.0.0.7") // the records read before
	if got := logs.String(); !strings.Contains(got, "dev.zone") || !strings.Contains(got, "line: 3") ||
		!strings.Contains(got, "still serving the records read before") || strings.Count(got, "dev DNS:") != 1 {
		t.Errorf("a zone file that does not parse is reported once, naming the file and line; got:\n%s", got)
	}
	if err := os.Remove(zone); err != nil {
		t.Fatal(err)
	}
	expect("_acme-challenge.dns.localhost", dns.TypeTXT, dns.RcodeSuccess)
	expect("ip.localhost", dns.TypeA, dns.RcodeSuccess, "127.0.0.1")
}

func execCommand(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}
