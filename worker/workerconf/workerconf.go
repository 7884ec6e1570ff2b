// Package workerconf is the worker's own sections of the configuration
// file, [worker], [challenge] and [audit], with their checks. It is a leaf of the
// standard library, apart from package worker, because every binary checks
// the whole file and the CLI may not link worker/ code that runs jobs
// (tests/layering lets it link this leaf only); worker.Config holds them.
package workerconf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Worker configures hallmark-worker, [worker].
type Worker struct {
	ID string `toml:"id"`
	// Concurrency is how many jobs of each queue run at once: signing,
	// revocation and maintenance, which are CPU- or HSM-bound.
	Concurrency int `toml:"concurrency"`
	// ValidationConcurrency is how many validations run at once. Each
	// waits on the network, up to challenge.timeout_ms for a target that
	// never answers, so it is many more than Concurrency: a handful of
	// silent targets must not hold up every other client's validation.
	ValidationConcurrency int `toml:"validation_concurrency"`
	// ValidationAccountShare is the fraction of ValidationConcurrency one
	// account's validations may hold at once on a worker (at least one
	// slot); the rest of its validations wait behind other accounts'.
	// 1 lets one account take every slot.
	ValidationAccountShare float64 `toml:"validation_account_share"`
	JobTimeoutMS           int     `toml:"job_timeout_ms"`
	// RescueAfterMS is when River's own rescuer takes a job running that
	// long, for workers with no heartbeat; HeartbeatMS is how long a
	// worker may go without renewing its heartbeat (every fifth of it)
	// before any live worker takes its running jobs.
	RescueAfterMS int `toml:"rescue_after_ms"`
	HeartbeatMS   int `toml:"heartbeat_ms"`
	// DeferMaxMS caps the backoff of a job whose backend is unavailable,
	// deferred until the order's expiry: the longest it waits once the
	// backend is back.
	DeferMaxMS int `toml:"defer_max_ms"`
	// HealthListen serves /healthz, /readyz and /metrics; DefaultHealthListen
	// unless set, and "" turns it off. Each worker on a host needs its own.
	HealthListen       string `toml:"health_listen"`
	CRLIntervalMinutes int    `toml:"crl_interval_minutes"`
	// Profiles lists the profiles this worker mounts; empty means all.
	Profiles []string `toml:"profiles"`
	// PprofListen serves net/http/pprof (cmd/internal/process); empty,
	// the default, disables it.
	PprofListen string `toml:"pprof_listen"`
	// Perspective, when set, makes this worker a remote network
	// perspective of that name: it works only that perspective's checks
	// (jobs.PerspectiveQueue), with its own [challenge] resolvers.
	Perspective string `toml:"perspective"`
}

// Challenge configures validation, [challenge].
type Challenge struct {
	TimeoutMS   int      `toml:"timeout_ms"`
	Resolvers   []string `toml:"resolvers"` // host:port of DNS resolvers
	HTTPPort    int      `toml:"http_port"`
	TLSALPNPort int      `toml:"tls_alpn_port"`
	HTTPSPort   int      `toml:"https_port"` // where a redirect to https:// goes
	// AllowReservedRanges lifts the built-in refusals of where validation
	// connects (link-local and cloud metadata addresses, unspecified,
	// multicast, broadcast, the CA's own listeners) for these CIDR ranges.
	// policy.deny_ip_ranges still applies. Empty, the default, lifts none.
	AllowReservedRanges []string `toml:"allow_reserved_ranges"`
	// DNSSEC is what validation asks of DNSSEC (DNSSECOff, DNSSECCheck,
	// DNSSECRequire); DNSSECCheck unless set.
	DNSSEC string `toml:"dnssec"`
	// Perspectives are the remote perspectives that corroborate this
	// worker's validations (perspectives.go).
	Perspectives Perspectives `toml:"perspectives"`
}

// The values of challenge.dnssec. Every one but DNSSECOff sets the DO bit
// on the worker's queries; none validates itself: the configured resolvers
// must, and the path to them must be trusted (the AD bit is not signed).
const (
	// DNSSECOff sends queries without DO and reads no DNSSEC signal.
	DNSSECOff = "off"
	// DNSSECCheck, the default: a bogus answer (a validating resolver's
	// SERVFAIL) fails the lookup as a DNSSEC failure, never asking
	// another resolver; unsigned zones validate as before.
	DNSSECCheck = "check"
	// DNSSECRequire also refuses every answer without the AD bit: only
	// names in signed zones with a chain of trust validate or pass CAA.
	DNSSECRequire = "require"
)

// Listener is one of the CA's own listening addresses and the key that
// sets it: validation never connects to it on a client's behalf.
type Listener struct {
	Key  string
	Addr string // host:port as configured
}

// DefaultHealthListen is where a worker serves its health and metrics
// unless worker.health_listen says otherwise: loopback, beside the
// frontend's default 127.0.0.1:14000 and clear of the CRL listener
// (14080), the admin panel `hallmark up` configures (14090) and its dev
// DNS (14053).
const DefaultHealthListen = "127.0.0.1:14001"

// DefaultWorker is [worker] when the file sets nothing.
func DefaultWorker() Worker {
	return Worker{Concurrency: 8, ValidationConcurrency: 100, ValidationAccountShare: 0.1, JobTimeoutMS: 30000, RescueAfterMS: 60000, HeartbeatMS: 5000, DeferMaxMS: 60000,
		CRLIntervalMinutes: 60, HealthListen: DefaultHealthListen}
}

