package protocol_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/policy"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/serverconf"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

const issuerID = "test-issuer"

// env is one frontend on a real store, served on a loopback port.
type env struct {
	kind string // "sqlite" or "postgres"
	url  string // the database URL
	st   store.Store
	srv  *protocol.Server
	base string
	cfg  protocol.Config
	hc   *http.Client

	caKey  *ecdsa.PrivateKey
	caCert *x509.Certificate
}

// testConfig is the configuration every test starts from: a local profile
// (the default), a relay profile, and one that honours notBefore/notAfter.
func testConfig() protocol.Config {
	cfg := protocol.Config{Server: serverconf.DefaultServer(), Policy: policy.Config{MaxIdentifiers: policy.DefaultMaxIdentifiers},
		Profiles: map[string]profile.Profile{"default": profile.Default()}, DefaultProfile: "default"}
	cfg.Server.TermsOfService = "https://hallmark.example/terms"
	cfg.Server.Website = "https://hallmark.example/"
	cfg.Server.RequestTimeoutMS = 5000
	cfg.Server.RetryAfterSeconds = 2
	cfg.Server.MaxBodyBytes = 16 << 10
	cfg.Policy.DenyDomains = []string{"denied.example"}
	def := cfg.Profiles["default"]
	relay := def
	relay.Description, relay.Backend, relay.Signer = "relayed to an upstream CA", "relay", "up"
	short := def
	short.Description, short.AllowValidityRequest, short.ValidityHours = "short-lived, validity on request", true, 48
	cfg.Profiles["relay"] = relay
	cfg.Profiles["short"] = short
	return cfg
}

// withStores runs f against a fresh SQLite file and a fresh PostgreSQL
// database, as subtests /sqlite and /postgres.
func withStores(t *testing.T, mutate func(*protocol.Config), f func(t *testing.T, e *env)) {
	t.Helper()
	withWrappedStores(t, mutate, nil, nil, f)
}

// withWrappedStores is withStores with the store wrapped (to inject one
// fault) and the server's log captured.
func withWrappedStores(t *testing.T, mutate func(*protocol.Config), wrap func(store.Store) store.Store, logs io.Writer, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, newEnv(t, kind, mutate, wrap, logs))
		})
	}
}

func newEnv(t *testing.T, kind string, mutate func(*protocol.Config), wrap func(store.Store) store.Store, logs io.Writer) *env {
	t.Helper()
	var url string
	if kind == "postgres" {
		url = testdb.Postgres(t)
	} else {
		url = testdb.SQLite(t)
	}
	return newEnvVia(t, kind, url, url, mutate, wrap, logs)
}

