// Package profile is a certificate profile (draft-ietf-acme-profiles),
// [profiles.<name>] of the configuration file: what the frontend offers and
// holds orders to, what the worker validates for and the signer signs by.
//
// It is a leaf of the standard library under protocol/ so that all of them
// share one type: protocol/... may not import signer/... (tests/layering),
// while signer and worker may import protocol/ leaves, as they do
// protocol/acme.
package profile

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Profile is a named certificate profile.
type Profile struct {
	Description          string   `toml:"description"`
	Backend              string   `toml:"backend"` // local, pkcs11, relay, custom
	ValidityHours        int      `toml:"validity_hours"`
	AllowValidityRequest bool     `toml:"allow_validity_request"` // honour notBefore/notAfter
	KeyTypes             []string `toml:"key_types"`              // "rsa2048","rsa3072","rsa4096","p256","p384","ed25519"
	Challenges           []string `toml:"challenges"`
	IdentifierTypes      []string `toml:"identifier_types"` // dns, ip
	AllowWildcards       bool     `toml:"allow_wildcards"`
	SetCN                bool     `toml:"set_cn"`
	KeyUsages            []string `toml:"key_usages"`
	ExtKeyUsages         []string `toml:"ext_key_usages"`
	// Signer names the [backends.<name>] of a pkcs11, relay or custom profile.
	Signer string `toml:"signer"`
	// ARI and newAuthz: the suggested renewal window as fractions of the
	// validity period (0 and 0: the middle third), and whether newAuthz
	// may pre-authorize identifiers for this profile.
	RenewalWindowStart    float64 `toml:"renewal_window_start"`
	RenewalWindowEnd      float64 `toml:"renewal_window_end"`
	AllowPreAuthorization bool    `toml:"allow_pre_authorization"`
	// Perspectives: issue only on authorizations the network perspectives
	// of [challenge.perspectives] corroborated (CA/B BR §3.2.2.9); one
	// validated without them is neither reused nor issued on.
	Perspectives bool `toml:"perspectives"`
}

// MaxBackdate is how far before the moment of signing a certificate's
// notBefore may be: enough to absorb a relying party's slightly slow clock,
// small enough that the certificate cannot be used to claim it existed
// earlier than it did. The signer backdates a certificate by it, and the
// frontend refuses an order's requested notBefore earlier than it (RFC 8555
// §7.4: the server must not issue other contents than were requested).
const MaxBackdate = time.Minute

// Default is the built-in profile "default": a 90-day TLS server certificate.
func Default() Profile {
	return Profile{
		Description: "90-day TLS server certificate", Backend: "local", ValidityHours: 90 * 24,
		KeyTypes:        []string{"rsa2048", "rsa3072", "rsa4096", "p256", "p384"},
		Challenges:      []string{"http-01", "dns-01", "tls-alpn-01"},
		IdentifierTypes: []string{"dns", "ip"}, AllowWildcards: true,
		KeyUsages:    []string{"digitalSignature", "keyEncipherment"},
		ExtKeyUsages: []string{"serverAuth"},
	}
}

// IssuerKeys is where the keys of the profile's issuers are, as an issuer
// record's backend names it: "" (ca.dir) for a local profile, its
// [backends.<name>] for a PKCS#11 one; managed is false for a profile whose
// issuer Hallmark does not rotate (relay, custom).
func (p Profile) IssuerKeys() (backend string, managed bool) {
	switch p.Backend {
	case "local":
		return "", true
	case "pkcs11":
		return p.Signer, true
	}
	return "", false
}

// RenewalWindow is the profile's suggested renewal window (RFC 9773 §4.2)
// as fractions of a certificate's validity period: by default the middle
// third, as Let's Encrypt suggests.
func (p Profile) RenewalWindow() (start, end float64) {
	if p.RenewalWindowStart == 0 && p.RenewalWindowEnd == 0 {
		return 1.0 / 3, 2.0 / 3
	}
	return p.RenewalWindowStart, p.RenewalWindowEnd
}

var knownKeyTypes = map[string]bool{"rsa2048": true, "rsa3072": true, "rsa4096": true, "p256": true, "p384": true, "ed25519": true}

// knownChallenges are the challenge types a profile may offer. dns-account-01
// and dns-persist-01 are never offered unless listed: a dns-persist-01
// record is a standing authorization (docs/operations.md).
var knownChallenges = map[string]bool{"http-01": true, "dns-01": true, "tls-alpn-01": true, "dns-account-01": true, "dns-persist-01": true}

