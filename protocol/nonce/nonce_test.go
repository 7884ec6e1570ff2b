package nonce

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
)

// memStore is an in-memory implementation of this package's two-method
// Store, for testing the nonce logic alone; TestRealStore runs the same
// flow against the real SQLite store.
type memStore struct {
	mu       sync.Mutex
	key      []byte
	consumed map[string]time.Time
	epoch    int64         // 0 until NonceEpoch starts one, as after a crash
	epochs   int64         // epochs started so far
	fail     error         // returned by NonceConsume when set
	calls    int           // NonceConsume calls that answered
	delay    time.Duration // how long each NonceConsume takes, like a round trip
}

func newMemStore() *memStore {
	return &memStore{key: []byte("0123456789abcdef0123456789abcdef"), consumed: map[string]time.Time{}}
}

func (m *memStore) NonceKey(context.Context) ([]byte, error) { return m.key, nil }

func (m *memStore) NonceEpoch(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.epoch == 0 {
		m.epochs++
		m.epoch = 1000 + m.epochs
	}
	return m.epoch, nil
}

// crash does what a PostgreSQL crash does to the unlogged nonce tables.
func (m *memStore) crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.consumed, m.epoch = map[string]time.Time{}, 0
}

func (m *memStore) NonceConsume(_ context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	m.calls++
	out := make([]store.NonceUsed, len(uses))
	for i, u := range uses {
		out[i].Epoch = m.epoch
		// A lookup is answered whatever the nonce, as the real store does.
		switch {
		case u.Lookup.Kind == store.LookupNone:
		case u.Lookup.ID == "missing":
			out[i].FoundErr = store.ErrNotFound
		default:
			out[i].Found = "row " + u.Lookup.ID
		}
		if _, ok := m.consumed[u.Nonce]; ok || u.Epoch != m.epoch || m.epoch == 0 {
			continue
		}
		m.consumed[u.Nonce] = u.Expires
		out[i].Fresh, out[i].Now = true, time.Now()
		switch u.AccountID {
		case "":
		case "unreadable":
			out[i].AccountErr = errors.New("the stored row does not decode")
		default:
			out[i].Account = &store.Account{ID: u.AccountID}
		}
	}
	return out, nil
}

func newService(t *testing.T, st Store, lifetime time.Duration) *Service {
	t.Helper()
	s, err := New(context.Background(), st, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantProblem(t *testing.T, err error, typ acme.ProblemType, detail string) {
	t.Helper()
	var ae *acme.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an *acme.Error", err)
	}
	if ae.Problem.Type != typ {
		t.Fatalf("problem %s, want %s (%v)", ae.Problem.Type, typ, err)
	}
	if detail != "" && !strings.Contains(ae.Problem.Detail, detail) {
		t.Fatalf("detail %q does not contain %q", ae.Problem.Detail, detail)
	}
}

func TestRedeem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newService(t, newMemStore(), time.Hour)
	flip := func(n string, i int) string {
		b, _ := base64.RawURLEncoding.DecodeString(n)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	tests := []struct {
		name   string
		nonce  func() string
		detail string
	}{
		{"forged authenticator", func() string { return flip(s.Issue(), nonceLen-1) }, "not issued by this server"},
		{"forged random part", func() string { return flip(s.Issue(), timeLen+epochLen+3) }, "not issued by this server"},
		{"forged time", func() string { return flip(s.Issue(), timeLen-1) }, "not issued by this server"},
		{"forged epoch", func() string { return flip(s.Issue(), timeLen+epochLen-1) }, "not issued by this server"},
		{"garbage", func() string { return "hello" }, "not issued by this server"},
		{"empty", func() string { return "" }, "not issued by this server"},
		{"right length, not base64url", func() string { return strings.Repeat("!", len(s.Issue())) }, "not issued by this server"},
		{"truncated", func() string { n := s.Issue(); return n[:len(n)-2] }, "not issued by this server"},
		{"other key", func() string {
			other := newMemStore()
			other.key = []byte("another key of at least 16 bytes")
			return newService(t, other, time.Hour).Issue()
		}, "not issued by this server"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantProblem(t, s.Redeem(ctx, tc.nonce()), acme.ProblemBadNonce, tc.detail)
		})
	}

	t.Run("issue then redeem once", func(t *testing.T) {
		t.Parallel()
		n := s.Issue()
		if err := s.Redeem(ctx, n); err != nil {
			t.Fatalf("fresh nonce refused: %v", err)
		}
		wantProblem(t, s.Redeem(ctx, n), acme.ProblemBadNonce, "nonce has already been used")
	})
	t.Run("nonces are distinct", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for i := 0; i < 1000; i++ {
			n := s.Issue()
			if seen[n] {
				t.Fatalf("nonce %s issued twice", n)
			}
			seen[n] = true
		}
	})
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newMemStore()
	s := newService(t, st, time.Minute)
	clock := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return clock }

	old := s.Issue()
	fresh := s.Issue()
	clock = clock.Add(time.Minute)
	wantProblem(t, s.Redeem(ctx, old), acme.ProblemBadNonce, "expired")

	// A nonce from a replica whose clock runs a little ahead is accepted; one
	// from far in the future is not.
	ahead := newService(t, st, time.Minute)
	ahead.now = func() time.Time { return clock.Add(Skew - time.Second) }
	if err := s.Redeem(ctx, ahead.Issue()); err != nil {
		t.Fatalf("nonce from a replica %s ahead refused: %v", Skew-time.Second, err)
	}
	ahead.now = func() time.Time { return clock.Add(Skew + 2*time.Second) }
	wantProblem(t, s.Redeem(ctx, ahead.Issue()), acme.ProblemBadNonce, "future")

	// The store is told when the nonce stops mattering, so it can forget it.
	clock = clock.Add(-time.Minute + time.Second)
	if err := s.Redeem(ctx, fresh); err != nil {
		t.Fatalf("unexpired nonce refused: %v", err)
	}
	want := time.Unix(1_700_000_000, 0).Add(time.Minute)
	if got := st.consumed[fresh]; !got.Equal(want) {
		t.Fatalf("consumed with expiry %s, want issue time + lifetime %s", got, want)
	}
}

