package storetest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/sqlstore"
)

// Extras is what the suite needs beyond the Store: a way to open more
// handles on the same database and to look at it directly.
type Extras struct {
	// Open returns another store on the same, migrated database through a
	// handle of its own (on SQLite, as good as another process). A nil ins
	// uses the dialect's River inserter.
	Open func(t *testing.T, ins jobs.Inserter) store.Store
	// Int runs a query returning one integer, on a handle of its own.
	Int func(t *testing.T, query string) int64
	// Exec runs a statement on a handle of its own.
	Exec func(t *testing.T, query string)
	// Migrate runs Hallmark's migration runner as a fresh process would.
	Migrate func(ctx context.Context) ([]int, error)
	// Status reports the database's migration status.
	Status func(ctx context.Context) (sqlstore.MigrationStatus, error)
	// Dialect is "postgres" or "sqlite", for a check that must read River's
	// JSON job arguments, which the two spell differently.
	Dialect string
	// ProcessNonces: the consumed-nonce set lives in the handle's memory
	// under an epoch of its own (SQLite), not in a table every handle
	// shares (PostgreSQL).
	ProcessNonces bool
}

// contract is the suite: each case runs on a fresh store of its own, in
// parallel with the others.
var contract = []struct {
	name string
	fn   func(t *testing.T, s store.Store, x Extras)
}{
	{"Now", testNow},
	{"NotFound", testNotFound},
	{"NonceKey", testNonceKey},
	{"NonceConsumedOnce", testNonceConsumedOnce},
	{"NonceBatch", testNonceBatch},
	{"NonceLookups", testNonceLookups},
	{"NonceMeanwhile", testNonceMeanwhile},
	{"NonceEpochReset", testNonceEpochReset},
	{"NonceGC", testNonceGC},
	{"AccountLifecycle", testAccountLifecycle},
	{"AccountThumbprintUnique", testAccountThumbprintUnique},
	{"AccountDeactivate", testAccountDeactivate},
	{"AccountsListPages", testAccountsListPages},
	{"OrderHappyPath", testOrderHappyPath},
	{"OrderReusesAuthz", testOrderReusesAuthz},
	{"OrderReuseRefusesUnusableAuthz", testOrderReuseRefusesUnusableAuthz},
	{"StaleValidations", testStaleValidations},
	{"IssueLapsed", testIssueLapsed},
	{"AuthzReusable", testAuthzReusable},
	{"AuthzReusableByMethod", testAuthzReusableByMethod},
	{"InvalidVerdict", testInvalidVerdict},
	{"Pauses", testPauses},
	{"VerdictIsTerminal", testVerdictIsTerminal},
	{"VerdictExpiresBy", testVerdictExpiresBy},
	{"LateVerdict", testLateVerdict},
	{"ConcurrentVerdicts", testConcurrentVerdicts},
	{"VerdictLeavesItsJob", testVerdictLeavesItsJob},
	{"ChallengeClaimConcurrent", testChallengeClaimConcurrent},
	{"SignedClaims", testSignedClaims},
	{"SignedOrders", testSignedOrders},
	{"OrderFinalizeConcurrent", testOrderFinalizeConcurrent},
	{"ClaimEnqueueAtomic", testClaimEnqueueAtomic},
	{"ClaimsAtOnce", testClaimsAtOnce},
	{"ClaimExpiredAuthz", testClaimExpiredAuthz},
	{"OrderFail", testOrderFail},
	{"CertificateSerialUnique", testCertificateSerialUnique},
	{"CertificatesList", testCertificatesList},
	{"OrdersList", testOrdersList},
	{"AuthzDeactivate", testAuthzDeactivate},
	{"Revoke", testRevoke},
	{"RevokeMany", testRevokeMany},
	{"RevokeManyConcurrent", testRevokeManyConcurrent},
	{"RevokeQueue", testRevokeQueue},
	{"RevokeRecorded", testRevokeRecorded},
	{"KeyCompromise", testKeyCompromise},
	{"KeyCompromiseAfterRevocation", testKeyCompromiseAfterRevocation},
	{"KeyBlocked", testKeyBlocked},
	{"KeySweep", testKeySweep},
	{"KeyHashBackfill", testKeyHashBackfill},
	{"UndeliveredRecord", testUndeliveredRecord},
	{"CRLMonotonic", testCRLMonotonic},
	{"CRLShards", testCRLShards},
	{"Leases", testLeases},
	{"Heartbeats", testHeartbeats},
	{"RateCounts", testRateCounts},
	{"RateCertificatesByDomain", testRateCertificatesByDomain},
	{"OrderLimitsReserved", testOrderLimitsReserved},
	{"Audit", testAudit},
	{"TrailWithItsRecord", testTrailWithItsRecord},
	{"TrailFindAndPrune", testTrailFindAndPrune},
	{"JobCarriesOrigin", testJobCarriesOrigin},
	{"IssuerPublish", testIssuerPublish},
	{"IssuersListed", testIssuersListed},
	{"IssuersMigrated", testIssuersMigrated},
	{"IssuerLifecycle", testIssuerLifecycle},
	{"IssuerKeyPlace", testIssuerKeyPlace},
	{"AdminViews", testAdminViews},
	{"Activity", testActivity},
	{"AdminSessions", testAdminSessions},
	{"AuditChain", testAuditChain},
	{"AuditChainPrune", testAuditChainPrune},
	{"AuditChainConcurrent", testAuditChainConcurrent},
	{"AuditedActions", testAuditedActions},
	{"Operators", testOperators},
	{"ExpirePending", testExpirePending},
	{"ExpirePendingUnusableAuthz", testExpirePendingUnusableAuthz},
	{"StrandedChallenge", testStrandedChallenge},
	{"StrandedOrder", testStrandedOrder},
	{"RenewalMove", testRenewalMove},
	{"OrderReplaces", testOrderReplaces},
	{"UpstreamRenewals", testUpstreamRenewals},
	{"UpstreamOrders", testUpstreamOrders},
	{"RelayTokens", testRelayTokens},
	{"ReloadRequested", testReloadRequested},
	{"Perspectives", testPerspectives},
	{"Corroborated", testCorroborated},
	{"UpstreamOrdersConcurrent", testUpstreamOrdersConcurrent},
	{"EABBindOnce", testEABBindOnce},
	{"AuthzCreate", testAuthzCreate},
	{"MigrationsIdempotent", testMigrationsIdempotent},
	{"MigrationsRefuseNewer", testMigrationsRefuseNewer},
}

