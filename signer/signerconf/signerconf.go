// Package signerconf is the signer's sections of the configuration file,
// [ca] and each type of [backends.<name>], with their checks. It is a
// standard-library leaf apart from the signer packages because every
// binary checks the whole file, while the frontend and the CLI may link no
// signer/ code that holds keys (tests/layering exempts this leaf only).
// signer/pkcs11, signer/relay and signer/custom build their Configs from it.
package signerconf

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// CA configures the local issuing CA (backend "local"), [ca].
type CA struct {
	Dir string `toml:"dir"` // holds root.pem, intermediate.pem, intermediate.key
	// URLBase is where relying parties fetch CRLs and the issuer
	// certificate: plain http, as RFC 5280 and the Baseline Requirements
	// expect for CRL distribution points and AIA caIssuers. Default:
	// "http://" + server.public_http_listen.
	URLBase          string `toml:"url_base"`
	CRLValidityHours int    `toml:"crl_validity_hours"`
	// CRLShards is how many CRLs each local or PKCS#11 issuer's
	// revocations are spread over; a certificate names its shard's URL.
	CRLShards int `toml:"crl_shards"`
	// Country is the countryName (ISO 3166-1 alpha-2) of the CA
	// certificates `hallmark-worker ca init` makes (CABF BR §7.1.2.10.2
	// requires one); later intermediates repeat their root's. Default
	// "XX", the user-assigned code, which names no country.
	Country string `toml:"country"`
}

// DefaultCRLShards keeps every shard under about 1 MiB (an entry is about
// 46 bytes) with a million unexpired revocations outstanding, far more
// than a private CA revokes in a certificate lifetime; an empty shard
// costs one small signature per crl_validity_hours/2.
const DefaultCRLShards = 64

// MaxCRLShards bounds ca.crl_shards: each shard is a job and a signature.
const MaxCRLShards = 1024

// DefaultCA is [ca] when the file sets nothing.
func DefaultCA() CA {
	return CA{Dir: "hallmark-data/ca", CRLValidityHours: 24 * 7, CRLShards: DefaultCRLShards, Country: "XX"}
}

// Validate reports every problem of [ca], each naming its key.
func (c CA) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.URLBase, "http://") {
		errs = append(errs, fmt.Errorf("ca.url_base: must be an http:// URL (CRLs and AIA are fetched over plain http), got %q; set it or server.public_http_listen", c.URLBase))
	}
	if c.CRLValidityHours < 1 {
		errs = append(errs, errors.New("ca.crl_validity_hours: must be at least 1"))
	}
	if !countryCode(c.Country) {
		errs = append(errs, fmt.Errorf("ca.country: must be an ISO 3166-1 alpha-2 code in capitals (\"DE\", \"US\"; \"XX\" for none), got %q", c.Country))
	}
	if c.CRLShards < 1 || c.CRLShards > MaxCRLShards {
		errs = append(errs, fmt.Errorf("ca.crl_shards: must be between 1 and %d, got %d; never lower it once certificates are issued (their shards above it would get no CRL)", MaxCRLShards, c.CRLShards))
	}
	return errors.Join(errs...)
}

