package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/signer"
)

// mountAvailable mounts the backend of each profile this worker serves on
// its own: a profile whose key file or token is unavailable is left
// unmounted (and reported on /readyz), so its issuance jobs stay queued for
// a worker that has the key instead of failing here. The worker still
// validates and signs for the profiles it could mount.
func mountAvailable(cfg config.Config, ts *tokens, log *slog.Logger) (map[string]*signer.Issuer, map[string]error) {
	if cfg.Worker.Perspective != "" {
		// A perspective signs nothing: it holds no key (docs/operations.md).
		return map[string]*signer.Issuer{}, map[string]error{}
	}
	serves := servesProfile(cfg)
	names := make([]string, 0, len(cfg.Profiles))
	for name := range cfg.Profiles {
		if serves(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	mounted, unavailable := map[string]*signer.Issuer{}, map[string]error{}
	for _, name := range names {
		one := cfg
		one.Worker.Profiles = []string{name}
		got, err := mountIssuers(one, ts)
		if err != nil {
			log.Error("profile not mounted: its issuance jobs stay queued for a worker that has the key", "profile", name, "err", err)
			unavailable[name] = err
			continue
		}
		for n, iss := range got {
			mounted[n] = iss
		}
	}
	return mounted, unavailable
}

// readiness answers the worker's /readyz: the database, then each profile
// this worker serves, mounted or not. It is 503 while the database does not
// answer or a profile's backend is unavailable.
type readiness struct {
	mounts atomic.Pointer[mountState] // switched by a reload
	dbDown atomic.Bool
	ping   func(context.Context) error
}

// newReadiness is the worker's readiness, watching the database until ctx
// ends.
func newReadiness(ctx context.Context, ping func(context.Context) error, m *mountState, log *slog.Logger) *readiness {
	r := &readiness{ping: ping}
	r.mounts.Store(m)
	go r.watchDatabase(ctx, log, 2*time.Second)
	return r
}

// mountState is what mountAvailable mounted and could not.
type mountState struct {
	mounted     map[string]*signer.Issuer
	unavailable map[string]error
}

func (rd *readiness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	var b strings.Builder
	ok := true
	if err := rd.ping(ctx); err != nil {
		ok = false
		fmt.Fprintf(&b, "database: unreachable, not claiming jobs: %v\n", err)
	} else {
		b.WriteString("database: ok\n")
	}
	ms := rd.mounts.Load()
	var names []string
	for n := range ms.mounted {
		names = append(names, n)
	}
	for n := range ms.unavailable {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if iss, yes := ms.mounted[n]; yes {
			fmt.Fprintf(&b, "profile %s: mounted (issuer %s)\n", n, iss.ID)
		} else {
			ok = false
			fmt.Fprintf(&b, "profile %s: unavailable, its jobs are left for other workers: %v\n", n, ms.unavailable[n])
		}
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		rw.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = rw.Write([]byte(b.String()))
}

// watchDatabase pings the database every interval and logs when it is lost
// and when it returns: while it is lost the job runner cannot claim (or
// complete) anything, and the operator should hear so once, not per job.
func (rd *readiness) watchDatabase(ctx context.Context, log *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := rd.ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && !rd.dbDown.Swap(true):
			log.Error("database unreachable: this worker claims no jobs until it returns", "err", err)
		case err == nil && rd.dbDown.Swap(false):
			log.Info("database reachable again: claiming jobs")
		}
	}
}

// servesProfile says which profiles this worker serves: worker.profiles,
// or every profile when it names none.
func servesProfile(cfg config.Config) func(name string) bool {
	want := map[string]bool{}
	for _, p := range cfg.Worker.Profiles {
		want[p] = true
	}
	return func(name string) bool { return len(want) == 0 || want[name] }
}
