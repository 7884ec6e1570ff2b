package relay

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
	"github.com/hallmark-ca/hallmark/store"
)

// Journal is where the backend records each upstream order it places, for
// the Hallmark order it is placed for, before finalizing it: an attempt
// that dies after the upstream issued (a worker killed, a timeout, a
// connection lost while the certificate downloads) is resumed by the
// retry, on any worker, instead of placing a second order, which would be
// a second upstream certificate Hallmark has no record of, and a second
// count against a public CA's rate limits. The store is one
// (store.UpstreamOrders).
type Journal interface {
	UpstreamOrderRecord(ctx context.Context, o store.UpstreamOrder, replaces string) error
	UpstreamOrderFor(ctx context.Context, orderID, backend string) (*store.UpstreamOrder, error)
}

// Config is one [backends.<name>] of type relay: its settings from the
// file (DirectoryURL, AccountKey, Contact, CACert, Challenge,
// RenewalInfoPerRun) and what the worker adds.
type Config struct {
	signerconf.Relay
	Name    string
	Timeout time.Duration
	Logger  *slog.Logger
	// Transport, if set, carries the requests to the upstream instead of
	// one built with CACert: tests put a fault between the relay and
	// Pebble with it.
	Transport http.RoundTripper
	// Journal records the upstream orders placed (required).
	Journal Journal
	// Tokens holds the http-01 answers the frontend serves (required
	// with challenge_strategy "http01"; the store is one).
	Tokens Tokens
}

// Tokens is where the relay stores the key authorization of an upstream
// http-01 token for the frontend's public http listener to serve, and
// removes it once the authorization is decided (store.RelayTokens).
type Tokens interface {
	RelayTokenPut(ctx context.Context, backend, token, keyAuthorization string, ttl time.Duration) error
	RelayTokenDelete(ctx context.Context, token string) error
}

// Backend relays orders to the upstream CA.
type Backend struct {
	cfg    Config
	client *xacme.Client
	// dns publishes the dns-01 records (challenge_strategy "dns01"),
	// nil otherwise.
	dns *dnsPublisher
	// eab binds the upstream account at registration (eab_kid), nil
	// for none.
	eab *xacme.ExternalAccountBinding

	mu         sync.Mutex
	registered bool
	// account is the upstream account's URL (its KID), known once
	// registered: the journal names the account that placed each order.
	account string
	// ariURL is the upstream directory's renewalInfo ("" for none), read
	// at ariRead; ariPaused is the end of a Retry-After the upstream gave
	// with a 429 or 5xx to a renewalInfo request (ari.go).
	ariMu     sync.Mutex // not mu: register holds that over a request
	ariURL    string
	ariRead   time.Time
	ariPaused time.Time
}

