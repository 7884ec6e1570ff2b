package reload

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// TestChanged names the keys only a restart applies, and no others.
func TestChanged(t *testing.T) {
	base := config.Default()
	longer := profile.Default()
	longer.ValidityHours = 200
	cases := []struct {
		name  string
		edit  func(*config.Config)
		front []string
		work  []string
	}{
		{"a profile's validity", func(c *config.Config) { c.Profiles = map[string]profile.Profile{"default": longer} }, nil, nil},
		{"a rate limit", func(c *config.Config) { c.Limits.OrdersPerAccount = 5 }, nil, nil},
		{"the listener", func(c *config.Config) { c.Server.Listen = "127.0.0.1:1" }, []string{"server.listen"}, nil},
		{"a profile added", func(c *config.Config) {
			c.Profiles = map[string]profile.Profile{"default": profile.Default(), "short": longer}
		}, nil, nil},
		{"the database", func(c *config.Config) { c.Database.URL = "sqlite:other.db" }, []string{"database"}, []string{"database"}},
		{"worker concurrency", func(c *config.Config) { c.Worker.Concurrency++ }, nil, []string{"worker"}},
		{"TLS turned on", func(c *config.Config) { c.Server.TLSCert = "tls.pem" }, []string{"server.tls_cert (TLS turned on or off)"}, nil},
	}
	for _, c := range cases {
		next := config.Default()
		c.edit(&next)
		if got := Changed(FrontendKeys, base, next); !slices.Equal(got, c.front) {
			t.Errorf("%s: the frontend needs a restart for %q, want %q", c.name, got, c.front)
		}
		if got := Changed(WorkerKeys, base, next); !slices.Equal(got, c.work) {
			t.Errorf("%s: the worker needs a restart for %q, want %q", c.name, got, c.work)
		}
	}
}

// TestWatcherHearsRequests: a request recorded in the store after the
// watcher started makes one attempt, a request recorded before makes
// none, and each attempt's outcome is audited under the request.
func TestWatcherHearsRequests(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	request := func() {
		if err := db.Store.AuditRecord(ctx, store.AuditEvent{Actor: "cli:test", Action: store.ActionReloadRequested}); err != nil {
			t.Fatal(err)
		}
	}
	request() // before the watcher: not its to answer
	var attempts atomic.Int32
	w := &Watcher{Actor: "worker:test", Store: db.Store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Every: 20 * time.Millisecond,
		Apply: func(context.Context) error {
			if attempts.Add(1) == 1 {
				return &Restart{Keys: []string{"server.listen"}}
			}
			return errors.New("profiles.x: no such key file")
		}}
	go w.Run(ctx)
	time.Sleep(100 * time.Millisecond)
	if n := attempts.Load(); n != 0 {
		t.Fatalf("%d attempts for a request older than the watcher", n)
	}
	for want := int32(1); want <= 2; want++ {
		request()
		deadline := time.Now().Add(5 * time.Second)
		for attempts.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("no attempt after request %d", want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	evs, _, err := db.Store.AuditFind(ctx, store.AuditFilter{Action: store.ActionReload}, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || attempts.Load() != 2 {
		t.Fatalf("%d attempts, audited %+v; want 2", attempts.Load(), evs)
	}
	// Newest first.
	if !strings.HasPrefix(evs[0].Subject, "request:") || evs[0].Detail != "refused: profiles.x: no such key file" ||
		evs[1].Detail != "refused: restart needed: server.listen" || evs[0].Actor != "worker:test" {
		t.Fatalf("audited outcomes %+v", evs)
	}
}