// TestEpochReset: after a crash emptied the consumed set (PostgreSQL's
// unlogged tables), no nonce from before it is accepted — neither one used
// before, which the empty set no longer remembers, nor one never used — and
// the nonce the refusal's response carries (minted after it) works, at this
// replica and at one that has not yet seen the reset.
func TestEpochReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newMemStore()
	a, b := newService(t, st, time.Hour), newService(t, st, time.Hour)
	used, unused, atB := a.Issue(), a.Issue(), b.Issue()
	if err := a.Redeem(ctx, used); err != nil {
		t.Fatal(err)
	}
	st.crash()
	wantProblem(t, a.Redeem(ctx, used), acme.ProblemBadNonce, "reset")
	wantProblem(t, a.Redeem(ctx, unused), acme.ProblemBadNonce, "reset")
	if err := a.Redeem(ctx, a.Issue()); err != nil {
		t.Fatalf("a nonce minted after the refusal was refused: %v", err)
	}
	// B still mints under the old epoch until a refusal tells it otherwise.
	wantProblem(t, b.Redeem(ctx, atB), acme.ProblemBadNonce, "reset")
	if err := a.Redeem(ctx, b.Issue()); err != nil {
		t.Fatalf("B's nonce after its refusal was refused at A: %v", err)
	}
	if st.epochs != 2 {
		t.Fatalf("%d epochs started, want 2 (the first, and one after the crash)", st.epochs)
	}
}

// TestReplicas: two services sharing one store behave as one.
func TestReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newMemStore()
	a := newService(t, st, time.Hour)
	b := newService(t, st, time.Hour)
	n := a.Issue()
	if err := b.Redeem(ctx, n); err != nil {
		t.Fatalf("nonce from A refused at B: %v", err)
	}
	wantProblem(t, a.Redeem(ctx, n), acme.ProblemBadNonce, "already been used")
}

