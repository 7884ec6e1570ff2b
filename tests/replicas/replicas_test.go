package replicas

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdb"
)

// issueMany runs n lego clients, par at a time, each for its own name,
// through the proxy; it returns how many got a certificate and the first
// failure's output.
func issueMany(ctx context.Context, c *cluster, prefix string, n, par, tries int) (int, []string) {
	var mu sync.Mutex
	ok, fails := 0, []string{}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("%s%d.replicas.test", prefix, i)
			_, out, err := c.legoUntil(ctx, filepath.Join(c.dir, "lego", name), name, tries)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails = append(fails, fmt.Sprintf("%s: %v\n%s", name, err, tail(out, 1500)))
				return
			}
			ok++
		}(i)
	}
	wg.Wait()
	return ok, fails
}

var crlSignedRE = regexp.MustCompile(`msg="CRL signed" .*?issuer=(\S+) shard=(\d+) number=(\d+)`)

// TestTwoFrontendsTwoWorkers: two frontends and two workers on one
// PostgreSQL, clients sent round-robin between the frontends: a nonce from
// one frontend is good once at the other, 50 lego clients get certificates,
// each order is signed exactly once, and each CRL number is used once.
func TestTwoFrontendsTwoWorkers(t *testing.T) {
	requireTool(t, "lego", "apt-get install lego")
	c := startCluster(t, testdb.Postgres(t), options{frontends: 2, workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	t.Run("NonceAcrossFrontends", func(t *testing.T) { nonceAcrossFrontends(t, c) })

	start := time.Now()
	ok, fails := issueMany(ctx, c, "rr", 50, 5, 1)
	t.Logf("50 lego runs, 5 at a time, through 2 frontends: %d certificates in %s; requests per frontend %d / %d",
		ok, time.Since(start).Round(time.Millisecond), c.perFE[0].Load(), c.perFE[1].Load())
	if ok != 50 {
		t.Fatalf("%d of 50 lego runs failed; first:\n%s", 50-ok, fails[0])
	}
	if c.perFE[0].Load() == 0 || c.perFE[1].Load() == 0 {
		t.Fatalf("the proxy did not use both frontends: %d / %d", c.perFE[0].Load(), c.perFE[1].Load())
	}

	// Revoke a few so both workers may sign CRLs, then wait for the last
	// revocation to be on a CRL.
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("rr%d.replicas.test", i)
		out, err := runLego(ctx, c, filepath.Join(c.dir, "lego", name), name, "revoke")
		if err != nil {
			t.Fatalf("lego revoke %s: %v\n%s", name, err, out)
		}
	}
	conn := c.db(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Every revocation is covered once its shard's newest CRL is newer
		// than it.
		n := queryInt(t, ctx, conn, `SELECT count(*) FROM revocations r WHERE NOT EXISTS (
  SELECT 1 FROM crls c WHERE c.issuer_id = r.issuer_id AND c.shard = r.shard AND c.this_update >= r.revoked_at)`)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d revocations are on no CRL after 30s", n)
		}
		time.Sleep(200 * time.Millisecond)
	}

	certs := c.checkBooks(ctx, c.workers...)
	per := []int{c.signed(c.workers[0]), c.signed(c.workers[1])}
	t.Logf("certificates stored %d; signed by worker1 %d, worker2 %d", certs, per[0], per[1])
	if certs != 50 {
		t.Errorf("%d certificates stored, want 50", certs)
	}

	// Each CRL number was signed once, by one worker, and stored.
	seen := map[string]string{}
	for _, w := range c.workers {
		for _, m := range crlSignedRE.FindAllStringSubmatch(c.logOf(w), -1) {
			key := m[1] + "/" + m[2] + "#" + m[3]
			if prev, dup := seen[key]; dup {
				t.Errorf("CRL %s signed twice (by %s and %s)", key, prev, w.Name)
			}
			seen[key] = w.Name
		}
		if strings.Contains(c.logOf(w), "storing CRL") {
			t.Errorf("%s signed a CRL it could not store (a number signed twice)", w.Name)
		}
	}
	// The roots' CRLs are signed by ca init, before any worker, and
	// published at the workers' start: they are not the workers' CRL jobs.
	crls := queryInt(t, ctx, conn, `SELECT count(*) FROM crls WHERE NOT issuer_id = ANY($1)`, rootIDs(t, filepath.Dir(c.root)))
	if len(seen) != crls || crls < 2 {
		t.Errorf("%d CRLs signed in the logs, %d stored (want equal, at least 2)", len(seen), crls)
	}
	t.Logf("CRLs signed and stored: %d, numbers unique", crls)
}

