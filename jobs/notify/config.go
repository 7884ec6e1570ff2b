package notify

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Config is [notify].
type Config struct {
	// TemplateDir holds <event>.tmpl and <event>.subject.tmpl files that
	// replace the built-in templates.
	TemplateDir string `toml:"template_dir"`
	// ExpiryDays are the thresholds of certificate_expiring: a live
	// certificate not renewed this many days before it expires is reported,
	// once per threshold. Default [14, 3].
	ExpiryDays   []int         `toml:"expiry_days"`
	Destinations []Destination `toml:"destinations"`
}

// The destination kinds.
const (
	KindWebhook = "webhook"
	KindEmail   = "email"
	KindProgram = "program"
)

// Destination is one [[notify.destinations]].
type Destination struct {
	Name   string   `toml:"name"`
	Kind   string   `toml:"kind"`
	Events []string `toml:"events"` // empty: every event
	// TimeoutMS bounds one delivery; default 10000, at most 25000 (a job's
	// run is bounded by worker.job_timeout_ms).
	TimeoutMS int `toml:"timeout_ms"`

	// webhook
	URL     string            `toml:"url"`
	Method  string            `toml:"method"` // default POST
	Headers map[string]string `toml:"headers"`
	// Body, when set, is the request body's template (Slack, Mattermost,
	// Teams: their JSON); otherwise the body is the event as JSON.
	Body        string `toml:"body"`
	ContentType string `toml:"content_type"` // default application/json

	// email
	SMTP         string   `toml:"smtp"` // host:port, STARTTLS required
	From         string   `toml:"from"`
	To           []string `toml:"to"`
	Username     string   `toml:"username"`
	PasswordFile string   `toml:"password_file"`
	CAFile       string   `toml:"ca_file"` // verifies the SMTP server; default the system's roots

	// program
	Command []string `toml:"command"` // absolute path, then arguments; the event as JSON on stdin
	Env     []string `toml:"env"`     // names of the worker's environment variables passed on
}

// Defaults fills the defaults in place.
func (c *Config) Defaults() {
	if c.ExpiryDays == nil {
		c.ExpiryDays = []int{14, 3}
	}
	for i := range c.Destinations {
		d := &c.Destinations[i]
		if d.TimeoutMS == 0 {
			d.TimeoutMS = 10000
		}
		if d.Kind == KindWebhook && d.Method == "" {
			d.Method = "POST"
		}
		if d.Kind == KindWebhook && d.ContentType == "" {
			d.ContentType = "application/json"
		}
	}
}

// MaxTimeoutMS bounds a destination's timeout_ms.
const MaxTimeoutMS = 25000

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Validate reports every problem of [notify], each naming its key.
func (c Config) Validate() error {
	var errs []error
	for i, n := range c.ExpiryDays {
		if n < 1 || n > 365 {
			errs = append(errs, fmt.Errorf("notify.expiry_days[%d]: %d is not 1 to 365 days", i, n))
		}
	}
	if _, err := LoadTemplates(c.TemplateDir); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i, d := range c.Destinations {
		key := fmt.Sprintf("notify.destinations[%d]", i)
		if !nameRE.MatchString(d.Name) {
			errs = append(errs, fmt.Errorf("%s.name: %q must be 1-63 of a-z, 0-9, '_' and '-'", key, d.Name))
		} else if seen[d.Name] {
			errs = append(errs, fmt.Errorf("%s.name: %q names another destination too", key, d.Name))
		}
		seen[d.Name] = true
		errs = append(errs, d.validate(key))
	}
	return errors.Join(errs...)
}

func (d Destination) validate(key string) error {
	var errs []error
	for j, ev := range d.Events {
		if !Known(ev) {
			errs = append(errs, fmt.Errorf("%s.events[%d]: %q is no event (events: %s)", key, j, ev, strings.Join(Events, ", ")))
		}
	}
	if d.TimeoutMS < 1 || d.TimeoutMS > MaxTimeoutMS {
		errs = append(errs, fmt.Errorf("%s.timeout_ms: %d is not 1 to %d", key, d.TimeoutMS, MaxTimeoutMS))
	}
	switch d.Kind {
	case KindWebhook:
		errs = append(errs, d.validateWebhook(key))
	case KindEmail:
		errs = append(errs, d.validateEmail(key))
	case KindProgram:
		if len(d.Command) == 0 || !filepath.IsAbs(d.Command[0]) {
			errs = append(errs, fmt.Errorf("%s.command: must start with an absolute path to the program", key))
		}
	default:
		errs = append(errs, fmt.Errorf("%s.kind: %q is not webhook, email or program", key, d.Kind))
	}
	return errors.Join(errs...)
}

func (d Destination) validateWebhook(key string) error {
	var errs []error
	if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s.url: must be an http:// or https:// URL", key))
	}
	if !slices.Contains([]string{"POST", "PUT", "PATCH"}, d.Method) {
		errs = append(errs, fmt.Errorf("%s.method: %q is not POST, PUT or PATCH", key, d.Method))
	}
	if d.Body != "" {
		if _, err := Inline(d.Name, d.Body); err != nil {
			errs = append(errs, fmt.Errorf("%s.body: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

func (d Destination) validateEmail(key string) error {
	var errs []error
	if d.SMTP == "" || !strings.Contains(d.SMTP, ":") {
		errs = append(errs, fmt.Errorf("%s.smtp: must be host:port of an SMTP server offering STARTTLS", key))
	}
	if _, err := mail.ParseAddress(d.From); err != nil {
		errs = append(errs, fmt.Errorf("%s.from: %q is no mail address", key, d.From))
	}
	if len(d.To) == 0 {
		errs = append(errs, fmt.Errorf("%s.to: names no recipient", key))
	}
	for j, to := range d.To {
		if _, err := mail.ParseAddress(to); err != nil {
			errs = append(errs, fmt.Errorf("%s.to[%d]: %q is no mail address", key, j, to))
		}
	}
	if (d.Username == "") != (d.PasswordFile == "") {
		errs = append(errs, fmt.Errorf("%s.password_file: username and password_file go together", key))
	}
	return errors.Join(errs...)
}

// Route names the destinations that take event.
func (c Config) Route(event string) []string {
	var out []string
	for _, d := range c.Destinations {
		if len(d.Events) == 0 || slices.Contains(d.Events, event) {
			out = append(out, d.Name)
		}
	}
	return out
}