// New loads (or creates) the account key and builds the client. It does not
// contact the upstream: a worker starts while the upstream is down, and its
// /readyz says so.
func New(cfg Config) (*Backend, error) {
	if cfg.Journal == nil {
		return nil, fmt.Errorf("backends.%s: the relay backend was built without a journal of its upstream orders; a worker restarted mid-issuance would place a second upstream order", cfg.Name)
	}
	key, err := accountKey(cfg.AccountKey)
	if err != nil {
		return nil, fmt.Errorf("backends.%s.account_key: %w", cfg.Name, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CACert != "" {
		pemBytes, err := os.ReadFile(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("backends.%s.ca_cert: %w", cfg.Name, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("backends.%s.ca_cert: %s holds no PEM certificate", cfg.Name, cfg.CACert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.Challenge == "" {
		cfg.Challenge = "http-01"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var rt http.RoundTripper = tr
	if cfg.Transport != nil {
		rt = cfg.Transport
	}
	b := &Backend{cfg: cfg, client: &xacme.Client{
		Key: key, DirectoryURL: cfg.DirectoryURL,
		HTTPClient: &http.Client{Transport: rt, Timeout: cfg.Timeout},
		UserAgent:  "hallmark-relay",
	}}
	if b.eab, err = binding(cfg.Name, cfg.Relay); err != nil {
		return nil, err
	}
	if cfg.ChallengeStrategy == "http01" && cfg.Tokens == nil {
		return nil, fmt.Errorf("backends.%s: challenge_strategy http01 was built without a store for its http-01 answers", cfg.Name)
	}
	if cfg.ChallengeStrategy == "dns01" {
		if b.dns, err = newDNSPublisher(cfg.Name, cfg.Relay); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// IssuerID names the backend in certificate rows.
func (b *Backend) IssuerID() string { return "relay:" + b.cfg.Name }

// Ready fetches the upstream's directory.
func (b *Backend) Ready(ctx context.Context) error {
	if _, err := b.client.Discover(ctx); err != nil {
		return fmt.Errorf("%w: the upstream ACME directory %s: %v", signer.ErrUnavailable, b.cfg.DirectoryURL, err)
	}
	return nil
}

// register creates the upstream account once (an existing one is fine)
// and returns its URL.
func (b *Backend) register(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.registered {
		return b.account, nil
	}
	contact := make([]string, 0, len(b.cfg.Contact))
	for _, c := range b.cfg.Contact {
		if !strings.Contains(c, ":") {
			c = "mailto:" + c
		}
		contact = append(contact, c)
	}
	_, err := b.client.Register(ctx, &xacme.Account{Contact: contact, ExternalAccountBinding: b.eab}, xacme.AcceptTOS)
	if err != nil && !errors.Is(err, xacme.ErrAccountAlreadyExists) {
		return "", b.classify("registering the upstream account", err)
	}
	// Register keeps the account's URL as the client's KID, for an
	// account that existed too.
	if b.client.KID == "" {
		return "", fmt.Errorf("%w: registering the upstream account at %s: the upstream named no account URL", signer.ErrUnavailable, b.cfg.DirectoryURL)
	}
	b.account, b.registered = string(b.client.KID), true
	return b.account, nil
}

// Issue places the upstream order and finalizes it with the order's CSR,
// or resumes the one an earlier attempt placed for the same Hallmark order
// (r.OrderID), on any worker with the same account key.
func (b *Backend) Issue(ctx context.Context, r signer.Request, csr *x509.CertificateRequest) (*signer.Issued, error) {
	if r.OrderID == "" {
		// A caller's bug, not the request's: without the order there is
		// no journal entry, and nothing to resume a lost attempt by.
		return nil, acme.Internal(fmt.Errorf("relay backend %s: the request names no Hallmark order, so its upstream order could not be journaled", b.cfg.Name))
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	account, err := b.register(ctx)
	if err != nil {
		return nil, err
	}
	chain, err := b.obtain(ctx, account, r, csr)
	if err != nil {
		return nil, err
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("%w: the upstream returned an empty chain", signer.ErrUnavailable)
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("the upstream's certificate does not parse: %w", err))
	}
	if pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(csr.PublicKey) {
		return nil, acme.Internal(errors.New("the upstream returned a certificate for another key than the CSR's"))
	}
	var sb strings.Builder
	for _, der := range chain {
		_ = pem.Encode(&sb, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	b.cfg.Logger.Info("certificate obtained from the upstream CA", "backend", b.cfg.Name, "serial", signer.SerialHex(leaf.SerialNumber), "profile", r.ProfileName)
	return &signer.Issued{Serial: leaf.SerialNumber, SerialHex: signer.SerialHex(leaf.SerialNumber), DER: leaf.Raw,
		ChainPEM: []byte(sb.String()), NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter}, nil
}

// obtain gets the certificate chain for csr from the upstream: from the
// order the journal holds for r.OrderID when this account placed it and it
// can still issue, else from a new order, journaled before it is
// finalized.
func (b *Backend) obtain(ctx context.Context, account string, r signer.Request, csr *x509.CertificateRequest) ([][]byte, error) {
	o, replaces, err := b.resume(ctx, account, r.OrderID)
	if err != nil {
		return nil, err
	}
	if o == nil {
		var ids []xacme.AuthzID
		for _, id := range r.Names {
			ids = append(ids, xacme.AuthzID{Type: string(id.Type), Value: id.Value})
		}
		var opts []xacme.OrderOption
		if r.Profile.AllowValidityRequest && r.NotBefore != nil {
			opts = append(opts, xacme.WithOrderNotBefore(*r.NotBefore))
		}
		if r.Profile.AllowValidityRequest && r.NotAfter != nil {
			opts = append(opts, xacme.WithOrderNotAfter(*r.NotAfter))
		}
		placed, err := b.client.AuthorizeOrder(ctx, ids, opts...)
		if err != nil {
			return nil, b.classify("placing the upstream order", err)
		}
		// Journaled before it is finalized: an upstream order never
		// finalized issues nothing, so when the journal cannot take it,
		// it is left so and the retry places another.
		err = b.cfg.Journal.UpstreamOrderRecord(ctx, store.UpstreamOrder{OrderID: r.OrderID, Backend: b.cfg.Name,
			AccountURL: account, OrderURL: placed.URI}, replaces)
		if err != nil {
			return nil, fmt.Errorf("%w: upstream order %s for order %s was placed but not journaled, so it is not finalized (the retry resumes or places one): %v",
				signer.ErrUnavailable, placed.URI, r.OrderID, err)
		}
		o = placed
	}
	orderURL := o.URI // responses to POST-as-GET carry no Location
	if o.Status == xacme.StatusValid || o.Status == xacme.StatusProcessing {
		return b.certificate(ctx, orderURL) // finalized by an earlier attempt
	}
	for _, u := range o.AuthzURLs {
		z, err := b.client.GetAuthorization(ctx, u)
		if err != nil {
			return nil, b.classify("reading an upstream authorization", err)
		}
		if z.Status != xacme.StatusPending {
			continue
		}
		if err := b.authorize(ctx, z); err != nil {
			return nil, err
		}
	}
	o, err = b.client.WaitOrder(ctx, orderURL)
	if err != nil {
		return nil, b.classify("waiting for the upstream order", err)
	}
	chain, _, err := b.client.CreateOrderCert(ctx, o.FinalizeURL, csr.Raw, true)
	var ae *xacme.Error
	if err != nil && !errors.As(err, &ae) {
		// x/crypto/acme follows a Location header on the finalize response,
		// which RFC 8555 §7.4 does not require (Pebble sends none): wait on
		// the order URL we already know and fetch the certificate.
		return b.certificate(ctx, orderURL)
	}
	if err != nil {
		return nil, b.classify("finalizing the upstream order", err)
	}
	return chain, nil
}

// resume is the upstream order the journal holds for orderID, when this
// account placed it and it can still issue (not invalid), read anew from
// the upstream; nil when a new one must be placed, and then replaces is
// the journaled order URL it takes the place of ("" for none).
func (b *Backend) resume(ctx context.Context, account, orderID string) (o *xacme.Order, replaces string, err error) {
	j, err := b.cfg.Journal.UpstreamOrderFor(ctx, orderID, b.cfg.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		// Not knowing whether an order was placed, placing one could be
		// the second certificate: the attempt could not happen.
		return nil, "", fmt.Errorf("%w: reading the journal of upstream orders for order %s: %v", signer.ErrUnavailable, orderID, err)
	}
	if j.AccountURL != account {
		// Only the account that placed it can read or finalize it: a
		// worker with another account key. If that worker finalized it,
		// its certificate is live upstream and Hallmark never stores it.
		b.cfg.Logger.Warn("the upstream order placed for this order belongs to another upstream account, which this worker cannot resume; placing a new one. "+
			"If the other was finalized, its certificate is an orphan at the upstream (revoke it with that account); give every worker mounting this relay the same account_key",
			"backend", b.cfg.Name, "order", orderID, "orphan_upstream_order", j.OrderURL, "orphan_account", j.AccountURL,
			"placed_at", j.PlacedAt, "account", account)
		return nil, j.OrderURL, nil
	}
	got, err := b.client.GetOrder(ctx, j.OrderURL)
	var gone *xacme.Error
	if errors.As(err, &gone) && gone.StatusCode == http.StatusNotFound {
		// The upstream no longer has it (it removes orders some time
		// after they expire; a job recovered days later meets this): not
		// a verdict on the Hallmark order, whose names are still
		// authorized here. A new order replaces it, and the replacement's
		// audit event keeps its URL.
		b.cfg.Logger.Warn("the upstream no longer knows the upstream order an earlier attempt placed; placing a new one", "backend", b.cfg.Name,
			"order", orderID, "upstream_order", j.OrderURL, "placed_at", j.PlacedAt)
		return nil, j.OrderURL, nil
	}
	if err != nil {
		return nil, "", b.classify("reading the upstream order placed earlier", err)
	}
	if got.Status == xacme.StatusInvalid {
		b.cfg.Logger.Info("the upstream order an earlier attempt placed is invalid; placing a new one", "backend", b.cfg.Name, "order", orderID, "upstream_order", j.OrderURL)
		return nil, j.OrderURL, nil
	}
	b.cfg.Logger.Info("resuming the upstream order an earlier attempt placed", "backend", b.cfg.Name, "order", orderID, "upstream_order", got.URI, "status", got.Status)
	return got, "", nil
}

// certificate waits for the finalized upstream order at orderURL to be
// valid and downloads its certificate chain.
func (b *Backend) certificate(ctx context.Context, orderURL string) ([][]byte, error) {
	o, err := b.client.WaitOrder(ctx, orderURL)
	if err != nil {
		return nil, b.classify("waiting for the finalized upstream order", err)
	}
	chain, err := b.client.FetchCert(ctx, o.CertURL, true)
	if err != nil {
		return nil, b.classify("fetching the upstream certificate", err)
	}
	return chain, nil
}

// Revoke revokes at the upstream with the account key.
func (b *Backend) Revoke(ctx context.Context, serial string, der []byte, reason int) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	if _, err := b.register(ctx); err != nil {
		return err
	}
	if err := b.client.RevokeCert(ctx, nil, der, xacme.CRLReasonCode(reason)); err != nil {
		return b.classify("revoking "+serial+" at the upstream", err)
	}
	return nil
}

// verdicts are upstream problems about the request itself: passed on to the
// order (or the revocation) as they are. Anything else (rate limits, server
// errors, network errors, bad nonces) means the attempt could not happen.
var verdicts = map[string]bool{
	"badCSR": true, "rejectedIdentifier": true, "unsupportedIdentifier": true, "caa": true,
	"badRevocationReason": true, "alreadyRevoked": true, "unauthorized": true, "malformed": true,
	"badSignatureAlgorithm": true, "badPublicKey": true, "invalidProfile": true, "compound": true,
	"dns": true, "connection": true, "incorrectResponse": true, "tls": true,
}

func (b *Backend) classify(what string, err error) error {
	var ae *xacme.Error
	if errors.As(err, &ae) {
		short := strings.TrimPrefix(ae.ProblemType, "urn:ietf:params:acme:error:")
		if verdicts[short] && ae.StatusCode < 500 {
			return acme.New(acme.ProblemType("urn:ietf:params:acme:error:"+short), "the upstream CA refused (%s): %s", what, ae.Detail)
		}
		return fmt.Errorf("%w: %s at %s: %v", signer.ErrUnavailable, what, b.cfg.DirectoryURL, err)
	}
	var azErr *xacme.AuthorizationError
	if errors.As(err, &azErr) {
		return acme.New(acme.ProblemUnauthorized, "the upstream CA did not authorize %s: %v", azErr.Identifier, azErr)
	}
	var oe *xacme.OrderError
	if errors.As(err, &oe) {
		return acme.New(acme.ProblemUnauthorized, "the upstream order became %s", oe.Status)
	}
	return fmt.Errorf("%w: %s at %s: %v", signer.ErrUnavailable, what, b.cfg.DirectoryURL, err)
}

// accountKey reads the PEM account key at path, creating it if missing.
func accountKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
			f.Close()
			return nil, err
		}
		return key, f.Close()
	}
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	var k any
	switch blk.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("%s: PEM block %q is not a private key", path, blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: a %T cannot sign", path, k)
	}
	return s, nil
}
