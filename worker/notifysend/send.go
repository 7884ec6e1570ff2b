// Package notifysend delivers notify_send jobs to the destinations of
// [notify]: webhooks, email over SMTP with STARTTLS, and local programs.
// Each delivery either succeeds, fails for good (the job is cancelled),
// or could not happen and is retried with backoff (jobs.CouldNotRun).
package notifysend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"text/template"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/jobs/notify"
)

// Sender delivers events to the configured destinations.
type Sender struct {
	templates *notify.Templates
	dests     map[string]destination
	log       *slog.Logger
}

// destination is one configured destination, ready to send.
type destination interface {
	send(ctx context.Context, m notify.Message) error
}

// New builds the destinations of c, reading their template directory,
// passwords and CA bundles now, so a broken file stops the worker at
// start rather than failing every delivery.
func New(c notify.Config, log *slog.Logger) (*Sender, error) {
	if log == nil {
		log = slog.Default()
	}
	tp, err := notify.LoadTemplates(c.TemplateDir)
	if err != nil {
		return nil, err
	}
	s := &Sender{templates: tp, dests: map[string]destination{}, log: log}
	for i, d := range c.Destinations {
		key := fmt.Sprintf("notify.destinations[%d]", i)
		var dest destination
		switch d.Kind {
		case notify.KindWebhook:
			dest, err = newWebhook(d, key)
		case notify.KindEmail:
			dest, err = newEmail(d, key, tp)
		case notify.KindProgram:
			dest = program{d: d}
		default:
			err = fmt.Errorf("%s.kind: %q is not webhook, email or program", key, d.Kind)
		}
		if err != nil {
			return nil, err
		}
		s.dests[d.Name] = dest
	}
	return s, nil
}

// Handle is the notify_send handler.
func (s *Sender) Handle(ctx context.Context, job jobs.Job[jobs.NotifySendArgs]) error {
	a := job.Args
	dest, ok := s.dests[a.Destination]
	if !ok {
		return fmt.Errorf("notify_send %s for destination %q: no such destination in [notify] any more; the event is dropped", a.Event, a.Destination)
	}
	m := notify.Message{Event: a.Event, Destination: a.Destination, Key: a.Event + "/" + a.Key, Subject: a.Subject,
		Account: a.Account, Actor: a.Actor, Detail: a.Detail, Names: a.Names, NotAfter: a.NotAfter, At: a.At}
	text, err := s.templates.Body(m)
	if err != nil {
		return err // a template that fails on this event fails on every retry
	}
	m.Text = text
	start := time.Now()
	err = dest.send(ctx, m)
	var p *permanent
	switch {
	case err == nil:
		s.log.InfoContext(ctx, "notification delivered", "event", a.Event, "destination", a.Destination,
			"key", m.Key, "attempt", job.Attempt, "ms", time.Since(start).Milliseconds())
		return nil
	case errors.As(err, &p):
		return fmt.Errorf("notifying %s of %s %s: %w", a.Destination, a.Event, a.Key, err)
	default:
		s.log.WarnContext(ctx, "notification not delivered; it will be retried", "event", a.Event,
			"destination", a.Destination, "key", m.Key, "attempt", job.Attempt, "of", job.MaxAttempts, "err", err)
		return jobs.CouldNotRun(fmt.Errorf("notifying %s of %s %s: %w", a.Destination, a.Event, a.Key, err))
	}
}

// permanent marks a failure that a retry would repeat: the receiver
// refused the message itself.
type permanent struct{ err error }

func (p *permanent) Error() string { return "refused, not retrying: " + p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

func refused(format string, args ...any) error { return &permanent{err: fmt.Errorf(format, args...)} }

// render runs an optional per-destination template, or returns def.
func render(tp *template.Template, m notify.Message, def func() (string, error)) (string, error) {
	if tp == nil {
		return def()
	}
	return notify.Render(tp, m)
}
