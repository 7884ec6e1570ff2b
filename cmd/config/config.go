// Package config reads the one configuration file every Hallmark binary
// reads: TOML, decoded strictly (an unknown key is an error) into the
// sections each component owns, over the defaults, with relative paths and
// derived URLs filled in. Validate then runs every section's own checks and
// those across sections (across.go), reporting every problem at once,
// naming its key. Secrets come from files or the environment and are never
// logged.
package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/hallmark-ca/hallmark/admin/adminconf"
	"github.com/hallmark-ca/hallmark/cmd/internal/process"
	"github.com/hallmark-ca/hallmark/jobs/notify"
	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/serverconf"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/redact"
	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// Config is the whole file, each section its owner's type.
type Config struct {
	Database  open.Config                `toml:"database"`
	Server    serverconf.Server          `toml:"server"`
	Admin     adminconf.Config           `toml:"admin"`
	Worker    workerconf.Worker          `toml:"worker"`
	Challenge workerconf.Challenge       `toml:"challenge"`
	Audit     workerconf.Audit           `toml:"audit"`
	Policy    policy.Config              `toml:"policy"`
	CA        signerconf.CA              `toml:"ca"`
	Profiles  map[string]profile.Profile `toml:"profiles"`
	Limits    serverconf.Limits          `toml:"limits"` // rate limits, 0 = unlimited
	Access    access.Config              `toml:"access"` // who may ask: the client access policy
	Notify    notify.Config              `toml:"notify"`
	// Backends are the named pkcs11, relay and custom signing backends.
	Backends map[string]Backend `toml:"backends"`
	// DefaultProfile is used when newOrder names none.
	DefaultProfile string `toml:"default_profile"`
	// Log is how every process writes its lines.
	Log process.Log `toml:"log"`
}

// Default returns a configuration that runs a local CA on loopback with SQLite.
func Default() Config {
	return Config{
		Database:       open.Config{URL: "sqlite:hallmark-data/hallmark.db"},
		Server:         serverconf.DefaultServer(),
		Worker:         workerconf.DefaultWorker(),
		Challenge:      workerconf.DefaultChallenge(),
		Policy:         policy.Config{MaxIdentifiers: policy.DefaultMaxIdentifiers},
		CA:             signerconf.DefaultCA(),
		Profiles:       map[string]profile.Profile{"default": profile.Default()},
		DefaultProfile: "default",
	}
}

// Load reads path over the defaults. Unknown keys are errors.
func Load(path string) (Config, error) { return load(path, Config.Validate) }

// LoadWorker is Load for hallmark-worker: Validate's problems and
// ValidateWorker's are reported together.
func LoadWorker(path string) (Config, error) { return load(path, Config.ValidateWorker) }

func load(path string, validate func(Config) error) (Config, error) {
	c, err := decode(path)
	if err != nil {
		return c, err // the file did not read or decode: c is not what it says
	}
	return c, validate(c)
}

