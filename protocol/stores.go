package protocol

import (
	"context"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/renewal"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store"
)

// stores is the store as each group of handlers sees it, the part it
// uses; New fills every part from its one store.Store.
type stores struct {
	accounts accountStore
	orders   orderStore
	verify   verifyStore
	certs    certStore
	limits   limitStore
	trail    interface { // trail.go: the issuance trail, and other audit events
		AuditRecord(ctx context.Context, ev store.AuditEvent) error
	}
	relay interface { // relaytoken.go: a relay's upstream http-01 answers
		RelayTokenGet(ctx context.Context, token string) (string, error)
	}
	blocked interface { // blockedkey.go: keys reported compromised
		KeyBlockedBy(ctx context.Context, spkiHash []byte) (*store.BlockedKey, error)
	}
	ping interface {
		Ping(ctx context.Context) error
	}
	pauses pauseStore // pause.go, unpause.go: accounts paused for identifiers they keep failing
}

// accountStore is the account handlers' (account.go, eab.go): RFC 8555
// §7.3, and external account binding (§7.3.4).
type accountStore interface {
	AccountByThumbprint(ctx context.Context, thumbprint string) (*store.Account, error)
	AccountCreateTrailed(ctx context.Context, a *store.Account, keyID string, ev store.AuditEvent) (*store.Account, error)
	AccountDeactivate(ctx context.Context, id string) (*store.Account, error)
	AccountEAB(ctx context.Context, accountID string) (*store.EABKey, error)
	AccountKeyChange(ctx context.Context, id, oldThumb string, newJWK []byte, newThumb string) (*store.Account, error)
	AccountUpdate(ctx context.Context, id string, contact []string) (*store.Account, error)
	OrdersByAccount(ctx context.Context, accountID string, p store.Page) ([]string, string, error)
	EABByID(ctx context.Context, id string) (*store.EABKey, error)
}

// orderStore is newOrder's, newAuthz's and finalize's, and the
// authorization and challenge handlers' (§7.4, §7.5).
type orderStore interface {
	OrderCreate(ctx context.Context, u store.SignedUse, o store.NewOrder) (*store.Order, error)
	AuthzsReusable(ctx context.Context, accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) ([]*store.Authorization, error)
	AuthzCreate(ctx context.Context, a *store.Authorization, limits store.OrderLimits) (*store.Authorization, error)
	AuthzDeactivate(ctx context.Context, id string) (*store.Authorization, error)
	OrderFinalizeBegin(ctx context.Context, u store.SignedUse, orderID, profile string, csrDER, keyHash []byte) (*store.Order, bool, error)
	ChallengeClaim(ctx context.Context, u store.SignedUse, challengeID string) (*store.Challenge, bool, error)
}

// verifyStore is what every signed request reads while its signature is
// checked (verify.go, ahead.go).
type verifyStore interface {
	OrderByID(ctx context.Context, id string) (*store.Order, error)
	AuthzByID(ctx context.Context, id string) (*store.Authorization, error)
	ChallengeWithAuthz(ctx context.Context, challengeID string) (*store.ChallengeAuthz, error)
	CertificateBySerial(ctx context.Context, serial string) (*store.Certificate, error)
}

// certStore is the certificate, CRL, renewal information and revocation
// handlers' (cert.go, crl.go, ari.go, revoke.go), with what the shared
// revocation and renewal services take.
type certStore interface {
	revocation.Store
	renewal.Store
	CRLShardLatest(ctx context.Context, issuerID string, shard int) (*store.CRL, error)
	IssuerCert(ctx context.Context, id string) ([]byte, error)
	IssuerChains(ctx context.Context, id string) ([][]byte, error)
	AuthzsReusable(ctx context.Context, accountID string, keys []store.AuthzKey, methods []acme.ChallengeType, minExpiry time.Time) ([]*store.Authorization, error)
}

// limitStore is the counts of the rate limits read before a request's
// transaction (ratelimit.go); those on what a request creates are reserved
// in it (OrderCreate, AuthzCreate).
type limitStore interface {
	RateFailedValidations(ctx context.Context, accountID string, id acme.Identifier, window time.Duration) (store.RateCount, error)
	RateCertificates(ctx context.Context, registeredDomain string, window time.Duration) (store.RateCount, error)
}
