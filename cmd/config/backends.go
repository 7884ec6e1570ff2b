package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hallmark-ca/hallmark/store/redact"
)

// Backend is one named signing backend, `[backends.<name>]`, that profiles
// with backend "pkcs11", "relay" or "custom" name in their `signer` key.
// Profiles that name the same backend share it: one HSM key, one relay
// account, one set of hooks. Only the fields of its Type may be set.
type Backend struct {
	Type string `toml:"type"` // pkcs11, relay, custom

	// pkcs11: the module, the token (label or slot), the PIN (from an
	// environment variable or a file, never inline), the key (label or hex
	// id) and the issuing certificate (the token's key's certificate first,
	// then any further intermediates, PEM; the root is in ca.dir/root.pem or
	// `root`).
	Module      string `toml:"module"`
	TokenLabel  string `toml:"token_label"`
	Slot        *int   `toml:"slot"`
	PINEnv      string `toml:"pin_env"`
	PINFile     string `toml:"pin_file"`
	KeyLabel    string `toml:"key_label"`
	KeyID       string `toml:"key_id"`
	Cert        string `toml:"cert"`
	MaxSessions int    `toml:"max_sessions"` // default worker.concurrency + 2

	// relay: the upstream ACME CA's directory, the account key (PEM, created
	// on first start if missing), contact addresses, an extra PEM trust
	// anchor for the upstream's TLS certificate, and the challenge type the
	// relay accepts on upstream authorizations that are still pending.
	DirectoryURL string   `toml:"directory_url"`
	AccountKey   string   `toml:"account_key"`
	Contact      []string `toml:"contact"`
	CACert       string   `toml:"ca_cert"`
	Challenge    string   `toml:"challenge"`
	// RenewalInfoPerRun bounds how many certificates one refresh of the
	// upstream's renewal windows (RFC 9773) asks the upstream about; 0 is
	// relay.DefaultRenewalInfoPerRun.
	RenewalInfoPerRun int `toml:"renewal_info_per_run"`

	// custom: the operator's executables (argv; the first element is the
	// program) for issue and revoke, with a per-call timeout.
	IssueCommand  []string `toml:"issue_command"`
	RevokeCommand []string `toml:"revoke_command"`

	// TimeoutMS bounds one call to the backend (relay: the whole upstream
	// order; custom: one hook run; pkcs11: one signature, and the wait for
	// a session to make it in). Default 20000 for relay, 10000 for custom,
	// and for pkcs11 10000 or half of worker.job_timeout_ms if less.
	TimeoutMS int `toml:"timeout_ms"`
}

// PIN reads the PKCS#11 PIN from the environment variable or the file (a
// trailing newline is dropped). It is never part of the configuration file,
// so it is never printed with it, and it is registered with redact.
func (b Backend) PIN() (string, error) {
	pin, err := b.readPIN()
	if err == nil {
		redact.Add(pin)
	}
	return pin, err
}

func (b Backend) readPIN() (string, error) {
	switch {
	case b.PINEnv != "":
		v, ok := os.LookupEnv(b.PINEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("pin_env: the environment variable %s is not set", b.PINEnv)
		}
		return v, nil
	case b.PINFile != "":
		data, err := os.ReadFile(b.PINFile)
		if err != nil {
			return "", fmt.Errorf("pin_file: %w", err)
		}
		pin := strings.TrimRight(string(data), "\r\n")
		if pin == "" {
			return "", fmt.Errorf("pin_file: %s is empty", b.PINFile)
		}
		return pin, nil
	}
	return "", fmt.Errorf("neither pin_env nor pin_file is set")
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
		if len(b.IssueCommand) > 0 && strings.ContainsRune(b.IssueCommand[0], filepath.Separator) {
			b.IssueCommand = append([]string{rel(base, b.IssueCommand[0])}, b.IssueCommand[1:]...)
		}
		if len(b.RevokeCommand) > 0 && strings.ContainsRune(b.RevokeCommand[0], filepath.Separator) {
			b.RevokeCommand = append([]string{rel(base, b.RevokeCommand[0])}, b.RevokeCommand[1:]...)
		}
		c.Backends[name] = b
	}
}