// countryCode reports whether s has the form of an ISO 3166-1 alpha-2
// code: two capital letters (zlint checks the code itself before a CA
// certificate is signed).
func countryCode(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// problems collects one backend's problems, each naming its key.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// PKCS11 is a [backends.<name>] of type pkcs11: the module, the token
// (label or slot), the PIN (from an environment variable or a file, never
// inline), the key (label or hex id) and the issuing certificate (the
// token's key's certificate first, then any further intermediates, PEM; the
// root is in ca.dir/root.pem). signer/pkcs11 reads the PIN.
type PKCS11 struct {
	Module      string `toml:"module"`
	TokenLabel  string `toml:"token_label"`
	Slot        *int   `toml:"slot"`
	PINEnv      string `toml:"pin_env"`
	PINFile     string `toml:"pin_file"`
	KeyLabel    string `toml:"key_label"`
	KeyID       string `toml:"key_id"`
	Cert        string `toml:"cert"`
	MaxSessions int    `toml:"max_sessions"` // default worker.concurrency + 2
}

// Validate reports every problem of the pkcs11 backend at key
// ("backends.<name>"), each naming its key.
func (b PKCS11) Validate(key string) error {
	var p problems
	if b.Module == "" {
		p.add(key+".module", "the path of the PKCS#11 module (.so) is required")
	}
	if (b.TokenLabel == "") == (b.Slot == nil) {
		p.add(key+".token_label", "set exactly one of token_label and slot")
	}
	if (b.PINEnv == "") == (b.PINFile == "") {
		p.add(key+".pin_env", "set exactly one of pin_env and pin_file (the PIN is never written in the configuration)")
	}
	if (b.KeyLabel == "") == (b.KeyID == "") {
		p.add(key+".key_label", "set exactly one of key_label and key_id")
	}
	if b.KeyID != "" {
		if _, err := hex.DecodeString(b.KeyID); err != nil {
			p.add(key+".key_id", "must be hex: %v", err)
		}
	}
	if b.Cert == "" {
		p.add(key+".cert", "the issuing certificate (PEM) of the token's key is required; `hallmark-worker ca init --pkcs11` writes it")
	}
	if b.MaxSessions < 2 {
		p.add(key+".max_sessions", "must be at least 2 (one session stays logged in)")
	}
	return errors.Join(p...)
}

// Relay is a [backends.<name>] of type relay: the upstream ACME CA's
// directory, the account key (PEM, created on first start if missing),
// contact addresses, an extra PEM trust anchor for the upstream's TLS
// certificate, and the challenge type the relay accepts on upstream
// authorizations that are still pending.
type Relay struct {
	DirectoryURL string   `toml:"directory_url"`
	AccountKey   string   `toml:"account_key"`
	Contact      []string `toml:"contact"`
	CACert       string   `toml:"ca_cert"`
	Challenge    string   `toml:"challenge"`
	// RenewalInfoPerRun bounds how many certificates one refresh of the
	// upstream's renewal windows (RFC 9773) asks the upstream about; 0 is
	// relay.DefaultRenewalInfoPerRun.
	RenewalInfoPerRun int `toml:"renewal_info_per_run"`
	// ChallengeStrategy is how the relay answers the upstream's
	// challenges: "bypass" (or empty: accept and wait, for an upstream
	// that grants the account itself), "dns01" (publish the TXT record
	// by RFC 2136 UPDATE signed with TSIG) or "http01" (the frontend's
	// public http listener serves the answer the worker stores).
	ChallengeStrategy string `toml:"challenge_strategy"`
	// DNS01 settings: the authoritative server ("host:port") that takes
	// the updates and answers the polls, the zone updated, the TSIG key's
	// name, algorithm and secret file (base64), and how long to wait for
	// the record to be served before answering the challenge.
	DNSServer              string `toml:"dns_server"`
	DNSZone                string `toml:"dns_zone"`
	TSIGKeyName            string `toml:"tsig_key_name"`
	TSIGAlgorithm          string `toml:"tsig_algorithm"`
	TSIGSecretFile         string `toml:"tsig_secret_file"`
	PropagationWaitSeconds int    `toml:"propagation_wait_seconds"`
	// EABKID and EABHMACKeyFile bind the upstream account to an account
	// the upstream CA issued (RFC 8555 §7.3.4): the key ID and a file
	// holding the base64url HMAC key.
	EABKID         string `toml:"eab_kid"`
	EABHMACKeyFile string `toml:"eab_hmac_key_file"`
}

// DefaultPropagationWaitSeconds is propagation_wait_seconds when the file
// sets none.
const DefaultPropagationWaitSeconds = 10

// PropagationWait is propagation_wait_seconds, or its default.
func (b Relay) PropagationWait() int {
	if b.PropagationWaitSeconds > 0 {
		return b.PropagationWaitSeconds
	}
	return DefaultPropagationWaitSeconds
}

// TSIGAlgorithms are the tsig_algorithm values the relay signs with.
var TSIGAlgorithms = []string{"hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"}

// Validate reports every problem of the relay backend at key
// ("backends.<name>"), each naming its key.
func (b Relay) Validate(key string) error {
	var p problems
	if u, err := url.Parse(b.DirectoryURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		p.add(key+".directory_url", "must be the upstream CA's ACME directory URL, got %q", b.DirectoryURL)
	}
	if b.AccountKey == "" {
		p.add(key+".account_key", "the path of the upstream account key (PEM) is required; it is created if missing")
	}
	if b.Challenge != "http-01" && b.Challenge != "dns-01" && b.Challenge != "tls-alpn-01" {
		p.add(key+".challenge", "must be http-01, dns-01 or tls-alpn-01, got %q", b.Challenge)
	}
	if b.RenewalInfoPerRun < 0 {
		p.add(key+".renewal_info_per_run", "must be positive (0 takes the default, 100), got %d", b.RenewalInfoPerRun)
	}
	if (b.EABKID == "") != (b.EABHMACKeyFile == "") {
		p.add(key+".eab_kid", "set both eab_kid and eab_hmac_key_file, or neither")
	}
	switch b.ChallengeStrategy {
	case "", "bypass":
	case "dns01":
		b.validateDNS01(key, &p)
	case "http01":
		if b.Challenge != "http-01" {
			p.add(key+".challenge", "challenge_strategy http01 answers http-01 challenges; set challenge = \"http-01\", got %q", b.Challenge)
		}
	default:
		p.add(key+".challenge_strategy", "must be bypass, dns01 or http01, got %q", b.ChallengeStrategy)
	}
	return errors.Join(p...)
}

// validateDNS01 checks the settings challenge_strategy = "dns01" needs.
func (b Relay) validateDNS01(key string, p *problems) {
	if b.Challenge != "dns-01" {
		p.add(key+".challenge", "challenge_strategy dns01 answers dns-01 challenges; set challenge = \"dns-01\", got %q", b.Challenge)
	}
	if _, port, err := net.SplitHostPort(b.DNSServer); err != nil || port == "" {
		p.add(key+".dns_server", "the authoritative server that takes the updates, as host:port (e.g. \"ns1.example.com:53\"), is required; got %q", b.DNSServer)
	}
	if b.DNSZone == "" {
		p.add(key+".dns_zone", "the zone the _acme-challenge records are added to is required")
	}
	if b.TSIGKeyName == "" {
		p.add(key+".tsig_key_name", "the TSIG key's name is required (updates are always signed)")
	}
	if !slices.Contains(TSIGAlgorithms, strings.TrimSuffix(strings.ToLower(b.TSIGAlgorithm), ".")) {
		p.add(key+".tsig_algorithm", "must be one of %s, got %q", strings.Join(TSIGAlgorithms, ", "), b.TSIGAlgorithm)
	}
	if b.TSIGSecretFile == "" {
		p.add(key+".tsig_secret_file", "the file holding the TSIG secret (base64) is required; the secret is never written in the configuration")
	}
	if b.PropagationWaitSeconds < 0 {
		p.add(key+".propagation_wait_seconds", "must be positive (0 takes the default, 10), got %d", b.PropagationWaitSeconds)
	}
}

// Custom is a [backends.<name>] of type custom: the operator's executables
// (argv; the first element is the program) for issue and revoke.
type Custom struct {
	IssueCommand  []string `toml:"issue_command"`
	RevokeCommand []string `toml:"revoke_command"`
	// CRLCommand and RenewalInfoCommand are optional: a hook that signs
	// this backend's CRLs, and one that says when its certificates should
	// be renewed (RFC 9773).
	CRLCommand         []string `toml:"crl_command"`
	RenewalInfoCommand []string `toml:"renewal_info_command"`
	// Env and PassEnv are a hook's whole environment, with
	// HALLMARK_BACKEND: these values, and these names of the worker's own.
	Env     map[string]string `toml:"env"`
	PassEnv []string          `toml:"pass_env"`
}

// Validate reports every problem of the custom backend at key
// ("backends.<name>"), each naming its key.
func (b Custom) Validate(key string) error {
	var p problems
	if len(b.IssueCommand) == 0 {
		p.add(key+".issue_command", "the issue hook (argv) is required")
	}
	if len(b.RevokeCommand) == 0 {
		p.add(key+".revoke_command", "the revoke hook (argv) is required")
	}
	for name := range b.Env {
		if !envName(name) {
			p.add(key+".env", "%q is no environment variable name (letters, digits and '_', not starting with a digit)", name)
		}
	}
	for _, name := range b.PassEnv {
		if !envName(name) {
			p.add(key+".pass_env", "%q is no environment variable name (letters, digits and '_', not starting with a digit)", name)
		}
	}
	return errors.Join(p...)
}

// envName reports whether name is a portable environment variable name
// (POSIX: letters, digits and '_', not starting with a digit).
func envName(name string) bool {
	for i, c := range name {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}
