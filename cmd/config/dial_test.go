package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// TestValidateDialRanges: check-config refuses a range that does not
// parse, naming its key, and an opt-out that deny_ip_ranges overrides.
func TestValidateDialRanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, want string
	}{
		{"[challenge]\nallow_reserved_ranges = [\"169.254.169.254/32\", \"fe80::/10\"]\n", ""},
		{"[challenge]\nallow_reserved_ranges = [\"169.254.0.0/16\"]\n[policy]\ndeny_ip_ranges = [\"169.254.169.254/32\", \"10.0.0.0/8\"]\n", ""},
		{"[challenge]\nallow_reserved_ranges = [\"metadata\"]\n", `challenge.allow_reserved_ranges: "metadata" is not a CIDR range`},
		{"[challenge]\nallow_reserved_ranges = [\"169.254.169.254/32\"]\n[policy]\ndeny_ip_ranges = [\"169.254.0.0/16\"]\n",
			"challenge.allow_reserved_ranges: 169.254.169.254/32 lies in policy.deny_ip_ranges 169.254.0.0/16, which wins"},
		{"[policy]\ndeny_ip_ranges = [\"10.0.0.0/33\"]\n", `policy.deny_ip_ranges: "10.0.0.0/33" is not a CIDR range`},
		{"[policy]\nallow_ip_ranges = [\"10.0.0.0\"]\n", `policy.allow_ip_ranges: "10.0.0.0" is not a CIDR range`},
	} {
		_, err := load(t, tc.body)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q refused: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one containing %q", tc.body, err, tc.want)
		}
	}
}

// TestListeners: the CA's own listeners, each with its key, that the
// worker's dial policy refuses; unset ones are left out.
func TestListeners(t *testing.T) {
	t.Parallel()
	c, err := load(t, "[server]\nlisten = \"0.0.0.0:443\"\npprof_listen = \"127.0.0.1:6060\"\n[worker]\nhealth_listen = \"127.0.0.1:9090\"\n"+
		"[admin]\nlisten = \"127.0.0.1:14090\"\ntoken_file = \"admin.token\"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []workerconf.Listener{
		{Key: "server.listen", Addr: "0.0.0.0:443"},
		{Key: "server.public_http_listen", Addr: "127.0.0.1:14080"},
		{Key: "server.pprof_listen", Addr: "127.0.0.1:6060"},
		{Key: "admin.listen", Addr: "127.0.0.1:14090"},
		{Key: "worker.health_listen", Addr: "127.0.0.1:9090"},
	}
	if got := c.Listeners(); !slices.Equal(got, want) {
		t.Errorf("listeners %v, want %v", got, want)
	}
}

// TestHealthListenDefault: a worker serves its health and metrics on
// loopback unless told otherwise, "" turns them off, and a file that puts
// two listeners on one address is refused, naming both keys.
func TestHealthListenDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want, err string
	}{
		{"absent", "", workerconf.DefaultHealthListen, ""},
		{"off", "[worker]\nhealth_listen = \"\"\n", "", ""},
		{"set", "[worker]\nhealth_listen = \"127.0.0.1:9100\"\n", "127.0.0.1:9100", ""},
		{"on the panel's address", "[admin]\nlisten = \"127.0.0.1:14001\"\ntoken_file = \"admin.token\"\n", "",
			"worker.health_listen: 127.0.0.1:14001 is also admin.listen"},
		{"not host:port", "[worker]\nhealth_listen = \"14001\"\n", "", "worker.health_listen: must be host:port"},
		{"on the frontend's", "[worker]\nhealth_listen = \"127.0.0.1:14000\"\n", "", "worker.health_listen: 127.0.0.1:14000 is also server.listen"},
	} {
		c, err := load(t, tc.body)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case c.Worker.HealthListen != tc.want:
			t.Errorf("%s: worker.health_listen = %q, want %q", tc.name, c.Worker.HealthListen, tc.want)
		}
	}
}

// TestChallengeDNSSEC: challenge.dnssec defaults to check, takes off,
// check and require, and check-config names the key for anything else.
func TestChallengeDNSSEC(t *testing.T) {
	t.Parallel()
	c, err := load(t, "")
	if err != nil || c.Challenge.DNSSEC != workerconf.DNSSECCheck {
		t.Fatalf("default challenge.dnssec = %q (%v), want %q", c.Challenge.DNSSEC, err, workerconf.DNSSECCheck)
	}
	for _, mode := range []string{"off", "check", "require"} {
		if c, err := load(t, "[challenge]\ndnssec = \""+mode+"\"\n"); err != nil || c.Challenge.DNSSEC != mode {
			t.Errorf("dnssec = %q: %q, %v", mode, c.Challenge.DNSSEC, err)
		}
	}
	if _, err := load(t, "[challenge]\ndnssec = \"validate\"\n"); err == nil || !strings.Contains(err.Error(), `challenge.dnssec: must be "off"`) {
		t.Errorf("dnssec = \"validate\": %v", err)
	}
}