// TestConcurrentRedeems: 64 requests at once, each nonce sent twice (a
// client and its replay racing), on one store: every nonce is accepted
// exactly once and every request gets its own account back, in fewer store
// calls than requests — the batching the frontend relies on.
func TestConcurrentRedeems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newMemStore()
	st.delay = 2 * time.Millisecond
	s := newService(t, st, time.Hour)
	const n = 64
	nonces := make([]string, n)
	for i := range nonces {
		nonces[i] = s.Issue()
	}
	var accepted, replays sync.Map
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acct := fmt.Sprintf("acct-%d", i%n)
			got, _, err := s.RedeemFor(ctx, nonces[i%n], acct)
			switch {
			case err == nil:
				if got == nil || got.ID != acct {
					t.Errorf("request %d got account %+v, want %s", i, got, acct)
				}
				if _, dup := accepted.LoadOrStore(i%n, true); dup {
					t.Errorf("nonce %d accepted twice", i%n)
				}
			case acme.AsError(err) != nil && acme.AsError(err).Problem.Type == acme.ProblemBadNonce:
				replays.Store(i, true)
			default:
				t.Errorf("request %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	count := func(m *sync.Map) (k int) { m.Range(func(any, any) bool { k++; return true }); return k }
	if a, r := count(&accepted), count(&replays); a != n || r != n {
		t.Fatalf("accepted %d and refused %d, want %d and %d", a, r, n, n)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	t.Logf("%d redemptions in %d store calls", 2*n, st.calls)
	if st.calls > n/2 {
		t.Fatalf("%d store calls for %d concurrent redemptions: they were not batched", st.calls, 2*n)
	}
}

func TestDatabaseFailureIsNotBadNonce(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	st.fail = errors.New("connection refused")
	s := newService(t, st, time.Hour)
	err := s.Redeem(context.Background(), s.Issue())
	wantProblem(t, err, acme.ProblemServerInternal, "")
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("cause lost: %v", err)
	}
	if strings.Contains(acme.AsError(err).Problem.Detail, "connection refused") {
		t.Fatal("database error leaked into the problem detail")
	}
}

type keyErrStore struct{ *memStore }

func (*keyErrStore) NonceKey(context.Context) ([]byte, error) { return nil, errors.New("db down") }

func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := New(context.Background(), &keyErrStore{newMemStore()}, time.Hour); err == nil {
		t.Fatal("New succeeded without a key")
	}
	short := newMemStore()
	short.key = []byte("short")
	if _, err := New(context.Background(), short, time.Hour); err == nil {
		t.Fatal("New accepted a 5-byte key")
	}
	if _, err := New(context.Background(), newMemStore(), 0); err == nil {
		t.Fatal("New accepted a zero lifetime")
	}
}

