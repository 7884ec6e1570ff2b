package worker

import (
	"context"
	"crypto"
	"crypto/rsa"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
)

// Which issuer signs for a profile is data (store.IssuerRecords), not
// configuration: an operator's rotation reaches every worker within
// issuerMapTTL, with no restart, and an order being signed meanwhile is
// signed by the issuer it read, old or new, never failed.

// issuerMapTTL is how long a worker signs by the profile→issuer mapping it
// read before reading it again: a rotation is in effect everywhere that
// long after it commits (`hallmark issuers rotate` waits it out).
const issuerMapTTL = time.Second

// IssuerLoader loads a managed issuer by its ID (a local one from ca.dir,
// one on a PKCS#11 token from the token its record names); hallmark-worker
// hands it in, so this package opens no key file and no token.
type IssuerLoader func(id string) (*signer.Issuer, error)

// issuerMapStore is what issuer selection reads.
type issuerMapStore interface {
	ProfileIssuers(ctx context.Context) (map[string][]store.ProfileIssuer, error)
}

// issuerSet is this worker's view of the profile→issuer mapping and the
// managed issuers it has loaded.
type issuerSet struct {
	st   issuerMapStore
	load IssuerLoader // nil: profiles sign with their configured issuer only

	mu        sync.Mutex
	read      time.Time
	byProfile map[string][]store.ProfileIssuer
	loaded    map[string]*signer.Issuer
}

// all are the managed issuers loaded so far.
func (s *issuerSet) all() []*signer.Issuer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*signer.Issuer, 0, len(s.loaded))
	for _, iss := range s.loaded {
		out = append(out, iss)
	}
	return out
}

// mapping is the profile→issuer mapping, read again once issuerMapTTL
// has passed; a failed read keeps the last one while there is one.
func (s *issuerSet) mapping(ctx context.Context) (map[string][]store.ProfileIssuer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byProfile != nil && time.Since(s.read) < issuerMapTTL {
		return s.byProfile, nil
	}
	m, err := s.st.ProfileIssuers(ctx)
	if err != nil {
		if s.byProfile != nil {
			return s.byProfile, nil
		}
		return nil, err
	}
	s.byProfile, s.read = m, time.Now()
	return m, nil
}

// issuer returns the loaded issuer id, loading it the first time; fresh
// says it was loaded now.
func (s *issuerSet) issuer(id string) (iss *signer.Issuer, fresh bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if iss, ok := s.loaded[id]; ok {
		return iss, false, nil
	}
	iss, err = s.load(id)
	if err != nil {
		return nil, false, err
	}
	s.loaded[id] = iss
	return iss, true, nil
}

// keyFamily is "rsa" or "ec": an issuer of the CSR's family signs it when
// a profile names issuers of both (as Let's Encrypt's R and E).
func keyFamily(keyType string) string {
	if strings.HasPrefix(keyType, "rsa") {
		return "rsa"
	}
	return "ec"
}

func pubFamily(pub crypto.PublicKey) string {
	if _, ok := pub.(*rsa.PublicKey); ok {
		return "rsa"
	}
	return "ec"
}

// choose picks among a profile's active issuers, newest first: the newest
// of the CSR key's family, else the newest.
func choose(cands []store.ProfileIssuer, pub crypto.PublicKey) string {
	fam := pubFamily(pub)
	for _, c := range cands {
		if keyFamily(c.KeyType) == fam {
			return c.ID
		}
	}
	return cands[0].ID
}

// backendFor is the backend that signs o's certificate for profile: a
// local or PKCS#11 profile's issuer by the mapping, when it names any of
// the profile's own backend; otherwise the mounted backend.
func (w *Worker) backendFor(ctx context.Context, m mount, profile string, pub crypto.PublicKey) (Backend, error) {
	own, ok := m.profile.IssuerKeys()
	if w.managed.load == nil || !ok {
		return m.backend, nil
	}
	mp, err := w.managed.mapping(ctx)
	if err != nil {
		return nil, jobs.CouldNotRun(fmt.Errorf("reading the issuers of profile %s: %w", profile, err))
	}
	var cands []store.ProfileIssuer
	for _, c := range mp[profile] {
		// Only an issuer whose key is where the profile's backend keeps
		// keys (ca.dir, or its token) signs for it: the rotation commands
		// refuse others, and issuers named before the profile's backend
		// was changed in the configuration leave it its mounted issuer.
		if c.Backend == own {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return m.backend, nil
	}
	id := choose(cands, pub)
	if m.issuer != nil && m.issuer.ID == id {
		return m.backend, nil
	}
	iss, fresh, err := w.managed.issuer(id)
	if err != nil {
		// Its key is not on this worker (ca.dir, the backend's token):
		// another worker may have it.
		return nil, jobs.CouldNotRun(fmt.Errorf("loading issuer %s of profile %s: %w", id, profile, err))
	}
	if fresh {
		w.addIssuer(iss)
	}
	return issuerBackend{iss}, nil
}

// addIssuer registers an issuer loaded while the worker runs for its
// CRLs: its queue is worked and its CRL scheduled from now on.
func (w *Worker) addIssuer(iss *signer.Issuer) {
	w.issuersMu.Lock()
	if _, ok := w.issuers[iss.ID]; ok {
		w.issuersMu.Unlock()
		return
	}
	w.issuers[iss.ID] = iss
	w.addCRLShards(iss.ID, w.localShards)
	r := w.runner
	w.issuersMu.Unlock()
	w.log.Info("issuer loaded", "issuer", iss.ID, "name", iss.Cert.Subject.CommonName)
	if r == nil {
		return
	}
	for shard := range w.localShards {
		err := r.Schedule(jobs.IssuerQueue(iss.ID), jobs.Scheduled{Every: w.crlEvery(), Args: jobs.CRLGenerateArgs{IssuerID: iss.ID, Shard: shard}})
		if err != nil {
			w.log.Error("the new issuer's CRLs are not scheduled on this worker; restart it", "issuer", iss.ID, "shard", shard, "err", err)
			return
		}
	}
}

// crlIssuer is the CRL signer of an issuer this worker mounts, and the
// turn of its shard (Worker.crlTurn); a shard above ca.crl_shards, as
// lowered since, still gets its CRL, in shard 0's turn.
func (w *Worker) crlIssuer(id string, shard int) (CRLSigner, chan struct{}, bool) {
	w.issuersMu.RLock()
	defer w.issuersMu.RUnlock()
	iss, ok := w.issuers[id]
	turn, has := w.crlTurn[crlShardKey(id, shard)]
	if !has {
		turn = w.crlTurn[crlShardKey(id, 0)]
	}
	return iss, turn, ok
}

// crlShardsOf is how many CRL shards the issuer has on this worker (0 for
// one it signs no CRL for: a relay's).
func (w *Worker) crlShardsOf(id string) int {
	w.issuersMu.RLock()
	defer w.issuersMu.RUnlock()
	return w.crlShards[id]
}

// Attach hands the worker its started job runner, so that an issuer it
// loads later gets its CRL queue (addIssuer).
func (w *Worker) Attach(r jobs.Runner) {
	w.issuersMu.Lock()
	defer w.issuersMu.Unlock()
	w.runner = r
}

func (w *Worker) crlEvery() time.Duration {
	return time.Duration(w.conf.CRLIntervalMinutes) * time.Minute
}
