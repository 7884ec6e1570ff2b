package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/reload"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/worker"
	"github.com/hallmark-ca/hallmark/worker/notifysend"
)

// live is what a reload switches in the worker: the configuration (its
// [notify] routes the store's events), the Worker the jobs run on
// (profiles, backends, validation, CRL settings, notification senders),
// and what /readyz reports mounted. A job keeps the Worker it started
// with; the tokens of a replaced Worker close once its jobs have ended.
type live struct {
	path   string
	log    *slog.Logger
	st     store.Store
	cfg    atomic.Pointer[config.Config]
	jobs   *worker.Live
	ready  *readiness
	tokens *tokens // the current Worker's
}

// route is [notify]'s routes as of now, for the store's events.
func (l *live) route(event string) []string { return l.cfg.Load().Notify.Route(event) }

// workerConfig is the worker's part of cfg.
func workerConfig(cfg config.Config) worker.Config {
	return worker.Config{Worker: cfg.Worker, Challenge: cfg.Challenge, Audit: cfg.Audit, CA: cfg.CA, Profiles: cfg.Profiles,
		BaseURL: cfg.Server.BaseURL, CAAIdentities: cfg.Server.CAAIdentities, DenyIPRanges: cfg.Policy.DenyIPRanges,
		Listeners: cfg.Listeners()}
}

// apply reads the file again and checks it whole (cmd/config, as at
// start), mounts every backend again (a profile mounted now must mount
// again: its key file, its token, its relay or hook), builds the
// notification senders and the next Worker, and only then swaps it in.
// On any error what it opened is closed and nothing changed.
func (l *live) apply(ctx context.Context) (err error) {
	next, err := config.LoadWorker(l.path)
	if err != nil {
		return err
	}
	if err := reload.Check(reload.WorkerKeys, *l.cfg.Load(), next); err != nil {
		return err
	}
	next = retain(*l.cfg.Load(), next, l.log)
	ts := newTokens()
	defer func() {
		if err != nil {
			ts.close(l.log)
		}
	}()
	// Quiet: a profile that does not mount refuses the reload, and the
	// refusal names it.
	issuers, unavailable := mountAvailable(next, ts, slog.New(slog.DiscardHandler))
	if err := stillMounted(l.ready.mounts.Load(), unavailable); err != nil {
		return err
	}
	for name, err := range unavailable {
		if _, was := l.ready.mounts.Load().unavailable[name]; !was {
			l.log.Error("profile added but not mounted: its issuance jobs stay queued for a worker that has the key", "profile", name, "err", err)
		}
	}
	backends, err := mountBackends(next, l.log, l.st)
	if err != nil {
		return err
	}
	sender, err := notifysend.New(next.Notify, l.log)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	w, err := l.jobs.Current().Successor(workerConfig(next), l.st, worker.Options{Logger: l.log, Issuers: issuers,
		Backends: backends, Notify: sender.Handle, ExpiryDays: next.Notify.ExpiryDays})
	if err != nil {
		return err
	}
	drained, err := l.jobs.Swap(w)
	if err != nil {
		return err
	}
	old := l.tokens
	l.tokens = ts
	l.cfg.Store(&next)
	l.ready.mounts.Store(&mountState{mounted: issuers, unavailable: unavailable})
	go func() {
		<-drained
		old.close(l.log)
	}()
	l.publish(ctx, issuers)
	return nil
}

// retain is next with each profile of old that next no longer has (and
// the [backends.<name>] it names, when next lacks it): removed from the
// file, it is kept mounted until the worker restarts, so that the orders
// already queued for it are still signed and its issuer's CRLs still
// made. The frontend stops offering it at once.
func retain(old, next config.Config, log *slog.Logger) config.Config {
	for name, p := range old.Profiles {
		if _, ok := next.Profiles[name]; ok {
			continue
		}
		next.Profiles = maps.Clone(next.Profiles)
		next.Profiles[name] = p
		if b, had := old.Backends[p.Signer]; had && p.Signer != "" {
			if _, has := next.Backends[p.Signer]; !has {
				next.Backends = maps.Clone(next.Backends)
				if next.Backends == nil {
					next.Backends = map[string]config.Backend{}
				}
				next.Backends[p.Signer] = b
			}
		}
		log.Info("profile removed from the configuration: still signing its queued orders and its CRLs until the worker restarts", "profile", name)
	}
	return next
}

// stillMounted refuses a reload under which a profile mounted now would
// not mount: its key file or token is missing or wrong.
func stillMounted(now *mountState, unavailable map[string]error) error {
	var lost []string
	for name, err := range unavailable {
		if _, was := now.mounted[name]; was {
			lost = append(lost, fmt.Sprintf("profiles.%s: %v", name, err))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	sort.Strings(lost)
	return fmt.Errorf("%s", strings.Join(lost, "; "))
}

// publish stores the mounted issuers' certificates again, for the
// frontend's AIA URL: a reload may have replaced one's certificate (its
// key, which names it, is the same, or the queues would have changed).
func (l *live) publish(ctx context.Context, issuers map[string]*signer.Issuer) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, iss := range issuers {
		if err := l.st.IssuerPublish(pctx, iss.ID, iss.Cert.Raw); err != nil {
			l.log.Warn("publishing an issuer certificate after a reload", "issuer", iss.ID, "err", err)
		}
	}
}

// actorFor names this worker in the audit log.
func actorFor(cfg config.Config) string { return "worker:" + cfg.Worker.ID }
