package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// verifyOK fails t unless both chains verify; it returns the report.
func verifyOK(t *testing.T, s store.Store) store.AuditReport {
	t.Helper()
	rep, err := store.VerifyAudit(ctxT(t), s)
	if err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	if rep.Break != nil {
		t.Fatalf("VerifyAudit found a break in an untouched log: %v", rep.Break)
	}
	return rep
}

// testAuditChain: every row joins its chain as it is inserted, by any
// statement; verify passes, then finds a row altered in SQL, a row
// deleted, and the newest row deleted.
func testAuditChain(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	for i, ev := range []store.AuditEvent{
		{Actor: "cli:alice", Action: "revoke", Subject: "01", Detail: "line\nbreak|and 12:colon"},
		trailEvent(store.ActionAccountCreated, "acct", "r1"),
		{Actor: "admin:bob", Action: "account.deactivate", Subject: "acct", Detail: "ünïcode ✓"},
		trailEvent(store.ActionCertificateIssued, "02", "r2"),
		{Actor: "cli:alice", Action: "job.retry", Subject: "7"},
	} {
		if err := s.AuditRecord(ctx, ev); err != nil {
			t.Fatalf("recording event %d: %v", i, err)
		}
	}
	rep := verifyOK(t, s)
	if rep.Rows != 5 || rep.Operators.Seq != 3 || rep.Trail.Seq != 2 || rep.Unchained != 0 {
		t.Fatalf("report = %+v, want 5 rows: 3 operators', 2 trail", rep)
	}
	evs, _, err := s.AuditFind(ctx, store.AuditFilter{}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Seq == 0 || len(ev.Hash) != 64 || store.AuditHash(ev) != ev.Hash {
			t.Fatalf("event %d is not chained as Go computes it: %+v", ev.ID, ev)
		}
	}
	victim := evs[2] // the deactivation, in the middle of the operators' chain

	x.Exec(t, fmt.Sprintf(`UPDATE audit_events SET detail = 'nothing happened' WHERE id = %d`, victim.ID))
	wantBreak(t, s, false, victim.Seq, victim.ID, "altered")
	x.Exec(t, fmt.Sprintf(`UPDATE audit_events SET detail = '%s' WHERE id = %d`, victim.Detail, victim.ID))
	verifyOK(t, s)

	x.Exec(t, fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, victim.ID))
	wantBreak(t, s, false, victim.Seq, 0, "missing")

	newest := evs[0]
	fresh := x.Open(t, nil)
	x.Exec(t, fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, newest.ID))
	if rep, err := store.VerifyAudit(ctx, fresh); err != nil || rep.Break == nil {
		t.Fatalf("VerifyAudit after deleting rows = %+v, %v; want a break", rep, err)
	}
}

func wantBreak(t *testing.T, s store.Store, trail bool, seq, id int64, why string) {
	t.Helper()
	rep, err := store.VerifyAudit(ctxT(t), s)
	if err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	b := rep.Break
	if b == nil || b.Trail != trail || b.Seq != seq || b.ID != id || !strings.Contains(b.Error(), why) {
		t.Fatalf("VerifyAudit break = %v, want seq %d (event %d) %s", b, seq, id, why)
	}
}

// testAuditChainPrune: pruning the trail deletes a prefix of its chain and
// moves its base, so what is kept still verifies; a younger row keeps every
// row after it, however old.
func testAuditChainPrune(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	old := dbNow(t, s).Add(-48 * time.Hour)
	for i, ev := range []store.AuditEvent{
		withAt(trailEvent(store.ActionCertificateIssued, "old1", "r1"), old),
		{Actor: "cli:alice", Action: "revoke", Subject: "op", At: old},
		withAt(trailEvent(store.ActionCertificateIssued, "old2", "r2"), old),
		trailEvent(store.ActionCertificateIssued, "new", "r3"),
		withAt(trailEvent(store.ActionCertificateIssued, "old-after-new", "r4"), old),
	} {
		if err := s.AuditRecord(ctx, ev); err != nil {
			t.Fatalf("recording event %d: %v", i, err)
		}
	}
	if n, err := s.AuditPrune(ctx, old.Add(time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("AuditPrune = %d, %v; want the 2 old rows before the new one", n, err)
	}
	rep := verifyOK(t, s)
	if rep.Trail.BaseSeq != 2 || rep.Rows != 4 {
		t.Fatalf("after pruning: %+v, want the trail's base at 2 and 4 rows: 3 kept and the pruning's record", rep)
	}
	if err := s.AuditRecord(ctx, trailEvent(store.ActionCertificateIssued, "later", "r5")); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, s)

	// Someone deletes the trail's first row and moves its base past it, as
	// a pruning would, but without the pruning's record: verify says so.
	first := x.Int(t, `SELECT id FROM audit_events WHERE trail ORDER BY seq LIMIT 1`)
	x.Exec(t, fmt.Sprintf(`UPDATE audit_chain SET base_seq = 3, base_hash = (SELECT hash FROM audit_events WHERE id = %d) WHERE trail`, first))
	x.Exec(t, fmt.Sprintf(`DELETE FROM audit_events WHERE id = %d`, first))
	wantBreak(t, s, true, 3, 0, "last recorded pruning")
}