func decode(path string) (Config, error) {
	c := Default()
	if path != "" {
		md, err := toml.DecodeFile(path, &c)
		if err != nil {
			return c, fmt.Errorf("reading config %s: %w", path, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			keys := make([]string, len(und))
			for i, k := range und {
				keys[i] = k.String()
			}
			return c, fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
		}
	}
	c.databaseFromEnv()
	if path != "" {
		c.relativeTo(filepath.Dir(path))
	}
	c.derive()
	return c, nil
}

// relativeTo makes the file's relative paths relative to its directory.
func (c *Config) relativeTo(base string) {
	c.CA.Dir = rel(base, c.CA.Dir)
	c.Server.TLSCert = rel(base, c.Server.TLSCert)
	c.Server.TLSKey = rel(base, c.Server.TLSKey)
	c.Admin.TokenFile = rel(base, c.Admin.TokenFile)
	c.Admin.OIDC.ClientSecretFile = rel(base, c.Admin.OIDC.ClientSecretFile)
	c.accessPaths(base)
	c.backendPaths(base)
	if strings.HasPrefix(c.Database.URL, "sqlite:") {
		c.Database.URL = "sqlite:" + rel(base, strings.TrimPrefix(c.Database.URL, "sqlite:"))
	}
}

// derive fills the values whose defaults depend on others.
func (c *Config) derive() {
	if c.Server.BaseURL == "" {
		scheme := "https"
		if c.Server.PlainHTTP || c.Server.TLSCert == "" {
			scheme = "http"
		}
		c.Server.BaseURL = scheme + "://" + c.Server.Listen
	}
	c.Server.BaseURL = strings.TrimRight(c.Server.BaseURL, "/")
	if c.CA.URLBase == "" && c.Server.PublicHTTPListen != "" {
		c.CA.URLBase = "http://" + c.Server.PublicHTTPListen
	}
	c.CA.URLBase = strings.TrimRight(c.CA.URLBase, "/")
	c.backendDefaults()
	c.profileDefaults()
	c.Limits = c.Limits.WithDefaults()
	c.Notify.Defaults()
	if c.Worker.ID == "" {
		host, _ := os.Hostname()
		c.Worker.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
}

// profileDefaults gives a profile that names no key usages the built-in
// profile's: a [profiles.x] table is decoded whole, not merged with the
// built-in default, and a TLS leaf without keyUsage or extKeyUsage breaks
// the CA/Browser Forum profile (BR §7.1.2.7.10, §7.1.2.7.11), which zlint
// refuses only for the second.
func (c *Config) profileDefaults() {
	for name, p := range c.Profiles {
		if len(p.KeyUsages) == 0 {
			p.KeyUsages = profile.Default().KeyUsages
		}
		if len(p.ExtKeyUsages) == 0 {
			p.ExtKeyUsages = profile.Default().ExtKeyUsages
		}
		c.Profiles[name] = p
	}
}

// databaseFromEnv applies HALLMARK_DATABASE_URL over database.url, with a
// configuration file or without one: a container that sets only the
// variable must not fall back to the embedded SQLite file. The URL's
// password is registered with redact, so no output of the process shows it.
func (c *Config) databaseFromEnv() {
	if env := os.Getenv("HALLMARK_DATABASE_URL"); env != "" {
		c.Database.URL = env
	}
	redact.AddURL(c.Database.URL)
}

func rel(base, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

// Validate reports every problem at once, each naming its key: each
// section's own checks, then those across sections.
func (c Config) Validate() error { return report(c.problems()) }

// ValidateWorker is Validate with the settings only hallmark-worker needs
// (workerconf.Challenge.ValidateResolvers); the frontend and the CLI never
// look anything up, so they do not insist on them.
func (c Config) ValidateWorker() error {
	return report(append(c.problems(), c.Challenge.ValidateResolvers()))
}

func (c Config) problems() []error {
	errs := []error{c.Database.Validate(), c.Server.Validate(), c.CA.Validate(), c.Worker.Validate(),
		c.Challenge.Validate(), c.Policy.Validate()}
	for _, n := range slices.Sorted(maps.Keys(c.Profiles)) {
		errs = append(errs, c.Profiles[n].Validate(n))
	}
	errs = append(errs, c.backendProblems()...)
	errs = append(errs, c.Limits.Validate(), c.Admin.Validate(), c.Audit.Validate(), c.Access.Validate(), c.Log.Validate(), c.Notify.Validate())
	return append(errs, c.across()...)
}

// report is every problem in errs (each section's errors.Join of its own),
// one a line, or nil.
func report(errs []error) error {
	if err := errors.Join(errs...); err != nil {
		return errors.New("invalid configuration:\n  " + strings.ReplaceAll(err.Error(), "\n", "\n  "))
	}
	return nil
}

// problems collects the problems of the checks across sections.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}