// Run runs the contract suite, four cases at a time whatever go test's
// -parallel: the cases wait on the database, not the CPU. newStore returns
// a store on a fresh database to which Hallmark's and River's migrations
// have been applied.
func Run(t *testing.T, newStore func(t *testing.T) (store.Store, Extras)) {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, tc := range contract {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.Run(tc.name, func(t *testing.T) {
				s, x := newStore(t)
				tc.fn(t, s, x)
			})
		})
	}
	wg.Wait()
}

// --- fixtures ---

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func rnd(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func dbNow(t *testing.T, s store.Store) time.Time {
	t.Helper()
	now, err := s.Now(ctxT(t))
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	return now
}

func newAccount(t *testing.T, s store.Store) *store.Account {
	t.Helper()
	a, err := s.AccountCreate(ctxT(t), &store.Account{
		KeyJWK:      []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rnd(32) + `"}`),
		Thumbprint:  rnd(32),
		Contact:     []string{"mailto:ops@example.com"},
		TermsAgreed: true,
	})
	if err != nil {
		t.Fatalf("AccountCreate: %v", err)
	}
	return a
}

// orderSpec builds a NewOrder for names, each with http-01 and dns-01
// challenges, expiring in an hour on the database clock.
func orderSpec(t *testing.T, s store.Store, acct *store.Account, names ...string) store.NewOrder {
	t.Helper()
	now := dbNow(t, s)
	o := store.NewOrder{AccountID: acct.ID, Profile: "default", Expires: now.Add(time.Hour)}
	for _, n := range names {
		id := acme.Identifier{Type: acme.IdentifierDNS, Value: n}
		o.Identifiers = append(o.Identifiers, id)
		o.Authzs = append(o.Authzs, &store.Authorization{
			Identifier: id.Base(),
			Wildcard:   id.IsWildcard(),
			Expires:    now.Add(time.Hour),
			Challenges: []store.Challenge{{Type: acme.ChallengeHTTP01}, {Type: acme.ChallengeDNS01}},
		})
	}
	return o
}

func newOrder(t *testing.T, s store.Store, acct *store.Account, names ...string) *store.Order {
	t.Helper()
	o, err := s.OrderCreate(ctxT(t), store.SignedUse{}, orderSpec(t, s, acct, names...))
	if err != nil {
		t.Fatalf("OrderCreate: %v", err)
	}
	return o
}

func authz(t *testing.T, s store.Store, id string) *store.Authorization {
	t.Helper()
	a, err := s.AuthzByID(ctxT(t), id)
	if err != nil {
		t.Fatalf("AuthzByID(%s): %v", id, err)
	}
	return a
}

func order(t *testing.T, s store.Store, id string) *store.Order {
	t.Helper()
	o, err := s.OrderByID(ctxT(t), id)
	if err != nil {
		t.Fatalf("OrderByID(%s): %v", id, err)
	}
	return o
}

