package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// defaultBodies are the built-in body templates, by event; a file
// <event>.tmpl in template_dir replaces one.
var defaultBodies = map[string]string{
	CertificateIssued:   `Certificate {{.Subject}} issued for {{join .Names ", "}} (account {{.Account}}), valid until {{date .NotAfter}}.`,
	CertificateRevoked:  `Certificate {{.Subject}} for {{join .Names ", "}} revoked by {{.Actor}}: {{.Detail}}`,
	CertificateExpiring: `Certificate {{.Subject}} for {{join .Names ", "}} expires {{date .NotAfter}} and has not been renewed: {{.Detail}}`,
	ChallengeFailed:     `Challenge {{.Subject}} failed validation (account {{.Account}}): {{.Detail}}`,
	AccountCreated:      `Account {{.Subject}} created: {{.Detail}}`,
	AccountDeactivated:  `Account {{.Subject}} deactivated; its pending orders and authorizations are invalid.`,
}

// defaultSubjects are the built-in subject templates (email); a file
// <event>.subject.tmpl in template_dir replaces one.
var defaultSubjects = map[string]string{
	CertificateIssued:   `[hallmark] certificate issued for {{first .Names}}`,
	CertificateRevoked:  `[hallmark] certificate revoked for {{first .Names}}`,
	CertificateExpiring: `[hallmark] certificate for {{first .Names}} expires {{date .NotAfter}}`,
	ChallengeFailed:     `[hallmark] challenge {{.Subject}} failed`,
	AccountCreated:      `[hallmark] account {{.Subject}} created`,
	AccountDeactivated:  `[hallmark] account {{.Subject}} deactivated`,
}

var funcs = template.FuncMap{
	"join": strings.Join,
	"first": func(names []string) string {
		if len(names) == 0 {
			return "(no names)"
		}
		return names[0]
	},
	"date": func(t interface{ Format(string) string }) string { return t.Format("2006-01-02 15:04 MST") },
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

// Templates are the body and subject template of every event.
type Templates struct {
	body, subject map[string]*template.Template
}

// LoadTemplates parses the built-in templates, replaced by those in dir
// ("" for none). A file in dir that names no event is an error: a typo
// would otherwise leave the default silently in place.
func LoadTemplates(dir string) (*Templates, error) {
	t := &Templates{body: map[string]*template.Template{}, subject: map[string]*template.Template{}}
	var errs []error
	for _, ev := range Events {
		errs = append(errs, parseInto(t.body, ev, defaultBodies[ev]), parseInto(t.subject, ev+".subject", defaultSubjects[ev]))
	}
	if dir == "" {
		return t, errors.Join(errs...)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("notify.template_dir: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".tmpl") {
			continue
		}
		base := strings.TrimSuffix(name, ".tmpl")
		ev, into := strings.TrimSuffix(base, ".subject"), t.body
		if ev != base {
			into = t.subject
		}
		if !Known(ev) {
			errs = append(errs, fmt.Errorf("notify.template_dir: %s names no event (events: %s)", name, strings.Join(Events, ", ")))
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, fmt.Errorf("notify.template_dir: %w", err))
			continue
		}
		errs = append(errs, parseInto(into, ev, string(text)))
	}
	return t, errors.Join(errs...)
}

func parseInto(into map[string]*template.Template, name, text string) error {
	tp, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return fmt.Errorf("notify: template %s: %w", name, err)
	}
	into[strings.TrimSuffix(name, ".subject")] = tp
	return nil
}

// Body renders m's event body.
func (t *Templates) Body(m Message) (string, error) { return render(t.body[m.Event], m) }

// Subject renders m's event subject, on one line.
func (t *Templates) Subject(m Message) (string, error) {
	s, err := render(t.subject[m.Event], m)
	return strings.Join(strings.Fields(s), " "), err
}

// Inline parses a destination's own template (its body).
func Inline(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
}

// Render runs tp on m.
func Render(tp *template.Template, m Message) (string, error) { return render(tp, m) }

func render(tp *template.Template, m Message) (string, error) {
	if tp == nil {
		return "", fmt.Errorf("notify: no template for event %q", m.Event)
	}
	var b bytes.Buffer
	if err := tp.Execute(&b, m); err != nil {
		return "", fmt.Errorf("notify: rendering %s: %w", tp.Name(), err)
	}
	return b.String(), nil
}