func runLego(ctx context.Context, c *cluster, path, name string, cmdArgs ...string) (string, error) {
	return c.legoRun(ctx, path, append([]string{"--domains", name}, cmdArgs...)...)
}

// nonceAcrossFrontends: a nonce minted by frontend 1 is accepted by frontend
// 2, once; its replay at frontend 1 is badNonce.
func nonceAcrossFrontends(t *testing.T, c *cluster) {
	fe1, fe2 := "http://"+c.frontends[0].addr, "http://"+c.frontends[1].addr
	hc := &http.Client{Timeout: 10 * time.Second}
	nonceFrom := func(base string) string {
		resp, err := hc.Head(base + "/acme/new-nonce")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		n := resp.Header.Get("Replay-Nonce")
		if n == "" {
			t.Fatalf("no Replay-Nonce from %s", base)
		}
		return n
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	post := func(base, nonce string) (int, map[string]any) {
		url := c.base + "/acme/new-account" // the URL the client signs is the balancer's
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
			&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{"nonce": nonce, "url": url}})
		if err != nil {
			t.Fatal(err)
		}
		jws, err := signer.Sign([]byte(`{"termsOfServiceAgreed":true}`))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/acme/new-account", strings.NewReader(jws.FullSerialize()))
		req.Header.Set("Content-Type", "application/jose+json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var doc map[string]any
		_ = json.Unmarshal(body, &doc)
		return resp.StatusCode, doc
	}
	for i := 0; i < 5; i++ {
		n := nonceFrom(fe1)
		status, doc := post(fe2, n)
		if status != http.StatusCreated && status != http.StatusOK {
			t.Fatalf("newAccount at frontend 2 with frontend 1's nonce: %d %v", status, doc)
		}
		status, doc = post(fe1, n)
		if status != http.StatusBadRequest || doc["type"] != "urn:ietf:params:acme:error:badNonce" {
			t.Fatalf("the same nonce replayed at frontend 1: %d %v, want 400 badNonce", status, doc)
		}
		n = nonceFrom(fe2)
		if status, doc := post(fe1, n); status != http.StatusOK && status != http.StatusCreated {
			t.Fatalf("newAccount at frontend 1 with frontend 2's nonce: %d %v", status, doc)
		}
		if status, doc := post(fe2, n); status != http.StatusBadRequest || doc["type"] != "urn:ietf:params:acme:error:badNonce" {
			t.Fatalf("the same nonce replayed at frontend 2: %d %v, want 400 badNonce", status, doc)
		}
	}
}

// signedNewAccount is a newAccount JWS with a fresh key.
func signedNewAccount(t *testing.T, url, nonce string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		&jose.SignerOptions{EmbedJWK: true, ExtraHeaders: map[jose.HeaderKey]any{"nonce": nonce, "url": url}})
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign([]byte(`{"termsOfServiceAgreed":true}`))
	if err != nil {
		t.Fatal(err)
	}
	return jws.FullSerialize()
}

// rootIDs are the ids (subject key ids, hex) of the roots in caDir: the
// root, and the cross root where ca init made one.
func rootIDs(t *testing.T, caDir string) []string {
	t.Helper()
	ids := []string{hex.EncodeToString(harness.ReadCert(t, filepath.Join(caDir, "root.pem")).SubjectKeyId)}
	if x2 := filepath.Join(caDir, "root-x2.pem"); statOK(x2) {
		ids = append(ids, hex.EncodeToString(harness.ReadCert(t, x2).SubjectKeyId))
	}
	return ids
}

func statOK(path string) bool { _, err := os.Stat(path); return err == nil }