// DefaultChallenge is [challenge] when the file sets nothing: no
// resolvers, which a worker refuses (ValidateResolvers).
func DefaultChallenge() Challenge {
	return Challenge{TimeoutMS: 10000, HTTPPort: 80, TLSALPNPort: 443, HTTPSPort: 443, DNSSEC: DNSSECCheck, Perspectives: DefaultPerspectives()}
}

// Validate reports every problem of [worker], each naming its key.
func (w Worker) Validate() error {
	var errs []error
	if w.CRLIntervalMinutes < 1 {
		errs = append(errs, errors.New("worker.crl_interval_minutes: must be at least 1"))
	}
	if w.Concurrency < 1 {
		errs = append(errs, errors.New("worker.concurrency: must be at least 1"))
	}
	if w.ValidationConcurrency < 1 {
		errs = append(errs, errors.New("worker.validation_concurrency: must be at least 1"))
	}
	if s := w.ValidationAccountShare; !(s > 0 && s <= 1) {
		errs = append(errs, fmt.Errorf("worker.validation_account_share: must be more than 0 and at most 1 (a fraction of worker.validation_concurrency; 1 lets one account take every slot), got %g", s))
	}
	if w.HealthListen != "" {
		if _, _, err := net.SplitHostPort(w.HealthListen); err != nil {
			errs = append(errs, fmt.Errorf("worker.health_listen: must be host:port such as %s (\"\" turns it off): %v", DefaultHealthListen, err))
		}
	}
	if w.HeartbeatMS < 500 || w.HeartbeatMS > 60000 {
		errs = append(errs, fmt.Errorf("worker.heartbeat_ms: must be 500 to 60000 (how long a worker may go silent before its jobs are taken; it renews every fifth of it), got %d", w.HeartbeatMS))
	}
	if w.DeferMaxMS < 100 {
		errs = append(errs, fmt.Errorf("worker.defer_max_ms: must be at least 100 (the longest wait between tries of a job whose backend is unavailable), got %d", w.DeferMaxMS))
	}
	if w.Perspective != "" {
		if err := ValidPerspectiveName("worker.perspective", w.Perspective); err != nil {
			errs = append(errs, err)
		}
	}
	if w.JobTimeoutMS >= w.RescueAfterMS {
		errs = append(errs, fmt.Errorf("worker.job_timeout_ms: must be shorter than worker.rescue_after_ms (%d), or a live job is rescued", w.RescueAfterMS))
	}
	return errors.Join(errs...)
}

// Validate reports every problem of [challenge] that matters to every
// binary, each naming its key; ValidateResolvers adds the worker's own.
func (c Challenge) Validate() error {
	var errs []error
	for _, port := range []struct {
		key string
		v   int
	}{
		{"challenge.http_port", c.HTTPPort},
		{"challenge.tls_alpn_port", c.TLSALPNPort},
		{"challenge.https_port", c.HTTPSPort},
	} {
		if port.v < 1 || port.v > 65535 {
			errs = append(errs, fmt.Errorf("%s: must be a port, 1 to 65535; got %d", port.key, port.v))
		}
	}
	if c.TimeoutMS < 100 {
		errs = append(errs, errors.New("challenge.timeout_ms: must be at least 100"))
	}
	switch c.DNSSEC {
	case DNSSECOff, DNSSECCheck, DNSSECRequire:
	default:
		errs = append(errs, fmt.Errorf("challenge.dnssec: must be %q (no DO bit), %q (bogus answers fail; the default) or %q (only DNSSEC-validated answers pass), got %q",
			DNSSECOff, DNSSECCheck, DNSSECRequire, c.DNSSEC))
	}
	if err := c.Perspectives.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, r := range c.AllowReservedRanges {
		if _, err := netip.ParsePrefix(strings.TrimSpace(r)); err != nil {
			errs = append(errs, fmt.Errorf("challenge.allow_reserved_ranges: %q is not a CIDR range (e.g. \"10.0.0.0/8\", \"fd00::/8\")", r))
		}
	}
	return errors.Join(errs...)
}

// ValidateResolvers reports the problems of challenge.resolvers, which only
// hallmark-worker needs: a worker without resolvers can neither validate a
// challenge nor check CAA (it never asks the system's resolver), so it would
// retry every validation and issuance until each was abandoned. The
// frontend and the CLI never look anything up, so they do not insist.
func (c Challenge) ValidateResolvers() error {
	var errs []error
	if len(c.Resolvers) == 0 {
		errs = append(errs, errors.New(`challenge.resolvers: the worker needs at least one DNS resolver (host:port, e.g. ["10.0.0.53:53"]) to validate challenges and check CAA; it never uses the system's`))
	}
	for _, r := range c.Resolvers {
		host, port, err := net.SplitHostPort(r)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			errs = append(errs, errors.New(`challenge.resolvers: `+strconv.Quote(r)+` is not host:port (e.g. "10.0.0.53:53")`))
		}
	}
	return errors.Join(errs...)
}

// Audit is the audit log's retention, [audit]. The worker's housekeeping
// deletes the issuance trail's events (store.AuditEvent.Trail) older than
// RetentionDays; operators' and system actions are kept for good.
type Audit struct {
	// RetentionDays is how long a trail event is kept; 0, the default,
	// keeps every one.
	RetentionDays int `toml:"retention_days"`
}

// Retention is retention_days as a duration, 0 for keeping every event.
func (a Audit) Retention() time.Duration {
	return time.Duration(a.RetentionDays) * 24 * time.Hour
}

// Validate reports the problems of [audit], each naming its key.
func (a Audit) Validate() error {
	if a.RetentionDays < 0 {
		return fmt.Errorf("audit.retention_days: must be 0 (keep every trail event) or more, got %d", a.RetentionDays)
	}
	return nil
}
