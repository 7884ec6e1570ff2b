package config

import (
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/signer/signerconf"
)

// Backend is one named signing backend, `[backends.<name>]`, that profiles
// with backend "pkcs11", "relay" or "custom" name in their `signer` key.
// Profiles that name the same backend share it: one HSM key, one relay
// account, one set of hooks. Each type's keys are its signerconf type's;
// only the keys of its Type, and timeout_ms, may be set.
type Backend struct {
	Type string `toml:"type"` // pkcs11, relay, custom
	signerconf.PKCS11
	signerconf.Relay
	signerconf.Custom
	// TimeoutMS bounds one call to the backend (relay: the whole upstream
	// order; custom: one hook run; pkcs11: one signature, and the wait for
	// a session to make it in). Default 20000 for relay, 10000 for custom,
	// and for pkcs11 10000 or half of worker.job_timeout_ms if less.
	TimeoutMS int `toml:"timeout_ms"`
}

// Timeout is timeout_ms as a duration.
func (b Backend) Timeout() time.Duration { return time.Duration(b.TimeoutMS) * time.Millisecond }

// settings are b's settings of each type, by type.
func (b Backend) settings() map[string]interface{ Validate(key string) error } {
	return map[string]interface{ Validate(key string) error }{"pkcs11": b.PKCS11, "relay": b.Relay, "custom": b.Custom}
}

// backendDefaults fills what depends on other settings.
func (c *Config) backendDefaults() {
	for name, b := range c.Backends {
		if b.Type == "pkcs11" && b.MaxSessions == 0 {
			b.MaxSessions = c.Worker.Concurrency + 2
		}
		if b.TimeoutMS == 0 {
			switch b.Type {
			case "relay":
				b.TimeoutMS = 20000
			case "custom":
				b.TimeoutMS = 10000
			case "pkcs11":
				// Inside the job's own time, so a hung token's signature
				// is given up before River gives the job up.
				b.TimeoutMS = min(10000, c.Worker.JobTimeoutMS/2)
			}
		}
		if b.Type == "relay" && b.Challenge == "" {
			b.Challenge = "http-01"
			if b.ChallengeStrategy == "dns01" {
				b.Challenge = "dns-01"
			}
		}
		c.Backends[name] = b
	}
}

// backendPaths makes the backends' file names relative to the config file.
func (c *Config) backendPaths(base string) {
	for name, b := range c.Backends {
		b.PINFile = rel(base, b.PINFile)
		b.Cert = rel(base, b.Cert)
		b.AccountKey = rel(base, b.AccountKey)
		b.CACert = rel(base, b.CACert)
		b.TSIGSecretFile = rel(base, b.TSIGSecretFile)
		b.EABHMACKeyFile = rel(base, b.EABHMACKeyFile)
		for _, argv := range []*[]string{&b.IssueCommand, &b.RevokeCommand, &b.CRLCommand, &b.RenewalInfoCommand} {
			if len(*argv) > 0 && strings.ContainsRune((*argv)[0], filepath.Separator) {
				*argv = append([]string{rel(base, (*argv)[0])}, (*argv)[1:]...)
			}
		}
		c.Backends[name] = b
	}
}

// backendProblems checks each `[backends.<name>]`: its type, that it sets
// no key of another type, its type's own checks, and that a call to it ends
// inside the job (and, for a hook, inside a revocation's request).
func (c Config) backendProblems() []error {
	var p problems
	for _, n := range slices.Sorted(maps.Keys(c.Backends)) {
		b := c.Backends[n]
		key := "backends." + n
		settings := b.settings()
		own, ok := settings[b.Type]
		if !ok {
			p.add(key+".type", "must be one of pkcs11, relay, custom; got %q", b.Type)
			continue
		}
		var stray []string
		for typ, s := range settings {
			if typ != b.Type {
				stray = append(stray, setKeys(s)...)
			}
		}
		slices.Sort(stray)
		for _, f := range stray {
			p.add(key+"."+f, "does not apply to a %s backend", b.Type)
		}
		p = append(p, own.Validate(key))
		// A revocation waits for the hook inside the request's deadline
		// minus one second (protocol revokeRemote): a hook that may run
		// longer could never answer in time.
		if b.Type == "custom" && b.TimeoutMS >= c.Server.RequestTimeoutMS-1000 {
			p.add(key+".timeout_ms", "must be shorter than server.request_timeout_ms - 1000 (%d), so a revocation can finish inside the request", c.Server.RequestTimeoutMS-1000)
		}
		// The record's propagation wait is spent inside the upstream order's
		// time, before the upstream has even been asked to validate.
		if b.Type == "relay" && b.ChallengeStrategy == "dns01" && b.TimeoutMS <= 1000*b.PropagationWait() {
			p.add(key+".timeout_ms", "must be longer than propagation_wait_seconds (%d s): the upstream order waits for the record, then for the upstream's validation", b.PropagationWait())
		}
		if b.Type == "relay" && b.ChallengeStrategy == "http01" && c.Server.PublicHTTPListen == "" {
			p.add(key+".challenge_strategy", "http01 answers are served by the frontend's public http listener; set server.public_http_listen (the upstream validates on port 80 of each name)")
		}
		if b.TimeoutMS >= c.Worker.JobTimeoutMS {
			p.add(key+".timeout_ms", "must be shorter than worker.job_timeout_ms (%d)", c.Worker.JobTimeoutMS)
		}
	}
	return p
}

// setKeys are the TOML keys of settings (a signerconf struct) that hold a
// value: an empty list or table holds none.
func setKeys(settings any) []string {
	v := reflect.ValueOf(settings)
	var keys []string
	for i := range v.NumField() {
		if f := v.Field(i); !f.IsZero() && (f.Kind() != reflect.Slice && f.Kind() != reflect.Map || f.Len() > 0) {
			keys = append(keys, strings.Split(v.Type().Field(i).Tag.Get("toml"), ",")[0])
		}
	}
	return keys
}

// signerProblems checks the profiles' `signer` keys against `[backends.*]`.
func (c Config) signerProblems(p *problems) {
	for _, n := range slices.Sorted(maps.Keys(c.Profiles)) {
		prof := c.Profiles[n]
		key := "profiles." + n + ".signer"
		switch prof.Backend {
		case "local":
			if prof.Signer != "" {
				p.add(key, "a local profile signs with ca.dir; leave signer out")
			}
		case "pkcs11", "relay", "custom":
			b, ok := c.Backends[prof.Signer]
			switch {
			case prof.Signer == "":
				p.add(key, "a %s profile names its [backends.<name>] here", prof.Backend)
			case !ok:
				p.add(key, "there is no [backends.%s]", prof.Signer)
			case b.Type != prof.Backend:
				p.add(key, "backends.%s is a %s backend, but the profile's backend is %s", prof.Signer, b.Type, prof.Backend)
			}
		}
	}
}
