package worker

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// accountSlots caps how many of this worker's validation slots one
// account's validations hold at once (worker.validation_account_share), so
// one account whose targets never answer cannot make every other client's
// validation wait out challenge.timeout_ms. A validation over its account's
// cap is snoozed: River puts its job back behind the jobs queued meanwhile,
// the snooze uses none of its attempts, and it runs once a slot of its
// account frees. The count is this process's: with several workers an
// account holds at most the share of each, so of them all.
//
// An account's snoozed validations come back one after another at about
// the rate its slots free here (its share over how long its validations
// take, Little's law), not all at once: each snooze is a database write,
// and 200 validations of silent targets brought back together held up the
// others' on SQLite (TestBlackHoleAccountHoldsNoOneUp).
type accountSlots struct {
	mu       sync.Mutex
	accounts map[string]*accountUse
	max      int
	swept    time.Time
	deferred prometheus.Counter
}

// accountUse is one account's use of this worker's validation slots.
type accountUse struct {
	running []time.Time   // when each of its validations here started
	mean    time.Duration // of its finished validations here (moving average); 0 before the first
	next    time.Time     // when its last snoozed validation comes back
}

const (
	// minSnooze is the shortest snooze: a validation put back never comes
	// round again sooner.
	minSnooze = 25 * time.Millisecond
	// minTook is what an account's validations are taken to last before
	// one has finished: a lookup, a connection and a request over the
	// Internet take some hundreds of milliseconds.
	minTook = 250 * time.Millisecond
	// sweepEvery is how often accounts that hold nothing and wait for
	// nothing are forgotten.
	sweepEvery = time.Minute
)

func newAccountSlots(share float64, slots int) *accountSlots {
	return &accountSlots{
		accounts: map[string]*accountUse{},
		max:      max(1, int(math.Floor(share*float64(slots)+1e-9))),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hallmark_worker_validations_deferred_total",
			Help: "Validations put back because their account held its share of this worker's validation slots (worker.validation_account_share).",
		}),
	}
}

// take holds one of account's slots from now, or says how long its
// validation should wait when the account holds its share.
func (a *accountSlots) take(account string, now time.Time) (wait time.Duration, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep(now)
	u := a.accounts[account]
	if u == nil {
		u = &accountUse{}
		a.accounts[account] = u
	}
	if len(u.running) < a.max {
		u.running = append(u.running, now)
		return 0, true
	}
	// A slot frees every took/max on average. Before any finished, the
	// oldest running has taken at least its age, and at least minTook: an
	// estimate of nearly nothing would bring every snoozed validation of a
	// burst back at once.
	took := u.mean
	if took == 0 {
		took = max(now.Sub(u.running[0]), minTook)
	}
	u.next = maxTime(now.Add(minSnooze), u.next.Add(took/time.Duration(a.max)))
	a.deferred.Inc()
	return u.next.Sub(now), false
}

// give frees the slot take held from started.
func (a *accountSlots) give(account string, started, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.accounts[account]
	if u == nil {
		return
	}
	for i, s := range u.running {
		if s.Equal(started) {
			u.running = append(u.running[:i], u.running[i+1:]...)
			break
		}
	}
	took := now.Sub(started)
	if u.mean == 0 {
		u.mean = took
	} else {
		u.mean += (took - u.mean) / 4
	}
}

// sweep forgets, every sweepEvery, the accounts that hold no slot and
// have no validation due back.
func (a *accountSlots) sweep(now time.Time) {
	if now.Sub(a.swept) < sweepEvery {
		return
	}
	a.swept = now
	for id, u := range a.accounts {
		if len(u.running) == 0 && u.next.Before(now) {
			delete(a.accounts, id)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