// newEnvVia is newEnv on the database at url, which the frontend's store
// reaches at via (a testdb.Link's URL, for an outage) and the test's own
// checks at url; opts change the server's Options.
func newEnvVia(t *testing.T, kind, url, via string, mutate func(*protocol.Config), wrap func(store.Store) store.Store, logs io.Writer, opts ...func(*protocol.Options)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := open.Migrate(ctx, url); err != nil {
		t.Fatalf("migrating %s: %v", kind, err)
	}
	db, err := open.Open(ctx, via, 4)
	if err != nil {
		t.Fatalf("opening %s: %v", kind, err)
	}
	t.Cleanup(func() { _ = db.Store.Close() })

	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	cfg.Server.BaseURL = "http://" + ts.Listener.Addr().String()
	st := db.Store
	if wrap != nil {
		st = wrap(st)
	}
	var logw io.Writer = testWriter{t}
	if logs != nil {
		logw = io.MultiWriter(logw, logs)
	}
	o := protocol.Options{Logger: slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, f := range opts {
		f(&o)
	}
	srv, err := protocol.New(cfg, st, o)
	if err != nil {
		t.Fatalf("protocol.New: %v", err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)

	e := &env{kind: kind, url: url, st: st, srv: srv, base: cfg.Server.BaseURL, cfg: cfg, hc: ts.Client()}
	e.caKey, e.caCert = newCA(t)
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// response is an HTTP answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) problem(t *testing.T) acme.Problem {
	t.Helper()
	var p acme.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("response is not a problem document: %v: %s", err, r.body)
	}
	return p
}

func (r *response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r *response) links(rel string) []string {
	var out []string
	for _, l := range r.header.Values("Link") {
		for _, part := range strings.Split(l, ",") {
			part = strings.TrimSpace(part)
			if strings.HasSuffix(part, `rel="`+rel+`"`) {
				out = append(out, strings.Trim(strings.SplitN(part, ">", 2)[0], "<"))
			}
		}
	}
	return out
}

func (e *env) do(t *testing.T, req *http.Request) *response {
	t.Helper()
	res, err := e.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return &response{status: res.StatusCode, header: res.Header, body: body}
}

func (e *env) get(t *testing.T, method, path string) *response {
	t.Helper()
	req, _ := http.NewRequest(method, e.base+path, nil)
	return e.do(t, req)
}

func (e *env) nonce(t *testing.T) string {
	t.Helper()
	r := e.get(t, http.MethodHead, "/acme/new-nonce")
	n := r.header.Get("Replay-Nonce")
	if n == "" {
		t.Fatalf("new-nonce gave no Replay-Nonce (status %d)", r.status)
	}
	return n
}

// account is a client key and, once registered, its account URL.
type account struct {
	key crypto.Signer
	alg jose.SignatureAlgorithm
	kid string
}

// joseKey is a's key as go-jose signs with it: the key itself for the
// types go-jose knows, else through its OpaqueSigner (a key crypto/rsa will
// not sign with, goodkeytest's).
func (a *account) joseKey() any {
	switch a.key.(type) {
	case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
		return a.key
	}
	return opaqueKey{a.key, a.alg}
}

// opaqueKey signs RS256 with any crypto.Signer.
type opaqueKey struct {
	s   crypto.Signer
	alg jose.SignatureAlgorithm
}

func (o opaqueKey) Public() *jose.JSONWebKey        { return &jose.JSONWebKey{Key: o.s.Public()} }
func (o opaqueKey) Algs() []jose.SignatureAlgorithm { return []jose.SignatureAlgorithm{o.alg} }
func (o opaqueKey) SignPayload(payload []byte, alg jose.SignatureAlgorithm) ([]byte, error) {
	if alg != jose.RS256 {
		return nil, fmt.Errorf("opaqueKey signs RS256 only, not %s", alg)
	}
	h := sha256.Sum256(payload)
	return o.s.Sign(rand.Reader, h[:], crypto.SHA256)
}

func newKey(t *testing.T) *account {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &account{key: k, alg: jose.ES256}
}

// signOpts changes how one request is signed, for hostile tests.
type signOpts struct {
	nonce  string // default: a fresh one
	url    string // default: the request URL
	useJWK bool   // sign with a jwk header even when the account has a kid
	kid    string // override the kid
}

func (e *env) sign(t *testing.T, a *account, url string, payload []byte, o signOpts) []byte {
	t.Helper()
	if o.nonce == "" {
		o.nonce = e.nonce(t)
	}
	if o.url == "" {
		o.url = url
	}
	so := &jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{"nonce": o.nonce, "url": o.url}}
	kid := a.kid
	if o.kid != "" {
		kid = o.kid
	}
	if kid == "" || o.useJWK {
		so.EmbedJWK = true
	} else {
		so.ExtraHeaders["kid"] = kid
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: a.alg, Key: a.joseKey()}, so)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	return flattened(t, sig.FullSerialize())
}

// flattened puts back the "payload" member go-jose leaves out when it is
// empty: RFC 8555 §6.3 POST-as-GET sends "payload": "".
func flattened(t *testing.T, full string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(full), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["payload"]; !ok {
		m["payload"] = ""
	}
	b, _ := json.Marshal(m)
	return b
}

func (e *env) postRaw(t *testing.T, url, contentType string, body []byte) *response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	return e.do(t, req)
}

// post signs payload (nil → POST-as-GET) and POSTs it to url.
func (e *env) post(t *testing.T, a *account, url string, payload any, o ...signOpts) *response {
	t.Helper()
	var raw []byte
	switch p := payload.(type) {
	case nil:
	case []byte:
		raw = p
	case string:
		raw = []byte(p)
	default:
		var err error
		if raw, err = json.Marshal(p); err != nil {
			t.Fatal(err)
		}
	}
	var opt signOpts
	if len(o) > 0 {
		opt = o[0]
	}
	return e.postRaw(t, url, "application/jose+json", e.sign(t, a, url, raw, opt))
}

