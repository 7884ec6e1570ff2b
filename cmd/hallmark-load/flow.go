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
	var a authz
	if _, body, err = c.postAs(ctx, reqAuthz, o.Authorizations[0], nil); err != nil {
		return d, fmt.Errorf("reading the authorization: %w", err)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return d, fmt.Errorf("reading the authorization: %w", err)
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
		return d, errors.New("the authorization offers no http-01 challenge")
	}
	if a.Status != "valid" {
		resp, body, err = c.postAs(ctx, reqChallenge, chURL, map[string]any{})
		if err != nil {
			return d, fmt.Errorf("answering the challenge: %w", err)
		}
		// A CA that validates before it answers (step-ca) says so in the
		// challenge it returns; as lego does, the client then polls
		// nothing.
		var ch struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(body, &ch) == nil && ch.Status == "valid" {
			a.Status = "valid"
		}
		for a.Status != "valid" {
			if err := sleep(ctx, c.pollDelay(resp)); err != nil {
				return d, err
			}
			if resp, body, err = c.postAs(ctx, reqAuthzPoll, o.Authorizations[0], nil); err != nil {
				return d, fmt.Errorf("polling the authorization: %w", err)
			}
			a = authz{}
			if err := json.Unmarshal(body, &a); err != nil {
				return d, fmt.Errorf("polling the authorization: %w", err)
			}
			switch a.Status {
			case "pending", "valid":
			default:
				for _, ch := range a.Challenges {
					if ch.Error != nil {
						return d, fmt.Errorf("validation: %w", ch.Error)
					}
				}
				return d, &problemError{Type: "authz-" + a.Status, Detail: "the authorization became " + a.Status}
			}
		}
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
