package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/origin"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/worker/validate"
	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// mount is a profile this worker can sign for.
type mount struct {
	profile profile.Profile
	backend Backend
	issuer  *signer.Issuer // local and pkcs11 only: this worker signs its CRLs
}

// Worker holds the handlers' dependencies.
type Worker struct {
	id          string
	st          stores // the store, through the part each job uses
	validator   validator
	slots       *accountSlots        // each account's share of the validation slots
	mounts      map[string]mount     // by profile name
	issuersMu   sync.RWMutex         // guards issuers and crlTurn: addIssuer adds to them
	issuers     map[string]CRLSigner // by issuer ID
	managed     issuerSet            // the profile→issuer mapping (issuers.go)
	runner      jobs.Runner          // once Attach-ed: addIssuer schedules CRLs on it
	baseURL     string               // the ACME API, for account URIs (CAA accounturi)
	urlBase     string               // plain-http base of CRLs and issuer certificates
	crlValidity time.Duration
	notify      jobs.Handler[jobs.NotifySendArgs] // nil: no notify_send jobs here
	expiryDays  []int                             // [notify] expiry_days
	crlLease    time.Duration                     // a CRL lease's length: how long a dead holder blocks the next CRL
	// crlShards is how many CRL shards each issuer this worker signs for
	// has: ca.crl_shards for a local or PKCS#11 issuer, 1 for a custom
	// backend's crl hook.
	crlShards map[string]int
	// localShards is ca.crl_shards (at least 1): a local or PKCS#11
	// issuer's, including one loaded while the worker runs (addIssuer).
	localShards int
	// crlTurn is one slot per issuer shard (crlShardKey): this worker's CRL
	// jobs for one shard take turns. The lease keeps other workers out but is this
	// worker's own for every job it runs, and two of its jobs side by side
	// could store a newer-numbered CRL from an older list of revocations.
	crlTurn map[string]chan struct{}
	// unstored holds certificates signed whose storing failed, by order
	// ID, so the job's retry on this worker stores the same certificate
	// rather than signing a second one and leaving the first unrecorded.
	unstored      *sync.Map // shared by the workers a reload swaps (live.go)
	strandedAfter time.Duration
	// giveUpAfter is how long a subject may stay processing, re-queued
	// each time its job is lost, before it is abandoned: an hour, or ten
	// stranded periods where those are longer. A job lost once (a worker
	// killed) is re-queued within strandedAfter; one lost every time (its
	// handler hangs until River gives it up, attempt after attempt) would
	// otherwise leave its client polling forever.
	giveUpAfter time.Duration
	conf        workerconf.Worker // [worker], for the job runner's settings
	// retention is how long housekeeping keeps trail events; 0 keeps all.
	retention time.Duration
	log       *slog.Logger
	metrics   metrics
	// quorum is [challenge.perspectives]: who corroborates this worker's
	// validations (perspective_quorum.go).
	quorum workerconf.Perspectives
	persp  perspectiveMetrics
}

// Config is what New builds a worker from: its own sections, [worker] and
// [challenge], and what it reads of the others.
type Config struct {
	Worker    workerconf.Worker
	Challenge workerconf.Challenge
	Audit     workerconf.Audit // the issuance trail's retention (housekeeping)
	CA        signerconf.CA    // url_base and crl_validity_hours, for CRLs
	Profiles  map[string]profile.Profile
	// BaseURL is server.base_url: account URIs, for CAA accounturi.
	BaseURL string
	// CAAIdentities is server.caa_identities, the CA's CAA domains.
	CAAIdentities []string
	// DenyIPRanges is policy.deny_ip_ranges: validation never connects there.
	DenyIPRanges []string
	// Listeners are the CA's own, which validation never connects to.
	Listeners []workerconf.Listener
}

// Options are what main hands the worker beyond the configuration.
type Options struct {
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// Issuers are the mounted key-holding backends by profile name; main
	// builds them (a PEM key file, a PKCS#11 token) so this package does not
	// care. The worker signs their CRLs.
	Issuers map[string]*signer.Issuer
	// Backends are the mounted relay and custom backends by profile name.
	Backends map[string]Backend
	// Notify delivers notify_send jobs ([notify]); nil: this worker takes
	// none (their queue is left to a worker that does).
	Notify jobs.Handler[jobs.NotifySendArgs]
	// ExpiryDays are [notify] expiry_days: housekeeping reports the
	// certificates not renewed that many days before they expire.
	ExpiryDays []int
	// Managed are the managed local issuers (store.IssuerRecords) this
	// worker could load at start, active or retiring: it signs their CRLs
	// whether or not a profile names them.
	Managed []*signer.Issuer
	// Load loads a managed issuer a profile names when this worker has not
	// yet; nil: each profile signs with its configured issuer only.
	Load IssuerLoader
}