// register creates an account for a new key.
func (e *env) register(t *testing.T) *account {
	t.Helper()
	a := newKey(t)
	r := e.post(t, a, e.base+"/acme/new-account", map[string]any{"termsOfServiceAgreed": true, "contact": []string{"mailto:ops@hallmark.example"}})
	wantStatus(t, r, http.StatusCreated)
	a.kid = r.header.Get("Location")
	if !strings.HasPrefix(a.kid, e.base+"/acme/acct/") {
		t.Fatalf("new-account Location = %q", a.kid)
	}
	return a
}

type orderJSON struct {
	Status         acme.Status       `json:"status"`
	Expires        string            `json:"expires"`
	Identifiers    []acme.Identifier `json:"identifiers"`
	NotBefore      string            `json:"notBefore"`
	NotAfter       string            `json:"notAfter"`
	Authorizations []string          `json:"authorizations"`
	Finalize       string            `json:"finalize"`
	Certificate    string            `json:"certificate"`
	Profile        string            `json:"profile"`
	Error          *acme.Problem     `json:"error"`
}

type challJSON struct {
	Type   string        `json:"type"`
	URL    string        `json:"url"`
	Status acme.Status   `json:"status"`
	Token  string        `json:"token"`
	Error  *acme.Problem `json:"error"`
}

type authzJSON struct {
	Identifier acme.Identifier `json:"identifier"`
	Status     acme.Status     `json:"status"`
	Expires    string          `json:"expires"`
	Challenges []challJSON     `json:"challenges"`
	Wildcard   bool            `json:"wildcard"`
}

func dnsIDs(names ...string) []acme.Identifier {
	ids := make([]acme.Identifier, len(names))
	for i, n := range names {
		ids[i] = acme.Identifier{Type: acme.IdentifierDNS, Value: n}
	}
	return ids
}

// newOrder creates an order and returns it and its URL.
func (e *env) newOrder(t *testing.T, a *account, ids []acme.Identifier) (orderJSON, string) {
	t.Helper()
	r := e.post(t, a, e.base+"/acme/new-order", map[string]any{"identifiers": ids})
	wantStatus(t, r, http.StatusCreated)
	var o orderJSON
	r.json(t, &o)
	return o, r.header.Get("Location")
}

func (e *env) authz(t *testing.T, a *account, url string) authzJSON {
	t.Helper()
	r := e.post(t, a, url, nil)
	wantStatus(t, r, http.StatusOK)
	var az authzJSON
	r.json(t, &az)
	return az
}

func lastSegment(u string) string { return u[strings.LastIndexByte(u, '/')+1:] }

// validate plays the client's challenge POST and the worker's verdict
// (store.ChallengeVerdict: no worker runs in these tests) for every pending
// authorization of the order.
func (e *env) validate(t *testing.T, a *account, o orderJSON) {
	t.Helper()
	for _, u := range o.Authorizations {
		az := e.authz(t, a, u)
		if az.Status == acme.StatusValid {
			continue
		}
		ch := az.Challenges[0]
		r := e.post(t, a, ch.URL, map[string]any{})
		wantStatus(t, r, http.StatusOK)
		if err := e.st.ChallengeVerdict(context.Background(), store.Verdict{ChallengeID: lastSegment(ch.URL), Status: acme.StatusValid}); err != nil {
			t.Fatalf("ChallengeVerdict: %v", err)
		}
	}
}

func (e *env) getOrder(t *testing.T, a *account, url string) orderJSON {
	t.Helper()
	r := e.post(t, a, url, nil)
	wantStatus(t, r, http.StatusOK)
	var o orderJSON
	r.json(t, &o)
	return o
}

func csrFor(t *testing.T, key crypto.Signer, names ...string) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: names}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newCA(t *testing.T) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Hallmark Test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return k, c
}

// issued is a certificate the test "signed" in the worker's place.
type issued struct {
	der      []byte
	key      *ecdsa.PrivateKey
	serial   string
	orderURL string
	certURL  string
}

// issue runs an order through the API up to finalize, then stands in for the
// worker: signs with the test CA and records it with store.OrderIssued.
func (e *env) issue(t *testing.T, a *account, profile string, names ...string) issued {
	t.Helper()
	return e.issueAs(t, a, profile, nil, names...)
}

