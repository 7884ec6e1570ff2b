package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// across are the checks that span sections, which no one section's owner
// can make.
func (c Config) across() []error {
	var p problems
	if len(c.Profiles) == 0 {
		p.add("profiles", "at least one profile is needed")
	}
	if _, ok := c.Profiles[c.DefaultProfile]; !ok {
		p.add("default_profile", "%q is not a configured profile", c.DefaultProfile)
	}
	// A CRL is signed again once half its validity has passed, at the first
	// scheduled run after that: a run interval of half the validity or more
	// lets a CRL expire before its successor is signed (RFC 5280 §5.1.2.5:
	// nextUpdate is when the next CRL will be issued). Either below 1 is
	// its own section's problem.
	if c.CA.CRLValidityHours >= 1 && c.Worker.CRLIntervalMinutes >= 1 && 2*c.Worker.CRLIntervalMinutes >= 60*c.CA.CRLValidityHours {
		p.add("worker.crl_interval_minutes", "must be less than half of ca.crl_validity_hours (%d h), or a CRL can expire before the run that signs its successor", c.CA.CRLValidityHours)
	}
	if c.Challenge.TimeoutMS >= c.Worker.JobTimeoutMS {
		p.add("challenge.timeout_ms", "must be shorter than worker.job_timeout_ms (%d)", c.Worker.JobTimeoutMS)
	}
	for i, d := range c.Notify.Destinations {
		if d.TimeoutMS >= c.Worker.JobTimeoutMS {
			p.add(fmt.Sprintf("notify.destinations[%d].timeout_ms", i), "must be shorter than worker.job_timeout_ms (%d)", c.Worker.JobTimeoutMS)
		}
	}
	c.persistProblems(&p)
	c.reservedInDeny(&p)
	c.signerProblems(&p)
	if c.Admin.Listen != "" && (c.Admin.Listen == c.Server.Listen || (c.Server.PublicHTTPListen != "" && c.Admin.Listen == c.Server.PublicHTTPListen)) {
		p.add("admin.listen", "must differ from server.listen and server.public_http_listen: the panel never shares a public listener")
	}
	c.pprofProblems(&p)
	c.accessProblems(&p)
	c.listenerClashes(&p)
	return p
}

// persistProblems refuses a profile offering dns-persist-01 without the
// issuer domain names its challenge lists (server.caa_identities): no
// record could ever validate; and one requiring perspectives when none
// are named.
func (c Config) persistProblems(p *problems) {
	names := make([]string, 0, len(c.Profiles))
	for name := range c.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if slices.Contains(c.Profiles[name].Challenges, "dns-persist-01") && len(c.Server.CAAIdentities) == 0 {
			p.add("profiles."+name+".challenges", "offers dns-persist-01, whose records name this CA by server.caa_identities, which is empty; set it or remove dns-persist-01")
		}
		// A perspective worker validates for no profile: it needs no names.
		if c.Profiles[name].Perspectives && len(c.Challenge.Perspectives.Names) == 0 && c.Worker.Perspective == "" {
			p.add("profiles."+name+".perspectives", "requires network perspectives, but challenge.perspectives.names is empty: none would corroborate and every order would fail at issuance; name them or remove perspectives")
		}
	}
}

// listenerClashes refuses two of the file's listeners on one address: the
// process that binds it second would not start. The panel on a public
// listener is reported above, with its reason.
func (c Config) listenerClashes(p *problems) {
	seen := map[string]string{}
	for _, l := range c.Listeners() {
		first, ok := seen[l.Addr]
		if !ok {
			seen[l.Addr] = l.Key
			continue
		}
		if l.Key == "admin.listen" && (first == "server.listen" || first == "server.public_http_listen") {
			continue
		}
		p.add(l.Key, "%s is also %s: each listener needs an address of its own (\"\" turns %s off)", l.Addr, first, l.Key)
	}
}

// reservedInDeny refuses a range of challenge.allow_reserved_ranges that
// lies wholly in policy.deny_ip_ranges, which would win over it. A range
// that does not parse is its section's problem.
func (c Config) reservedInDeny(p *problems) {
	parse := func(key string, in []string) (out []netip.Prefix) {
		for _, r := range in {
			if pfx, err := policy.ParseIPRanges(key, []string{r}); err == nil {
				out = append(out, pfx...)
			}
		}
		return out
	}
	deny := parse("policy.deny_ip_ranges", c.Policy.DenyIPRanges)
	for _, a := range parse("challenge.allow_reserved_ranges", c.Challenge.AllowReservedRanges) {
		for _, d := range deny {
			if d.Bits() <= a.Bits() && d.Contains(a.Addr()) {
				p.add("challenge.allow_reserved_ranges", "%s lies in policy.deny_ip_ranges %s, which wins: validation never connects there; remove one of them", a, d)
			}
		}
	}
}

// Listeners are the CA's own listeners set in c: the frontend's, the
// panel's, the worker's health and the profiling ones. Validation never
// connects to them on a client's behalf.
func (c Config) Listeners() []workerconf.Listener {
	var out []workerconf.Listener
	for _, l := range []workerconf.Listener{
		{Key: "server.listen", Addr: c.Server.Listen},
		{Key: "server.public_http_listen", Addr: c.Server.PublicHTTPListen},
		{Key: "server.pprof_listen", Addr: c.Server.PprofListen},
		{Key: "admin.listen", Addr: c.Admin.Listen},
		{Key: "worker.health_listen", Addr: c.Worker.HealthListen},
		{Key: "worker.pprof_listen", Addr: c.Worker.PprofListen},
	} {
		if l.Addr != "" {
			out = append(out, l)
		}
	}
	return out
}

// pprofProblems keeps the profiling listeners, which cmd/internal/process
// serves for either binary, on loopback: a profile shows process memory.
func (c Config) pprofProblems(p *problems) {
	for _, l := range []workerconf.Listener{{Key: "server.pprof_listen", Addr: c.Server.PprofListen}, {Key: "worker.pprof_listen", Addr: c.Worker.PprofListen}} {
		if l.Addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(l.Addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			p.add(l.Key, "must be a loopback host:port such as 127.0.0.1:6060 (profiles expose process memory), got %q", l.Addr)
		}
	}
}