// New builds a worker for cfg over st.
func New(cfg Config, st store.Store, opts Options) (*Worker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := cfg.Challenge.ValidateResolvers(); err != nil {
		// Without resolvers every validation and CAA check could not run.
		return nil, err
	}
	// A job may run job_timeout, then River takes rescue_after to call it
	// lost: a subject processing longer, with no job, was stranded.
	stranded := time.Duration(cfg.Worker.JobTimeoutMS+cfg.Worker.RescueAfterMS) * time.Millisecond
	dial, err := dialRules(cfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		id:          cfg.Worker.ID,
		st:          stores{validate: st, issue: st, crls: st, revoke: st, housekeep: st, upstream: st, live: st, ping: st, perspectives: st},
		validator:   newValidator(cfg, dial),
		slots:       newAccountSlots(cfg.Worker.ValidationAccountShare, cfg.Worker.ValidationConcurrency),
		mounts:      map[string]mount{},
		unstored:    new(sync.Map),
		issuers:     map[string]CRLSigner{},
		crlTurn:     map[string]chan struct{}{},
		crlShards:   map[string]int{},
		localShards: max(cfg.CA.CRLShards, 1),
		baseURL:     cfg.BaseURL,
		urlBase:     cfg.CA.URLBase,
		crlValidity: time.Duration(cfg.CA.CRLValidityHours) * time.Hour,
		// A live holder's job is cancelled at job_timeout, so it cannot store
		// a CRL after that; rescue_after is when River calls its job dead and
		// hands it on, and the lease frees by then too.
		crlLease:      time.Duration(cfg.Worker.RescueAfterMS) * time.Millisecond,
		strandedAfter: stranded,
		giveUpAfter:   max(time.Hour, 10*stranded),
		conf:          cfg.Worker,
		retention:     cfg.Audit.Retention(),
		notify:        opts.Notify,
		expiryDays:    opts.ExpiryDays,
		log:           origin.Logger(opts.Logger), // a job's lines name its request
		metrics:       newMetrics(),
		quorum:        cfg.Challenge.Perspectives,
		persp:         newPerspectiveMetrics(),
	}
	w.managed = issuerSet{st: st, load: opts.Load, loaded: map[string]*signer.Issuer{}}
	for _, iss := range opts.Managed {
		w.managed.loaded[iss.ID] = iss
		w.issuers[iss.ID] = iss
		w.addCRLShards(iss.ID, w.localShards)
	}
	for name, iss := range opts.Issuers {
		p, ok := cfg.Profiles[name]
		if !ok {
			return nil, fmt.Errorf("profiles.%s: a backend was mounted for a profile that is not configured", name)
		}
		w.mounts[name] = mount{profile: p, backend: issuerBackend{iss}, issuer: iss}
		w.issuers[iss.ID] = iss
		w.addCRLShards(iss.ID, w.localShards)
	}
	for name, b := range opts.Backends {
		p, ok := cfg.Profiles[name]
		if !ok {
			return nil, fmt.Errorf("profiles.%s: a backend was mounted for a profile that is not configured", name)
		}
		if _, dup := w.mounts[name]; dup {
			return nil, fmt.Errorf("profiles.%s: mounted twice (as an issuer and as a backend)", name)
		}
		w.mounts[name] = mount{profile: p, backend: b}
		if cs, ok := b.(selfCRLSigner); ok && cs.SignsCRLs() {
			w.issuers[b.IssuerID()] = cs
			w.addCRLShards(b.IssuerID(), 1)
		}
	}
	if opts.Registry != nil {
		if err := w.register(opts.Registry); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// newValidator is the validator cfg's [challenge] section describes.
func newValidator(cfg Config, dial validate.DialRules) *validate.Validator {
	return validate.New(validate.Config{
		Resolvers:     cfg.Challenge.Resolvers,
		DNSSEC:        cfg.Challenge.DNSSEC,
		HTTPPort:      cfg.Challenge.HTTPPort,
		HTTPSPort:     cfg.Challenge.HTTPSPort,
		TLSALPNPort:   cfg.Challenge.TLSALPNPort,
		Timeout:       time.Duration(cfg.Challenge.TimeoutMS) * time.Millisecond,
		CAAIdentities: cfg.CAAIdentities,
		Dial:          dial,
		// The frontend advertises the same prefix (protocol/directory.go).
		AccountHashPrefix: cfg.BaseURL + acme.AccountHashPath,
	})
}

// Registry returns the one handler per job kind this worker runs.
func (w *Worker) Registry() (*jobs.Registry, error) {
	reg := &jobs.Registry{}
	for _, err := range []error{
		jobs.Register(reg, w.validateChallenge),
		jobs.Register(reg, w.issueOrder),
		jobs.Register(reg, w.revokeCert),
		jobs.Register(reg, w.generateCRL),
		jobs.Register(reg, w.housekeeping),
		jobs.Register(reg, w.refreshUpstreamRenewals),
		jobs.Register(reg, w.checkAsPerspective),
	} {
		if err != nil {
			return nil, err
		}
	}
	if w.notify != nil {
		if err := jobs.Register(reg, w.notify); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// Queues are the queues this worker works: validation and maintenance,
// plus the signing queue of every profile it mounts.
func (w *Worker) Queues() []string {
	if w.conf.Perspective != "" {
		// A perspective works its own checks only (perspective.go).
		return []string{jobs.PerspectiveQueue(w.conf.Perspective)}
	}
	qs := []string{jobs.QueueValidate, jobs.QueueMaintenance}
	if w.notify != nil {
		qs = append(qs, jobs.QueueNotify)
	}
	names := make([]string, 0, len(w.mounts))
	for n := range w.mounts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		qs = append(qs, jobs.ProfileQueue(n))
	}
	for _, id := range w.issuerIDs() {
		qs = append(qs, jobs.IssuerQueue(id))
	}
	return qs
}

func (w *Worker) issuerIDs() []string {
	w.issuersMu.RLock()
	defer w.issuersMu.RUnlock()
	ids := make([]string, 0, len(w.issuers))
	for id := range w.issuers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// JobSettings are the job runner's settings for this worker, from
// [worker]. hallmark-worker starts its runner with them, adding where River
// logs; tests start theirs the same way, so the two cannot drift apart.
//
// Validation runs more jobs at once than the other queues
// (worker.validation_concurrency against worker.concurrency): its jobs
// mostly wait on the network, up to challenge.timeout_ms for a target that
// never answers, and at the others' concurrency a few such targets would
// hold up every other client's validation that long
// (TestSilentTargetsHoldNoOneUp). Within it, one account holds at most
// worker.validation_account_share of the slots (accountSlots,
// TestBlackHoleAccountHoldsNoOneUp).
func (w *Worker) JobSettings() jobs.Settings {
	return jobs.Settings{
		WorkerID:        w.id,
		MaxWorkers:      w.conf.Concurrency,
		QueueMaxWorkers: w.queueMaxWorkers(),
		Queues:          w.Queues(),
		JobTimeout:      time.Duration(w.conf.JobTimeoutMS) * time.Millisecond,
		RescueAfter:     time.Duration(w.conf.RescueAfterMS) * time.Millisecond,
		Liveness:        w.st.live,
		Heartbeat:       time.Duration(w.conf.HeartbeatMS) * time.Millisecond,
		DeferMax:        time.Duration(w.conf.DeferMaxMS) * time.Millisecond,
		Periodic:        w.Periodic(),
		Scheduled:       w.Scheduled(time.Duration(w.conf.CRLIntervalMinutes) * time.Minute),
		Subjects:        w.st.housekeep,
	}
}

// Periodic are the jobs River's leader inserts for every worker:
// housekeeping every minute (and once at start).
func (w *Worker) Periodic() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Minute), func() (river.JobArgs, *river.InsertOpts) {
			return jobs.HousekeepingArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}

// Scheduled are the jobs this worker inserts itself: each shard of each
// mounted issuer's CRL at start and every crlEvery, well before its nextUpdate. Not River's
// periodic jobs: its leader alone inserts those, and an issuer the leader
// does not mount would get no CRL until a revocation (TestCRLForEveryIssuer).
// Every worker mounting an issuer inserts its job; the handler skips a
// CRL that is fresh and complete, so the copies cost a read each. So for
// the refresh of each mounted relay's upstream renewal windows
// (upstream.go): the job is unique while outstanding, and a copy finds
// only the certificates still due.
func (w *Worker) Scheduled(crlEvery time.Duration) []jobs.Scheduled {
	var sj []jobs.Scheduled
	if w.conf.Perspective != "" {
		return nil // a perspective signs nothing
	}
	for _, id := range w.issuerIDs() {
		for shard := range w.crlShardsOf(id) {
			sj = append(sj, jobs.Scheduled{Every: crlEvery, Args: jobs.CRLGenerateArgs{IssuerID: id, Shard: shard}})
		}
	}
	for _, a := range w.upstreamRenewals() {
		sj = append(sj, jobs.Scheduled{Every: upstreamRenewalEvery, Args: a})
	}
	return sj
}

// Ready reports whether the worker can do its work: the database answers.
func (w *Worker) Ready(ctx context.Context) error {
	if err := w.st.ping.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// BackendsReady reports whether every mounted backend that can tell (a
// PKCS#11 token, an upstream CA) is reachable. It is separate from Ready:
// a token that went away makes the worker not ready, but the worker keeps
// claiming jobs (validation, other profiles; the token's jobs are retried).
func (w *Worker) BackendsReady(ctx context.Context) error {
	names := make([]string, 0, len(w.mounts))
	for n := range w.mounts {
		names = append(names, n)
	}
	sort.Strings(names)
	checked := map[any]bool{}
	for _, n := range names {
		m := w.mounts[n]
		var c Checker
		if m.issuer != nil {
			c, _ = m.issuer.Signer.(Checker)
		} else {
			c, _ = m.backend.(Checker)
		}
		if c == nil || checked[c] {
			continue
		}
		checked[c] = true
		if err := c.Ready(ctx); err != nil {
			return fmt.Errorf("profile %s: %w", n, err)
		}
	}
	return nil
}