// validateBackends checks `[backends.*]` and the profiles' `signer` keys.
func (c Config) validateBackends(add func(key, format string, args ...any)) {
	names := make([]string, 0, len(c.Backends))
	for n := range c.Backends {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b := c.Backends[n]
		key := "backends." + n
		set := map[string]bool{
			"module": b.Module != "", "token_label": b.TokenLabel != "", "slot": b.Slot != nil,
			"pin_env": b.PINEnv != "", "pin_file": b.PINFile != "", "key_label": b.KeyLabel != "",
			"key_id": b.KeyID != "", "cert": b.Cert != "", "max_sessions": b.MaxSessions != 0,
			"directory_url": b.DirectoryURL != "", "account_key": b.AccountKey != "",
			"contact": len(b.Contact) > 0, "ca_cert": b.CACert != "", "challenge": b.Challenge != "",
			"issue_command": len(b.IssueCommand) > 0, "revoke_command": len(b.RevokeCommand) > 0,
			"timeout_ms": b.TimeoutMS != 0, "renewal_info_per_run": b.RenewalInfoPerRun != 0,
		}
		own := map[string][]string{
			"pkcs11": {"module", "token_label", "slot", "pin_env", "pin_file", "key_label", "key_id", "cert", "max_sessions", "timeout_ms"},
			"relay":  {"directory_url", "account_key", "contact", "ca_cert", "challenge", "timeout_ms", "renewal_info_per_run"},
			"custom": {"issue_command", "revoke_command", "timeout_ms"},
		}
		fields, ok := own[b.Type]
		if !ok {
			add(key+".type", "must be one of pkcs11, relay, custom; got %q", b.Type)
			continue
		}
		allowed := map[string]bool{}
		for _, f := range fields {
			allowed[f] = true
		}
		var stray []string
		for f, isSet := range set {
			if isSet && !allowed[f] {
				stray = append(stray, f)
			}
		}
		sort.Strings(stray)
		for _, f := range stray {
			add(key+"."+f, "does not apply to a %s backend", b.Type)
		}
		switch b.Type {
		case "pkcs11":
			if b.Module == "" {
				add(key+".module", "the path of the PKCS#11 module (.so) is required")
			}
			if (b.TokenLabel == "") == (b.Slot == nil) {
				add(key+".token_label", "set exactly one of token_label and slot")
			}
			if (b.PINEnv == "") == (b.PINFile == "") {
				add(key+".pin_env", "set exactly one of pin_env and pin_file (the PIN is never written in the configuration)")
			}
			if (b.KeyLabel == "") == (b.KeyID == "") {
				add(key+".key_label", "set exactly one of key_label and key_id")
			}
			if b.KeyID != "" {
				if _, err := hex.DecodeString(b.KeyID); err != nil {
					add(key+".key_id", "must be hex: %v", err)
				}
			}
			if b.Cert == "" {
				add(key+".cert", "the issuing certificate (PEM) of the token's key is required; `hallmark-worker ca init --pkcs11` writes it")
			}
			if b.MaxSessions < 2 {
				add(key+".max_sessions", "must be at least 2 (one session stays logged in)")
			}
		case "relay":
			if u, err := url.Parse(b.DirectoryURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				add(key+".directory_url", "must be the upstream CA's ACME directory URL, got %q", b.DirectoryURL)
			}
			if b.AccountKey == "" {
				add(key+".account_key", "the path of the upstream account key (PEM) is required; it is created if missing")
			}
			if b.Challenge != "http-01" && b.Challenge != "dns-01" && b.Challenge != "tls-alpn-01" {
				add(key+".challenge", "must be http-01, dns-01 or tls-alpn-01, got %q", b.Challenge)
			}
			if b.RenewalInfoPerRun < 0 {
				add(key+".renewal_info_per_run", "must be positive (0 takes the default, 100), got %d", b.RenewalInfoPerRun)
			}
		case "custom":
			if len(b.IssueCommand) == 0 {
				add(key+".issue_command", "the issue hook (argv) is required")
			}
			if len(b.RevokeCommand) == 0 {
				add(key+".revoke_command", "the revoke hook (argv) is required")
			}
			// A revocation waits for the hook inside the request's
			// deadline minus one second (protocol revokeRemote): a hook
			// that may run longer could never answer in time.
			if b.TimeoutMS >= c.Server.RequestTimeoutMS-1000 {
				add(key+".timeout_ms", "must be shorter than server.request_timeout_ms - 1000 (%d), so a revocation can finish inside the request", c.Server.RequestTimeoutMS-1000)
			}
		}
		if b.TimeoutMS >= c.Worker.JobTimeoutMS {
			add(key+".timeout_ms", "must be shorter than worker.job_timeout_ms (%d)", c.Worker.JobTimeoutMS)
		}
	}
	pnames := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		pnames = append(pnames, n)
	}
	sort.Strings(pnames)
	for _, n := range pnames {
		p := c.Profiles[n]
		key := "profiles." + n + ".signer"
		switch p.Backend {
		case "local":
			if p.Signer != "" {
				add(key, "a local profile signs with ca.dir; leave signer out")
			}
		case "pkcs11", "relay", "custom":
			b, ok := c.Backends[p.Signer]
			switch {
			case p.Signer == "":
				add(key, "a %s profile names its [backends.<name>] here", p.Backend)
			case !ok:
				add(key, "there is no [backends.%s]", p.Signer)
			case b.Type != p.Backend:
				add(key, "backends.%s is a %s backend, but the profile's backend is %s", p.Signer, b.Type, p.Backend)
			}
		}
	}
}
