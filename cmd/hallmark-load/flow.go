package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The steps an issuance is timed by; "total" is the whole issuance.
const (
	stepNewOrder  = "newOrder"
	stepChallenge = "challenge→valid"
	stepFinalize  = "finalize→valid"
	stepDownload  = "download"
	stepTotal     = "total"
)

var steps = []string{stepTotal, stepNewOrder, stepChallenge, stepFinalize, stepDownload}

// The requests of an issuance, each timed on its own (client.postAs): what
// a step's time is made of. The polls are the waits' repeated requests; at
// one of each per wait an issuance is seven requests.
const (
	reqNewOrder    = "newOrder"
	reqAuthz       = "authorization"
	reqChallenge   = "challenge POST"
	reqAuthzPoll   = "authorization poll"
	reqFinalize    = "finalize"
	reqOrderPoll   = "order poll"
	reqCertificate = "certificate"
)

var requestKinds = []string{reqNewOrder, reqAuthz, reqChallenge, reqAuthzPoll, reqFinalize, reqOrderPoll, reqCertificate}

type order struct {
	Status         string        `json:"status"`
	Authorizations []string      `json:"authorizations"`
	Finalize       string        `json:"finalize"`
	Certificate    string        `json:"certificate"`
	Error          *problemError `json:"error"`
}

type authz struct {
	Status     string `json:"status"`
	Challenges []struct {
		Type   string        `json:"type"`
		URL    string        `json:"url"`
		Token  string        `json:"token"`
		Status string        `json:"status"`
		Error  *problemError `json:"error"`
	} `json:"challenges"`
}

// issue runs one whole issuance for name (RFC 8555 §7.4 to §7.4.2) and
// returns each step's duration. The http-01 answer is published on tokens,
// which the generator's own responder serves.
func (c *client) issue(ctx context.Context, name string, certKey *ecdsa.PrivateKey, tokens *tokenStore) (map[string]time.Duration, error) {
	d := map[string]time.Duration{}
	start := time.Now()

	resp, body, err := c.postAs(ctx, reqNewOrder, c.dir.NewOrder, map[string]any{
		"identifiers": []map[string]string{{"type": "dns", "value": name}},
	})
	if err != nil {
		return d, fmt.Errorf("newOrder: %w", err)
	}
	orderURL := resp.Header.Get("Location")
	var o order
	if err := json.Unmarshal(body, &o); err != nil || orderURL == "" || len(o.Authorizations) != 1 {
		return d, fmt.Errorf("newOrder: unusable answer (%d, location %q): %s", resp.StatusCode, orderURL, body)
	}
	d[stepNewOrder] = time.Since(start)

	// The challenge step starts at reading the authorization: a client has
	// to, to learn the token.
	t0 := time.Now()
	if err := c.authorize(ctx, o.Authorizations[0], tokens); err != nil {
		return d, err
	}
	d[stepChallenge] = time.Since(t0)

	t0 = time.Now()
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, certKey)
	if err != nil {
		return d, err
	}
	resp, body, err = c.postAs(ctx, reqFinalize, o.Finalize, map[string]string{"csr": base64.RawURLEncoding.EncodeToString(csr)})
	if err != nil {
		return d, fmt.Errorf("finalize: %w", err)
	}
	for {
		o = order{}
		if err := json.Unmarshal(body, &o); err != nil {
			return d, fmt.Errorf("reading the order: %w", err)
		}
		if o.Status == "valid" {
			break
		}
		if o.Status == "invalid" {
			if o.Error != nil {
				return d, fmt.Errorf("issuance: %w", o.Error)
			}
			return d, &problemError{Type: "order-invalid", Detail: "the order became invalid"}
		}
		if err := sleep(ctx, c.pollDelay(resp)); err != nil {
			return d, err
		}
		if resp, body, err = c.postAs(ctx, reqOrderPoll, orderURL, nil); err != nil {
			return d, fmt.Errorf("polling the order: %w", err)
		}
	}
	d[stepFinalize] = time.Since(t0)

	t0 = time.Now()
	resp, body, err = c.postAs(ctx, reqCertificate, o.Certificate, nil)
	if err != nil {
		return d, fmt.Errorf("downloading the certificate: %w", err)
	}
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		return d, fmt.Errorf("downloading the certificate: %s with %d bytes", resp.Status, len(body))
	}
	d[stepDownload] = time.Since(t0)
	d[stepTotal] = time.Since(start)
	return d, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// authorize reads the authorization at authzURL, publishes the http-01 key
// authorization on tokens, answers the challenge and polls until the
// authorization is valid.
func (c *client) authorize(ctx context.Context, authzURL string, tokens *tokenStore) error {
	var a authz
	_, body, err := c.postAs(ctx, reqAuthz, authzURL, nil)
	if err != nil {
		return fmt.Errorf("reading the authorization: %w", err)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("reading the authorization: %w", err)
	}
	chURL := ""
	for _, ch := range a.Challenges {
		if ch.Type == "http-01" {
			chURL = ch.URL
			tokens.put(ch.Token, ch.Token+"."+c.thumb)
			defer tokens.drop(ch.Token)
		}
	}
	if chURL == "" {
		return errors.New("the authorization offers no http-01 challenge")
	}
	if a.Status == "valid" {
		return nil
	}
	resp, body, err := c.postAs(ctx, reqChallenge, chURL, map[string]any{})
	if err != nil {
		return fmt.Errorf("answering the challenge: %w", err)
	}
	// A CA that validates before it answers (step-ca) says so in the
	// challenge it returns; as lego does, the client then polls nothing.
	var ch struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &ch) == nil && ch.Status == "valid" {
		return nil
	}
	for {
		if err := sleep(ctx, c.pollDelay(resp)); err != nil {
			return err
		}
		if resp, body, err = c.postAs(ctx, reqAuthzPoll, authzURL, nil); err != nil {
			return fmt.Errorf("polling the authorization: %w", err)
		}
		a = authz{}
		if err := json.Unmarshal(body, &a); err != nil {
			return fmt.Errorf("polling the authorization: %w", err)
		}
		switch a.Status {
		case "valid":
			return nil
		case "pending":
		default:
			for _, ch := range a.Challenges {
				if ch.Error != nil {
					return fmt.Errorf("validation: %w", ch.Error)
				}
			}
			return &problemError{Type: "authz-" + a.Status, Detail: "the authorization became " + a.Status}
		}
	}
}