func BenchmarkIssueRedeem(b *testing.B) {
	s, _ := New(context.Background(), newMemStore(), time.Hour)
	ctx := context.Background()
	for b.Loop() {
		if err := s.Redeem(ctx, s.Issue()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFound: a redemption's lookup is handed over only once Wait has
// accepted the nonce — a refused nonce's read is never used — and "no
// lookup" is not "found nothing".
func TestFound(t *testing.T) {
	s := newService(t, newMemStore(), time.Minute)
	ctx := context.Background()
	order := func(id string) store.Lookup { return store.Lookup{Kind: store.LookupOrder, ID: id} }
	n1 := s.Issue()
	tests := []struct {
		name    string
		nonce   string
		lookup  store.Lookup
		wantErr bool // Wait refuses the nonce
		want    any
		wantFE  error
		wantOK  bool
	}{
		{"found", n1, order("o1"), false, "row o1", nil, true},
		{"not found", s.Issue(), order("missing"), false, nil, store.ErrNotFound, true},
		{"no lookup", s.Issue(), store.Lookup{}, false, nil, nil, false},
		{"replayed nonce", n1, order("o1"), true, nil, nil, false},
		{"forged nonce", "AAAA", order("o1"), true, nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			red := s.Begin(ctx, tc.nonce, "acct", tc.lookup, nil)
			if _, _, ok := red.Found(); ok {
				t.Fatal("Found answered before Wait")
			}
			_, _, err := red.Wait(ctx)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Wait = %v, want an error: %v", err, tc.wantErr)
			}
			v, fe, ok := red.Found()
			if ok != tc.wantOK || v != tc.want || !errors.Is(fe, tc.wantFE) || (tc.wantFE == nil && fe != nil) {
				t.Fatalf("Found = %v, %v, %v; want %v, %v, %v", v, fe, ok, tc.want, tc.wantFE, tc.wantOK)
			}
		})
	}
}

// TestUnreadableAccount: an account the store found but could not read
// fails its request as the server's fault (the nonce is spent), not as a
// bad nonce or a missing account.
func TestUnreadableAccount(t *testing.T) {
	s := newService(t, newMemStore(), time.Minute)
	acct, _, err := s.RedeemFor(context.Background(), s.Issue(), "unreadable")
	if acct != nil {
		t.Fatalf("RedeemFor gave account %+v", acct)
	}
	wantProblem(t, err, acme.ProblemServerInternal, "")
}

// meanwhileStore is memStore with store.NoncesMeanwhile: it runs meanwhile
// after taking the batch and before answering it, where PostgreSQL's runs
// it between sending and reading, and counts the calls that came that way.
type meanwhileStore struct {
	*memStore
	meanwhiles atomic.Int32
}

func (m *meanwhileStore) NonceConsumeMeanwhile(ctx context.Context, uses []store.NonceUse, meanwhile func()) ([]store.NonceUsed, error) {
	m.meanwhiles.Add(1)
	meanwhile()
	return m.NonceConsume(ctx, uses)
}

// gatedStore holds every NonceConsume until open is closed, saying on
// entered that one has begun: a round trip that has not come back.
type gatedStore struct {
	*memStore
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedStore) NonceConsume(ctx context.Context, uses []store.NonceUse) ([]store.NonceUsed, error) {
	g.entered <- struct{}{}
	<-g.open
	return g.memStore.NonceConsume(ctx, uses)
}

// TestBeginMeanwhile: Begin runs the caller's meanwhile (the frontend's
// signature check) once, on the caller's goroutine, before it returns: with
// nothing in flight, inside the store's round trip where the store can
// (store.NoncesMeanwhile) and before it where it cannot; with a round trip
// in flight, while the flusher's is still out, not after it. A nonce
// refused without the store runs nothing.
func TestBeginMeanwhile(t *testing.T) {
	ctx := context.Background()
	ms := &meanwhileStore{memStore: newMemStore()}
	for _, tc := range []struct {
		name string
		st   Store
	}{
		{"store with meanwhile", ms},
		{"store without", newMemStore()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, tc.st, time.Hour)
			ran := 0
			red := s.Begin(ctx, s.Issue(), "acct", store.Lookup{}, func() { ran++ })
			if ran != 1 {
				t.Errorf("meanwhile ran %d times before Begin returned, want once", ran)
			}
			if acct, _, err := red.Wait(ctx); err != nil || acct == nil || acct.ID != "acct" {
				t.Fatalf("Wait = %+v, %v; want account acct", acct, err)
			}
			ran = 0
			red = s.Begin(ctx, "AAAA", "acct", store.Lookup{}, func() { ran++ })
			if ran != 0 {
				t.Errorf("meanwhile ran %d times for a forged nonce, want never", ran)
			}
			_, _, err := red.Wait(ctx)
			wantProblem(t, err, acme.ProblemBadNonce, "")
		})
	}
	if n := ms.meanwhiles.Load(); n != 1 {
		t.Errorf("the store ran meanwhile %d times, want once (the forged nonce never reaches it)", n)
	}

	t.Run("meanwhile panics", func(t *testing.T) {
		// net/http recovers a handler's panic; the batcher must not be
		// left thinking a round trip is still out, or every later
		// request would hand its own to a flusher.
		st := &meanwhileStore{memStore: newMemStore()}
		s := newService(t, st, time.Hour)
		func() {
			defer func() { _ = recover() }()
			s.Begin(ctx, s.Issue(), "acct", store.Lookup{}, func() { panic("in meanwhile") })
		}()
		ran := 0
		if _, _, err := s.Begin(ctx, s.Issue(), "acct", store.Lookup{}, func() { ran++ }).Wait(ctx); err != nil || ran != 1 {
			t.Fatalf("after a panic: Wait = %v, meanwhile ran %d times", err, ran)
		}
		if n := st.meanwhiles.Load(); n != 2 {
			t.Errorf("after a panic the next request's round trip went to a flusher (%d calls made their own, want 2)", n)
		}
	})

	t.Run("round trip in flight", func(t *testing.T) {
		g := &gatedStore{memStore: newMemStore(), entered: make(chan struct{}, 2), open: make(chan struct{})}
		s := newService(t, g, time.Hour)
		first := make(chan error, 1)
		go func() { // takes the idle path and holds it
			_, _, err := s.Begin(ctx, s.Issue(), "acct-1", store.Lookup{}, nil).Wait(ctx)
			first <- err
		}()
		<-g.entered
		ran := 0
		begun := make(chan *Redemption, 1)
		go func() { begun <- s.Begin(ctx, s.Issue(), "acct-2", store.Lookup{}, func() { ran++ }) }()
		var red *Redemption
		select {
		case red = <-begun:
		case <-time.After(10 * time.Second):
			close(g.open)
			t.Fatal("Begin waited for the round trip that was out instead of joining the next batch")
		}
		if ran != 1 {
			t.Errorf("meanwhile ran %d times while a round trip was out, want once", ran)
		}
		<-g.entered // the second's flush is out too, and held
		close(g.open)
		if acct, _, err := red.Wait(ctx); err != nil || acct == nil || acct.ID != "acct-2" {
			t.Errorf("second Wait = %+v, %v", acct, err)
		}
		if err := <-first; err != nil {
			t.Errorf("first Wait = %v", err)
		}
	})
}
