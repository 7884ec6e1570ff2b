package sqlstore

import (
	"crypto/sha256"
	"sync"
	"time"
)

// memNonces is SQLite's consumed-nonce set. It lives in the memory of the
// process that consumes nonces (the frontend), under an epoch of that
// process's own, instead of in a table.
//
// Why: in a table, every request's nonce is a write transaction on the
// process's one connection (eight statements with the synchronous setting
// lowered and restored), taken by every request, reads included, and
// contending with the worker for the file's one write lock.
//
// Why it is safe (RFC 8555 §6.5: a nonce is accepted once):
//   - A nonce is accepted only under the epoch it was minted in, and this
//     epoch is random per process. A restarted frontend, or a second
//     process on the same file, refuses every nonce minted before it
//     started or elsewhere: badNonce, and the client retries with the
//     fresh nonce that answer carries. The embedded default runs one
//     frontend per file (docs/architecture.md), so this costs nothing.
//   - Within the process a nonce is remembered until it expires. An
//     expired nonce is refused before it reaches the store
//     (protocol/nonce), on the same process's clock.
//   - At most max are remembered. Past that, and after forgetting the
//     expired ones, the set starts a new epoch and forgets them all: the
//     nonces outstanding are refused, never accepted twice.
type memNonces struct {
	mu    sync.Mutex
	epoch int64
	used  map[nonceID]int64 // → when it expires, in Unix seconds
	adds  int               // since the last sweep
	max   int
}

// nonceID names a nonce in the set: the first 16 bytes of its SHA-256.
// Two nonces sharing one would make the second refused, never accepted.
type nonceID [16]byte

func idOf(nonce string) nonceID {
	h := sha256.Sum256([]byte(nonce))
	return nonceID(h[:16])
}

// memNoncesMax bounds the set to some 50 MB: a thousand requests a second
// for a quarter of an hour of nonce lifetime.
const memNoncesMax = 1 << 20

// memSweepEvery is how many consumptions go between two sweeps of the
// expired nonces.
const memSweepEvery = 4096

func newMemNonces(max int) *memNonces {
	return &memNonces{epoch: randomEpoch(), used: make(map[nonceID]int64), max: max}
}

// current is the epoch nonces must be minted in to be accepted.
func (m *memNonces) current() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// consume consumes nonce, minted in epoch and good until expires, and
// reports whether it was fresh: false for another epoch's nonce and for
// one consumed before. current is the epoch after the call.
func (m *memNonces) consume(nonce string, epoch int64, expires, now time.Time) (fresh bool, current int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != m.epoch {
		return false, m.epoch
	}
	id := idOf(nonce)
	if _, seen := m.used[id]; seen {
		return false, m.epoch
	}
	if m.adds >= memSweepEvery || len(m.used) >= m.max {
		m.sweepLocked(now)
		if len(m.used) >= m.max {
			// Full of live nonces: forget them all under a new epoch,
			// this one's nonce with them.
			m.epoch, m.used = randomEpoch(), make(map[nonceID]int64)
			return false, m.epoch
		}
	}
	m.used[id] = expires.Unix()
	m.adds++
	return true, m.epoch
}

// release forgets nonce, consumed by a claim that committed nothing
// (signedChecks), so that the request's own redemption can consume it.
func (m *memNonces) release(nonce string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.used, idOf(nonce))
}

// sweep forgets the nonces expired by now (a whole second before it:
// nonces expire on whole seconds) and reports how many.
func (m *memNonces) sweep(now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sweepLocked(now)
}

func (m *memNonces) sweepLocked(now time.Time) int {
	n, cut := 0, now.Unix()
	for id, expires := range m.used {
		if expires < cut {
			delete(m.used, id)
			n++
		}
	}
	m.adds = 0
	return n
}