// byDNS are the challenge types that prove control of a zone: the only ones
// that can validate a wildcard.
var byDNS = []string{"dns-01", "dns-account-01", "dns-persist-01"}

// forIP are the challenge types that can validate an IP address.
var forIP = []string{"http-01", "tls-alpn-01", "dns-persist-01"}
var knownBackends = map[string]bool{"local": true, "pkcs11": true, "relay": true, "custom": true}
var knownKeyUsages = map[string]bool{"digitalSignature": true, "keyEncipherment": true}
var knownExtKeyUsages = map[string]bool{"serverAuth": true, "clientAuth": true}

// nameRE and maxName are what a profile may be named. The name is also the
// River queue of its signing and revoking jobs (jobs.ProfileQueue:
// "profile_" + name), and River refuses a queue name that is not lowercase
// letters and digits separated by single '_' or '-' (its own pattern also
// allows '|'), or that is over 64 characters: a worker mounting such a
// profile would not start, and finalize would fail to queue its job.
var nameRE = regexp.MustCompile(`^[a-z0-9]+(?:[_-][a-z0-9]+)*$`)

const maxName = 64 - len("profile_")

// Validate reports every problem of [profiles.<name>], each naming its key.
func (p Profile) Validate(name string) error {
	var errs []error
	key := "profiles." + name
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if !nameRE.MatchString(name) || len(name) > maxName {
		add(key, "the name must be lowercase letters and digits, separated by single '_' or '-', at most %d characters: it names the River queue of the profile's signing jobs, which takes no other name", maxName)
	}
	if !knownBackends[p.Backend] {
		add(key+".backend", "must be one of local, pkcs11, relay, custom; got %q", p.Backend)
	}
	if p.ValidityHours < 1 {
		add(key+".validity_hours", "must be at least 1")
	}
	for _, k := range p.KeyTypes {
		if !knownKeyTypes[k] {
			add(key+".key_types", "unknown key type %q", k)
		}
	}
	if len(p.Challenges) == 0 {
		add(key+".challenges", "at least one challenge type is needed")
	}
	for _, ch := range p.Challenges {
		if !knownChallenges[ch] {
			add(key+".challenges", "unknown challenge type %q", ch)
		}
	}
	for _, it := range p.IdentifierTypes {
		if it != "dns" && it != "ip" {
			add(key+".identifier_types", "unknown identifier type %q", it)
		}
	}
	// What the profile allows must be something its challenges can
	// validate, or every such order is refused (rejectedIdentifier),
	// even for names a pre-validating EAB binding vouches for.
	if p.AllowWildcards && !slices.ContainsFunc(p.Challenges, func(c string) bool { return slices.Contains(byDNS, c) }) {
		add(key+".allow_wildcards", "a wildcard is validated only by dns-01, dns-account-01 or dns-persist-01 (RFC 8555 §7.1.3); add one to challenges or set allow_wildcards = false")
	}
	if slices.Contains(p.IdentifierTypes, "ip") && !slices.ContainsFunc(p.Challenges, func(c string) bool { return slices.Contains(forIP, c) }) {
		add(key+".identifier_types", "an IP address is validated only by http-01, tls-alpn-01 (RFC 8738 §7) or dns-persist-01 (BR §3.2.2.5.8); add one to challenges or remove \"ip\"")
	}
	for _, u := range p.KeyUsages {
		if !knownKeyUsages[u] {
			add(key+".key_usages", "unknown key usage %q (known: digitalSignature, keyEncipherment)", u)
		}
	}
	for _, u := range p.ExtKeyUsages {
		if !knownExtKeyUsages[u] {
			add(key+".ext_key_usages", "unknown extended key usage %q (known: serverAuth, clientAuth)", u)
		}
	}
	// An ECDSA or Ed25519 leaf can assert only digitalSignature (RFC 8813
	// §3), and a leaf with no keyUsage breaks BR §7.1.2.7.11.
	keyTypes := p.KeyTypes
	if len(keyTypes) == 0 {
		keyTypes = Default().KeyTypes
	}
	if !slices.Contains(p.KeyUsages, "digitalSignature") && slices.ContainsFunc(keyTypes, func(k string) bool { return !strings.HasPrefix(k, "rsa") }) {
		add(key+".key_usages", "must include digitalSignature while key_types allow ECDSA or Ed25519 keys, whose certificates can assert nothing else")
	}
	if start, end := p.RenewalWindow(); start < 0 || end > 1 || start >= end {
		add(key+".renewal_window_start", "renewal_window_start (%g) and renewal_window_end (%g) must satisfy 0 <= start < end <= 1", start, end)
	}
	return errors.Join(errs...)
}
