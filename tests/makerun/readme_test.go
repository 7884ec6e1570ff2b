package makerun

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// readme is what the test takes from README.md.
type readme struct {
	makeRun string   // the **`make run`** paragraph
	lego    []string // the lego block's command lines, comments and blanks dropped
}

func readREADME(t *testing.T) readme {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	var r readme
	start := strings.Index(s, "**`make run`**")
	if start < 0 {
		t.Fatal("README.md has no **`make run`** paragraph")
	}
	end := strings.Index(s[start:], "\n\n")
	if end < 0 {
		t.Fatal("README.md's make run paragraph does not end")
	}
	r.makeRun = s[start : start+end]
	at := strings.Index(s, "**lego**")
	if at < 0 {
		t.Fatal("README.md has no **lego** section")
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(s[at:])
	if block == nil {
		t.Fatal("README.md's lego section has no sh block")
	}
	for _, line := range strings.Split(block[1], "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			r.lego = append(r.lego, line)
		}
	}
	return r
}

// addresses are the loopback host:port addresses a text names, each once.
func addresses(s string) []string {
	var out []string
	for _, a := range regexp.MustCompile(`127\.0\.0\.1:\d+`).FindAllString(s, -1) {
		if !contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestREADMEReads: the parts of the README the make run test runs are
// there and say what it needs: the addresses of the make run paragraph,
// and lego commands for http-01, tls-alpn-01 and dns-01 (through the dev
// DNS's zone file) against its directory.
func TestREADMEReads(t *testing.T) {
	t.Parallel()
	r := readREADME(t)
	for _, want := range []string{"127.0.0.1:14000", "127.0.0.1:14001", "127.0.0.1:14053", "127.0.0.1:14080", "127.0.0.1:14090"} {
		if !contains(addresses(r.makeRun), want) {
			t.Errorf("the make run paragraph does not name %s:\n%s", want, r.makeRun)
		}
	}
	for _, want := range []string{"# http-01", "# tls-alpn-01", "# dns-01", "--dns exec", "LEGO_CA_CERTIFICATES=hallmark-data/ca/root.pem", "--path /tmp/lego"} {
		found := false
		for _, l := range r.lego {
			found = found || strings.Contains(l, want)
		}
		if !found {
			t.Errorf("the lego block has no line with %q:\n%s", want, strings.Join(r.lego, "\n"))
		}
	}
}
