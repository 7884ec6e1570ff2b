package config

import (
	"maps"
	"slices"
	"strings"
)

// accessProblems are [access]'s checks that look at other sections: the
// profiles an identifiers check names exist, and no check's time budget
// reaches the request's own (server.request_timeout_ms), or a slow source
// would end the request rather than answer unknown.
func (c Config) accessProblems(p *problems) {
	for _, name := range slices.Sorted(maps.Keys(c.Access.Checks)) {
		ch := c.Access.Checks[name]
		for _, prof := range ch.Profiles {
			if _, ok := c.Profiles[prof]; !ok {
				p.add("access.checks."+name+".profiles", "%q is not a configured profile", prof)
			}
		}
		if ch.TimeoutMS > 0 && ch.TimeoutMS >= c.Server.RequestTimeoutMS {
			p.add("access.checks."+name+".timeout_ms", "must be shorter than server.request_timeout_ms (%d)", c.Server.RequestTimeoutMS)
		}
		if ch.Source.TimeoutMS > 0 && ch.Source.TimeoutMS >= c.Server.RequestTimeoutMS {
			p.add("access.checks."+name+".source.timeout_ms", "must be shorter than server.request_timeout_ms (%d)", c.Server.RequestTimeoutMS)
		}
	}
}

// accessPaths makes a hook's relative program path and an IPAM's token
// file relative to the file's directory, as every other path in it is.
func (c *Config) accessPaths(base string) {
	for name, ch := range c.Access.Checks {
		if ch.Kind == "hook" && len(ch.Command) > 0 && strings.Contains(ch.Command[0], "/") {
			ch.Command = slices.Clone(ch.Command)
			ch.Command[0] = rel(base, ch.Command[0])
		}
		ch.Source.TokenFile = rel(base, ch.Source.TokenFile)
		c.Access.Checks[name] = ch
	}
}
