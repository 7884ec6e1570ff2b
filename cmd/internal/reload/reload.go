// Package reload is how a frontend or a worker reloads its configuration
// without a restart: on SIGHUP, and when `hallmark reload` records a
// request in the database, which every process on every host polls for.
// Each attempt reads the whole file again through cmd/config, is applied
// whole or not at all by the process's Apply, and is logged and audited
// with its outcome (docs/operations.md, "Reloading the configuration").
package reload

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/store"
)

// DefaultEvery is how often a process polls for `hallmark reload`'s
// requests: one read of a partial index (store.ReloadRequested).
const DefaultEvery = 2 * time.Second

// Store is what a watcher reads and writes.
type Store interface {
	store.Reloads
	AuditRecord(ctx context.Context, ev store.AuditEvent) error
}

// Watcher reloads one process's configuration when asked.
type Watcher struct {
	// Actor names the process in the audit log ("frontend:<host>-<pid>",
	// "worker:<worker.id>").
	Actor string
	Store Store
	Log   *slog.Logger
	// Apply reads, checks and builds the whole new configuration and
	// switches to it, or changes nothing and says why. A *Restart error
	// names the keys that only a restart applies.
	Apply func(ctx context.Context) error
	// Hangups are the process's SIGHUPs (process.Hangups, taken as the
	// process starts: until then a SIGHUP would end it).
	Hangups <-chan struct{}
	// Every is the poll interval; DefaultEvery when zero.
	Every time.Duration
}

// Restart is a refusal because keys changed that the process cannot
// switch while it runs.
type Restart struct{ Keys []string }

func (r *Restart) Error() string {
	return "a restart is needed to apply " + strings.Join(r.Keys, ", ") + "; nothing was applied (restore those keys to reload the rest)"
}

// RequestSubject is the audit subject of the outcome of `hallmark
// reload`'s request id; a SIGHUP's is "sighup".
func RequestSubject(id int64) string { return "request:" + strconv.FormatInt(id, 10) }

// Run watches until ctx ends: a SIGHUP, or a request newer than the one
// current when Run started, makes one attempt. Attempts never overlap.
func (w *Watcher) Run(ctx context.Context) {
	every := w.Every
	if every <= 0 {
		every = DefaultEvery
	}
	seen := w.latest(ctx, -1)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Hangups:
			w.Attempt(ctx, "sighup")
		case <-t.C:
			id := w.latest(ctx, seen)
			if seen >= 0 && id > seen {
				w.Attempt(ctx, RequestSubject(id))
			}
			seen = id
		}
	}
}

// latest is the newest request's id, or seen when it cannot be read (the
// next poll tries again; a process down for a while still reloads once).
func (w *Watcher) latest(ctx context.Context, seen int64) int64 {
	id, err := w.Store.ReloadRequested(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.Log.Debug("could not read reload requests", "err", err)
		}
		return seen
	}
	return id
}

// Attempt reloads once, for trigger, and logs and audits the outcome.
func (w *Watcher) Attempt(ctx context.Context, trigger string) error {
	w.Log.Info("reloading the configuration", "trigger", trigger)
	err := w.Apply(ctx)
	detail := "applied"
	var rs *Restart
	switch {
	case errors.As(err, &rs):
		detail = "refused: restart needed: " + strings.Join(rs.Keys, ", ")
		w.Log.Error("configuration not reloaded: a restart is needed", "trigger", trigger, "keys", strings.Join(rs.Keys, ","), "err", err)
	case err != nil:
		detail = "refused: " + err.Error()
		w.Log.Error("configuration not reloaded: the old one keeps serving", "trigger", trigger, "err", err)
	default:
		w.Log.Info("configuration reloaded", "trigger", trigger)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ev := store.AuditEvent{Actor: w.Actor, Action: store.ActionReload, Subject: trigger, Detail: detail}
	if aerr := w.Store.AuditRecord(actx, ev); aerr != nil {
		w.Log.Error("could not audit the reload", "trigger", trigger, "outcome", detail, "err", aerr)
	}
	return err
}
