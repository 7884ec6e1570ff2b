package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

func testChallengeClaimConcurrent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := newOrder(t, s, a, "race.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	wins := race(t, handles(t, s, x, 4), func(s store.Store) (bool, error) {
		c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, cid)
		if err == nil && c.Status != acme.StatusProcessing {
			return claimed, fmt.Errorf("claim returned a %s challenge", c.Status)
		}
		return claimed, err
	})
	if wins != 1 {
		t.Fatalf("%d of 16 concurrent claims won, want exactly 1", wins)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 1 {
		t.Fatalf("%d challenge_validate jobs after 16 claims, want 1", n)
	}
}

func testOrderFinalizeConcurrent(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	o := readyOrder(t, s, a, "finalize-race.example.com")
	wins := race(t, handles(t, s, x, 4), func(s store.Store) (bool, error) {
		_, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil)
		return claimed, err
	})
	if wins != 1 {
		t.Fatalf("%d of 16 concurrent finalizations won, want exactly 1", wins)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 1 {
		t.Fatalf("%d signer_issue jobs after 16 finalizations, want 1", n)
	}
}

// testClaimEnqueueAtomic: a claim whose job cannot be queued is released,
// so the client's retry can claim again.
func testClaimEnqueueAtomic(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	broken := x.Open(t, failingInserter{})
	a := newAccount(t, s)
	o := newOrder(t, s, a, "queue-down.example.com")
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if _, _, err := broken.ChallengeClaim(ctx, store.SignedUse{}, cid); !errors.Is(err, errQueueDown) {
		t.Fatalf("ChallengeClaim with a failing queue: %v, want %v", err, errQueueDown)
	}
	if st := challenge(t, s, cid).Status; st != acme.StatusPending {
		t.Fatalf("challenge is %s after its job failed to queue, want pending", st)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 0 {
		t.Fatalf("%d challenge_validate jobs, want 0", n)
	}
	if _, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, cid); err != nil || !claimed {
		t.Fatalf("retrying the claim: claimed=%v err=%v", claimed, err)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 1 {
		t.Fatalf("%d challenge_validate jobs after the claim, want 1", n)
	}

	// A queue that sends nothing of its own: the swap goes out alone.
	silent := x.Open(t, silentInserter{})
	quiet := newOrder(t, s, a, "queue-silent.example.com")
	qid := authz(t, s, quiet.AuthzIDs[0]).Challenges[0].ID
	if c, claimed, err := silent.ChallengeClaim(ctx, store.SignedUse{}, qid); err != nil || !claimed || c.Status != acme.StatusProcessing {
		t.Fatalf("ChallengeClaim with a queue that sends nothing: %+v claimed=%v err=%v", c, claimed, err)
	}
	if st := challenge(t, s, qid).Status; st != acme.StatusProcessing {
		t.Fatalf("challenge is %s after a claim whose queue sent nothing, want processing", st)
	}

	ready := readyOrder(t, s, a, "finalize-queue-down.example.com")
	if _, _, err := broken.OrderFinalizeBegin(ctx, store.SignedUse{}, ready.ID, ready.Profile, []byte("csr"), nil); !errors.Is(err, errQueueDown) {
		t.Fatalf("OrderFinalizeBegin with a failing queue: %v, want %v", err, errQueueDown)
	}
	if got := order(t, s, ready.ID); got.Status != acme.StatusReady || got.CSR != nil {
		t.Fatalf("order is %s (csr %q) after its job failed to queue, want ready with no CSR", got.Status, got.CSR)
	}
	if n := jobCount(t, x, jobs.KindSignerIssue); n != 0 {
		t.Fatalf("%d signer_issue jobs, want 0", n)
	}
}

// testClaimsAtOnce: many requests of one process claiming different
// challenges and finalizing different orders at once (on SQLite they share
// commits: store/sqlite/group.go) each get their claim and their one job,
// with nothing of one counted for another.
func testClaimsAtOnce(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	const n = 16
	var cids, ready []string
	for i := range n {
		o := newOrder(t, s, a, fmt.Sprintf("at-once-%d.example.com", i))
		cids = append(cids, authz(t, s, o.AuthzIDs[0]).Challenges[0].ID)
		ready = append(ready, readyOrder(t, s, a, fmt.Sprintf("at-once-ready-%d.example.com", i)).ID)
	}
	validateBefore, issueBefore := jobCount(t, x, jobs.KindChallengeValidate), jobCount(t, x, jobs.KindSignerIssue)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, cids[i]); err != nil || !claimed || c.Status != acme.StatusProcessing {
				t.Errorf("ChallengeClaim %d: %+v claimed=%v err=%v", i, c, claimed, err)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if _, began, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, ready[i], "default", []byte(fmt.Sprintf("csr %d", i)), nil); err != nil || !began {
				t.Errorf("OrderFinalizeBegin %d: began=%v err=%v", i, began, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if st := challenge(t, s, cids[i]).Status; st != acme.StatusProcessing {
			t.Errorf("challenge %d is %s, want processing", i, st)
		}
		if o := order(t, s, ready[i]); o.Status != acme.StatusProcessing || string(o.CSR) != fmt.Sprintf("csr %d", i) {
			t.Errorf("order %d is %s with CSR %q, want processing with its own", i, o.Status, o.CSR)
		}
	}
	if got := jobCount(t, x, jobs.KindChallengeValidate) - validateBefore; got != n {
		t.Errorf("%d challenge_validate jobs for %d claims", got, n)
	}
	if got := jobCount(t, x, jobs.KindSignerIssue) - issueBefore; got != n {
		t.Errorf("%d signer_issue jobs for %d finalizations", got, n)
	}
}

// testClaimExpiredAuthz: a claim that loses its compare-and-swap queues
// nothing, although the job's insert may travel with the swap (sendAhead).
func testClaimExpiredAuthz(t *testing.T, s store.Store, x Extras) {
	ctx := ctxT(t)
	a := newAccount(t, s)
	spec := orderSpec(t, s, a, "late.example.com")
	spec.Authzs[0].Expires = dbNow(t, s).Add(-time.Second)
	o, err := s.OrderCreate(ctx, store.SignedUse{}, spec)
	if err != nil {
		t.Fatal(err)
	}
	cid := authz(t, s, o.AuthzIDs[0]).Challenges[0].ID
	if c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, cid); err != nil || claimed || c.Status != acme.StatusPending {
		t.Fatalf("claiming a challenge of an expired authorization: %+v claimed=%v err=%v, want not claimed", c, claimed, err)
	}
	if n := jobCount(t, x, jobs.KindChallengeValidate); n != 0 {
		t.Fatalf("%d challenge_validate jobs after a lost claim, want 0", n)
	}
}