func challenge(t *testing.T, s store.Store, id string) *store.Challenge {
	t.Helper()
	c, err := ChallengeByID(ctxT(t), s, id)
	if err != nil {
		t.Fatalf("ChallengeByID(%s): %v", id, err)
	}
	return c
}

// validate claims the first challenge of an authorization and records the
// verdict.
func validate(t *testing.T, s store.Store, authzID string, status acme.Status) *store.Challenge {
	t.Helper()
	ctx := ctxT(t)
	a := authz(t, s, authzID)
	c, claimed, err := s.ChallengeClaim(ctx, store.SignedUse{}, a.Challenges[0].ID)
	if err != nil || !claimed {
		t.Fatalf("ChallengeClaim: claimed=%v err=%v", claimed, err)
	}
	v := store.Verdict{ChallengeID: c.ID, Status: status, ValidationRecord: []byte(`[{"url":"http://example.com/"}]`)}
	if status == acme.StatusInvalid {
		v.Error = &acme.Problem{Type: acme.ProblemIncorrectResponse, Detail: "the key authorization did not match"}
	}
	if err := s.ChallengeVerdict(ctx, v); err != nil {
		t.Fatalf("ChallengeVerdict: %v", err)
	}
	return c
}

// readyOrder creates an order for names and validates every authorization.
func readyOrder(t *testing.T, s store.Store, acct *store.Account, names ...string) *store.Order {
	t.Helper()
	o := newOrder(t, s, acct, names...)
	for _, id := range o.AuthzIDs {
		validate(t, s, id, acme.StatusValid)
	}
	o = order(t, s, o.ID)
	if o.Status != acme.StatusReady {
		t.Fatalf("order is %s after every authorization was validated, want ready", o.Status)
	}
	return o
}

// mustIssue is issue, failing the test if the certificate is not stored.
func mustIssue(t *testing.T, s store.Store, o *store.Order, serial string) {
	t.Helper()
	if err := issue(t, s, o, serial); err != nil {
		t.Fatalf("issuing %s for order %s: %v", serial, o.ID, err)
	}
}

func issue(t *testing.T, s store.Store, o *store.Order, serial string) error {
	t.Helper()
	return issueAs(t, s, o, serial, "issuer-1")
}

// issueAs is issue by the issuer id a backend records (a key identifier,
// relay:<name>, custom:<name>).
func issueAs(t *testing.T, s store.Store, o *store.Order, serial, issuer string) error {
	t.Helper()
	ctx := ctxT(t)
	now := dbNow(t, s)
	if o.Status == acme.StatusReady {
		if _, claimed, err := s.OrderFinalizeBegin(ctx, store.SignedUse{}, o.ID, o.Profile, []byte("csr"), nil); err != nil || !claimed {
			t.Fatalf("OrderFinalizeBegin: claimed=%v err=%v", claimed, err)
		}
	}
	var names []string
	for _, id := range o.Identifiers {
		names = append(names, id.Value)
	}
	return s.OrderIssued(ctx, store.Issued{OrderID: o.ID, Certificate: store.Certificate{
		Serial: serial, IssuerID: issuer, DER: []byte{0x30, 0x01}, ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n"),
		Names: names, NotBefore: now, NotAfter: now.Add(90 * 24 * time.Hour),
	}})
}

// reusable is AuthzsReusable for one identifier, none being
// store.ErrNotFound.
func reusable(ctx context.Context, s store.Store, accountID string, id acme.Identifier, wildcard bool, minExpiry time.Time) (*store.Authorization, error) {
	found, err := s.AuthzsReusable(ctx, accountID, []store.AuthzKey{{Identifier: id, Wildcard: wildcard}}, nil, minExpiry)
	if err != nil {
		return nil, err
	}
	if found[0] == nil {
		return nil, store.ErrNotFound
	}
	return found[0], nil
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

func jobCount(t *testing.T, x Extras, kind string) int64 {
	t.Helper()
	return x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+kind+"'")
}

// jobsIn counts the jobs of kind in state.
func jobsIn(t *testing.T, x Extras, kind, state string) int64 {
	t.Helper()
	return x.Int(t, "SELECT count(*) FROM river_job WHERE kind = '"+kind+"' AND state = '"+state+"'")
}

// failingInserter refuses every job, as a full or broken queue would.
type failingInserter struct{}

var errQueueDown = errors.New("queue is down")

func (failingInserter) InsertTx(context.Context, jobs.Tx, river.JobArgs) (int64, bool, error) {
	return 0, false, errQueueDown
}

// silentInserter accepts every job and sends nothing: the claim's swap,
// held to travel with the job's insert, must then go out alone.
type silentInserter struct{}

func (silentInserter) InsertTx(context.Context, jobs.Tx, river.JobArgs) (int64, bool, error) {
	return 0, true, nil
}
