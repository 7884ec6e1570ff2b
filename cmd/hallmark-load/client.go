package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// client is the generator's own small ACME client. It exists because
// golang.org/x/crypto/acme sleeps for the server's Retry-After (whole
// seconds), and a load generator must poll every few milliseconds. One
// client is one account, used by one goroutine at a time.
type client struct {
	hc      *http.Client
	dir     directory
	key     *ecdsa.PrivateKey
	kid     string
	thumb   string // base64url SHA-256 JWK thumbprint (RFC 7638), for key authorizations
	nonce   string
	maxPoll time.Duration
	// requests counts the HTTP requests this client sent (its goroutine
	// alone touches it): polls are most of a server's work per certificate.
	requests int
	// took is how long each answered request of an issuance took, by kind
	// (postAs); its goroutine alone touches it.
	took map[string][]time.Duration
}

type directory struct {
	NewNonce   string `json:"newNonce"`
	NewAccount string `json:"newAccount"`
	NewOrder   string `json:"newOrder"`
}

// problemError is a problem document (RFC 7807) the server answered with.
type problemError struct {
	Status int
	Type   string `json:"type"`
	Detail string `json:"detail"`
}

func (p *problemError) Error() string {
	return fmt.Sprintf("%d %s: %s", p.Status, p.Type, p.Detail)
}

// newHTTPClient trusts only roots (the CA's TLS anchor) and keeps enough
// idle connections for every goroutine: a load test of TLS handshakes is a
// different test. Every address it dials is on loopback.
func newHTTPClient(roots *x509.CertPool, conns int) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: roots},
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			IdleConnTimeout:     time.Minute,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, _, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
					return nil, fmt.Errorf("refusing to dial %s: the load generator only talks to loopback", addr)
				}
				return dialer.DialContext(ctx, network, addr)
			},
		},
	}
}

func fetchDirectory(ctx context.Context, hc *http.Client, url string) (directory, error) {
	var d directory
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return d, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return d, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return d, fmt.Errorf("decoding the directory: %w", err)
	}
	if d.NewNonce == "" || d.NewAccount == "" || d.NewOrder == "" {
		return d, fmt.Errorf("the directory at %s lacks newNonce, newAccount or newOrder", url)
	}
	return d, nil
}

// newAccount creates a P-256 account (RFC 8555 §7.3).
func newAccount(ctx context.Context, hc *http.Client, dir directory, maxPoll time.Duration) (*client, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	jwk := jose.JSONWebKey{Key: key.Public()}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	c := &client{hc: hc, dir: dir, key: key, thumb: base64.RawURLEncoding.EncodeToString(tp), maxPoll: maxPoll}
	resp, _, err := c.post(ctx, dir.NewAccount, map[string]any{"termsOfServiceAgreed": true})
	if err != nil {
		return nil, fmt.Errorf("creating an account: %w", err)
	}
	c.kid = resp.Header.Get("Location")
	if c.kid == "" {
		return nil, fmt.Errorf("newAccount answered %d without a Location", resp.StatusCode)
	}
	return c, nil
}

func (c *client) fetchNonce(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.dir.NewNonce, nil)
	if err != nil {
		return err
	}
	c.requests++
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	c.nonce = resp.Header.Get("Replay-Nonce")
	if c.nonce == "" {
		return fmt.Errorf("HEAD %s answered %s without a Replay-Nonce", c.dir.NewNonce, resp.Status)
	}
	return nil
}

// post sends a JWS-signed POST (payload nil: POST-as-GET) and returns the
// response with its body read. A badNonce answer is retried once with the
// nonce it carried (RFC 8555 §6.5); other problems are returned as
// *problemError.
func (c *client) post(ctx context.Context, url string, payload any) (*http.Response, []byte, error) {
	for attempt := 0; ; attempt++ {
		resp, body, err := c.postOnce(ctx, url, payload)
		var pe *problemError
		if attempt == 0 && asProblem(err, &pe) && pe.Type == "urn:ietf:params:acme:error:badNonce" {
			continue
		}
		return resp, body, err
	}
}

// postAs is post for one of an issuance's requests, timed under kind when
// it is answered: from signing the JWS to the body read, a badNonce retry
// included.
func (c *client) postAs(ctx context.Context, kind, url string, payload any) (*http.Response, []byte, error) {
	start := time.Now()
	resp, body, err := c.post(ctx, url, payload)
	if err == nil {
		if c.took == nil {
			c.took = map[string][]time.Duration{}
		}
		c.took[kind] = append(c.took[kind], time.Since(start))
	}
	return resp, body, err
}

func asProblem(err error, pe **problemError) bool {
	p, ok := err.(*problemError)
	if ok {
		*pe = p
	}
	return ok
}

func (c *client) postOnce(ctx context.Context, url string, payload any) (*http.Response, []byte, error) {
	if c.nonce == "" {
		if err := c.fetchNonce(ctx); err != nil {
			return nil, nil, err
		}
	}
	var body []byte
	if payload != nil {
		var err error
		if body, err = json.Marshal(payload); err != nil {
			return nil, nil, err
		}
	}
	opts := &jose.SignerOptions{ExtraHeaders: map[jose.HeaderKey]any{"nonce": c.nonce, "url": url}}
	sk := jose.SigningKey{Algorithm: jose.ES256, Key: c.key}
	if c.kid == "" {
		opts.EmbedJWK = true
	} else {
		sk.Key = jose.JSONWebKey{Key: c.key, KeyID: c.kid}
	}
	c.nonce = ""
	signer, err := jose.NewSigner(sk, opts)
	if err != nil {
		return nil, nil, err
	}
	jws, err := signer.Sign(body)
	if err != nil {
		return nil, nil, err
	}
	// The flattened JSON serialization (RFC 7515 §7.2.2) built from the
	// compact one: go-jose's FullSerialize omits an empty payload, and a
	// POST-as-GET needs "payload": "" (RFC 8555 §6.3).
	compact, err := jws.CompactSerialize()
	if err != nil {
		return nil, nil, err
	}
	parts := strings.Split(compact, ".")
	flat, _ := json.Marshal(map[string]string{"protected": parts[0], "payload": parts[1], "signature": parts[2]})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(flat))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/jose+json")
	c.requests++
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, err
	}
	c.nonce = resp.Header.Get("Replay-Nonce")
	if resp.StatusCode >= 400 {
		pe := &problemError{Status: resp.StatusCode}
		if json.Unmarshal(out, pe) != nil || pe.Type == "" {
			pe.Type = "http-" + strconv.Itoa(resp.StatusCode)
			pe.Detail = string(bytes.TrimSpace(out))
		}
		return resp, out, pe
	}
	return resp, out, nil
}

// pollDelay is the server's Retry-After, but never longer than maxPoll: the
// generator measures the server, not its hints.
func (c *client) pollDelay(resp *http.Response) time.Duration {
	d := c.maxPoll
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && time.Duration(s)*time.Second < d {
			d = time.Duration(s) * time.Second
		}
	}
	return d
}
