package storetest

import (
	"testing"

	"github.com/hallmark-ca/hallmark/store"
)

// testReloadRequested: the newest config.reload_requested event's id,
// which grows with each request and with nothing else.
func testReloadRequested(t *testing.T, s store.Store, _ Extras) {
	ctx := t.Context()
	before, err := s.ReloadRequested(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AuditRecord(ctx, store.AuditEvent{Actor: "cli:test", Action: store.ActionReload, Subject: "sighup", Detail: "applied"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReloadRequested(ctx); err != nil || got != before {
		t.Fatalf("after another action: %d, %v; want %d", got, err, before)
	}
	for range 2 {
		if err := s.AuditRecord(ctx, store.AuditEvent{Actor: "cli:test", Action: store.ActionReloadRequested}); err != nil {
			t.Fatal(err)
		}
		evs, _, err := s.AuditFind(ctx, store.AuditFilter{Action: store.ActionReloadRequested}, store.Page{Limit: 1})
		if err != nil || len(evs) != 1 {
			t.Fatalf("finding the request: %v, %v", evs, err)
		}
		got, err := s.ReloadRequested(ctx)
		if err != nil || got != evs[0].ID || got <= before {
			t.Fatalf("after a request: %d, %v; want its id %d, above %d", got, err, evs[0].ID, before)
		}
		before = got
	}
}