// issueAs is issue with the certificate's template changed by edit (nil:
// unchanged), for a certificate a backend might return that Hallmark's own
// signer would not make.
func (e *env) issueAs(t *testing.T, a *account, profile string, edit func(*x509.Certificate), names ...string) issued {
	t.Helper()
	payload := map[string]any{"identifiers": dnsIDs(names...)}
	if profile != "" {
		payload["profile"] = profile
	}
	r := e.post(t, a, e.base+"/acme/new-order", payload)
	wantStatus(t, r, http.StatusCreated)
	var o orderJSON
	r.json(t, &o)
	orderURL := r.header.Get("Location")
	e.validate(t, a, o)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	r = e.post(t, a, o.Finalize, map[string]any{"csr": b64(csrFor(t, leafKey, names...))})
	wantStatus(t, r, http.StatusOK)

	sn, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	tmpl := &x509.Certificate{SerialNumber: sn, DNSNames: names, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(48 * time.Hour)}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, e.caCert, leafKey.Public(), e.caKey)
	if err != nil {
		t.Fatal(err)
	}
	serial := fmt.Sprintf("%x", sn)
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.caCert.Raw})...)
	if profile == "" {
		profile = "default"
	}
	issuer := issuerID
	if p := e.cfg.Profiles[profile]; p.Backend == "relay" || p.Backend == "custom" {
		issuer = p.Backend + ":" + p.Signer // as signer/relay and signer/custom record it
	}
	err = e.st.OrderIssued(context.Background(), store.Issued{OrderID: lastSegment(orderURL), Certificate: store.Certificate{
		Serial: serial, OrderID: lastSegment(orderURL), AccountID: lastSegment(a.kid), IssuerID: issuer, Profile: profile,
		DER: der, ChainPEM: chain, Names: names, NotBefore: tmpl.NotBefore, NotAfter: tmpl.NotAfter, IssuedAt: time.Now(),
	}})
	if err != nil {
		t.Fatalf("OrderIssued: %v", err)
	}
	got := e.getOrder(t, a, orderURL)
	if got.Status != acme.StatusValid || got.Certificate == "" {
		t.Fatalf("order after issuance: status %s certificate %q", got.Status, got.Certificate)
	}
	return issued{der: der, key: leafKey, serial: serial, orderURL: orderURL, certURL: got.Certificate}
}

// jobCount counts River jobs of kind, straight from the queue's table.
func (e *env) jobCount(t *testing.T, kind string) int {
	t.Helper()
	return e.count(t, "SELECT count(*) FROM river_job WHERE kind = $1", kind)
}

// exec runs one statement, written with $n placeholders, on the env's
// database (test setup only).
func (e *env) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	ctx := context.Background()
	if e.kind == "postgres" {
		c, err := pgx.Connect(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return
	}
	db := e.sqliteDB(t)
	if _, err := db.ExecContext(ctx, strings.ReplaceAll(q, "$", "?"), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// count runs a SELECT count(*), written with $n placeholders, on the
// env's database.
func (e *env) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	var n int
	if e.kind == "postgres" {
		c, err := pgx.Connect(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if err := e.sqliteDB(t).QueryRowContext(ctx, strings.ReplaceAll(q, "$", "?"), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *env) sqliteDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(e.url, "sqlite:")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func wantStatus(t *testing.T, r *response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body: %s", r.status, status, r.body)
	}
}

// wantProblem asserts a problem document of type typ with HTTP status
// status, and the headers every ACME error carries.
func wantProblem(t *testing.T, e *env, r *response, typ acme.ProblemType, status int) acme.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	if r.header.Get("Replay-Nonce") == "" {
		t.Errorf("problem response has no Replay-Nonce")
	}
	if idx := r.links("index"); len(idx) != 1 || idx[0] != e.base+"/directory" {
		t.Errorf(`Link rel="index" = %v, want [%s/directory]`, idx, e.base)
	}
	p := r.problem(t)
	if p.Type != typ {
		t.Fatalf("problem type = %s, want %s (detail %q)", p.Type, typ, p.Detail)
	}
	if p.Detail == "" {
		t.Errorf("problem %s has no detail", typ)
	}
	if p.Status != status {
		t.Errorf("problem status member = %d, want %d", p.Status, status)
	}
	return p
}