// testAuditChainConcurrent: appends from several handles at once (several
// frontends and workers) form one unbroken chain each, and verify passes
// while they run.
func testAuditChainConcurrent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	const handles, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, handles*each)
	stop := make(chan struct{})
	for h := range handles {
		st := x.Open(t, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ev := store.AuditEvent{Actor: fmt.Sprintf("cli:h%d", h), Action: "revoke", Subject: fmt.Sprint(i)}
				if i%2 == 1 {
					ev = trailEvent(store.ActionCertificateIssued, fmt.Sprint(i), fmt.Sprintf("r%d-%d", h, i))
				}
				if err := st.AuditRecord(ctx, ev); err != nil {
					errs <- err
				}
			}
		}()
	}
	verifying := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				verifying <- nil
				return
			default:
			}
			rep, err := store.VerifyAudit(ctx, s)
			if err == nil && rep.Break != nil {
				err = rep.Break
			}
			if err != nil {
				verifying <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatalf("appending: %v", err)
	}
	if err := <-verifying; err != nil {
		t.Fatalf("VerifyAudit while appending: %v", err)
	}
	if rep := verifyOK(t, s); rep.Rows != handles*each {
		t.Fatalf("rows verified = %d, want %d", rep.Rows, handles*each)
	}
}

// testAuditedActions: an operator's action and its audit row commit
// together: one that fails or changes nothing leaves no row.
func testAuditedActions(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	count := func(action string) int64 {
		return x.Int(t, "SELECT count(*) FROM audit_events WHERE action = '"+action+"'")
	}
	a := newAccount(t, s)
	ev := store.AuditEvent{Actor: "admin:carol", Action: "account.deactivate", Subject: a.ID}
	if d, err := s.AccountDeactivateAudited(ctx, a.ID, ev); err != nil || d.Status != acme.StatusDeactivated {
		t.Fatalf("AccountDeactivateAudited = %+v, %v", d, err)
	}
	if _, err := s.AccountDeactivateAudited(ctx, a.ID, ev); err != nil {
		t.Fatal(err)
	}
	if n := count("account.deactivate"); n != 1 {
		t.Fatalf("deactivation rows = %d, want 1 (a second deactivation changes nothing)", n)
	}

	// A processing order abandoned, then the action fails after it: the
	// abandon rolls back with the audit row.
	b := newAccount(t, s)
	o := readyOrder(t, s, b, "audited.example.com")
	if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
		t.Fatalf("OrderFinalizeBegin = %v, %v", claimed, err)
	}
	sub := jobs.Subject{Kind: jobs.KindSignerIssue, ID: o.ID}
	injected := errors.New("injected failure after the abandon")
	err := s.JobAudited(ctx, func(ctx context.Context, tx store.JobTx) (store.AuditEvent, error) {
		if failed, err := tx.Abandon(ctx, sub, acme.Problem{Detail: "abandoned"}); err != nil || !failed {
			return store.AuditEvent{}, fmt.Errorf("abandon = %v, %v", failed, err)
		}
		return store.AuditEvent{}, injected
	})
	if !errors.Is(err, injected) {
		t.Fatalf("JobAudited = %v, want the injected failure", err)
	}
	if got, err := s.OrderByID(ctx, o.ID); err != nil || got.Status != acme.StatusProcessing {
		t.Fatalf("after a failed action the order is %+v, %v; want processing still", got, err)
	}
	if n := count("job.abandon"); n != 0 {
		t.Fatalf("a failed action left %d audit rows", n)
	}
	err = s.JobAudited(ctx, func(ctx context.Context, tx store.JobTx) (store.AuditEvent, error) {
		_, err := tx.Abandon(ctx, sub, acme.Problem{Detail: "abandoned"})
		return store.AuditEvent{Actor: "admin:carol", Action: "job.abandon", Subject: "1"}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.OrderByID(ctx, o.ID); got.Status != acme.StatusInvalid || count("job.abandon") != 1 {
		t.Fatalf("after the action the order is %s with %d rows; want invalid and 1", got.Status, count("job.abandon"))
	}
	verifyOK(t, s)
}
