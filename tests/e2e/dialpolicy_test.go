package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// metadataReply is what the denied listener would answer; it must never
// reach a client.
const metadataReply = `{"AccessKeyId":"ASIA-E2E-SECRET","SecretAccessKey":"e2e-secret"}`

// TestDialPolicyRedirect is the outside testers' finding, on the real
// binaries: with policy.deny_ip_ranges = ["127.9.0.0/16"], an http-01
// answer on an allowed address that redirects to 127.9.0.2 fails the
// challenge with a problem naming the rule, and the listener on 127.9.0.2
// (standing in for cloud metadata) receives no connection at all. An order
// for an address in the range is refused at newOrder, as before.
func TestDialPolicyRedirect(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) {
			ca := harness.StartCA(t, d.URL(t), harness.Options{Tables: "[policy]\ndeny_ip_ranges = [\"127.9.0.0/16\"]\n"})
			denied := listenCounting(t, fmt.Sprintf("127.9.0.2:%d", ca.HTTPPort))
			target := fmt.Sprintf("http://127.9.0.2:%d/latest/meta-data/iam/security-credentials/", ca.HTTPPort)
			var redirects atomic.Int64
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				redirects.Add(1)
				http.Redirect(w, r, target, http.StatusFound)
			}), ReadHeaderTimeout: 5 * time.Second}
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ca.HTTPPort))
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })

			c := acmeAccount(t, ca)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = c.AuthorizeOrder(ctx, xacme.IPIDs("127.9.0.1"))
			var ae *xacme.Error
			if !errors.As(err, &ae) || ae.ProblemType != "urn:ietf:params:acme:error:rejectedIdentifier" {
				t.Fatalf("newOrder for 127.9.0.1: %v, want rejectedIdentifier", err)
			}

			ch := acceptHTTP01(ctx, t, c, "redirect-"+d.Name+".test")
			var prob *xacme.Error
			if ch.Status != xacme.StatusInvalid || !errors.As(ch.Error, &prob) {
				t.Fatalf("challenge %s with error %v, want invalid with a problem", ch.Status, ch.Error)
			}
			detail := prob.Detail
			t.Logf("challenge error: %s: %s", prob.ProblemType, detail)
			if prob.ProblemType != "urn:ietf:params:acme:error:connection" {
				t.Errorf("problem type %s, want connection", prob.ProblemType)
			}
			for _, want := range []string{target, "127.9.0.2 is in policy.deny_ip_ranges 127.9.0.0/16"} {
				if !strings.Contains(detail, want) {
					t.Errorf("the error does not mention %q", want)
				}
			}
			if strings.Contains(detail, "SECRET") || strings.Contains(detail, "AccessKeyId") {
				t.Errorf("the error quotes the denied listener's reply")
			}
			if redirects.Load() == 0 {
				t.Error("the worker never fetched the allowed address: the redirect was not tested")
			}
			// A connection is counted before its reply is written, so before
			// any verdict that could have read it.
			if n := denied.Load(); n != 0 {
				t.Errorf("the denied listener on 127.9.0.2 received %d connections, want 0", n)
			}
		})
	}
}

// acceptHTTP01 orders name, answers nothing itself (the test's own server
// on the http-01 port does), accepts the http-01 challenge and returns it
// once the worker's verdict is in.
func acceptHTTP01(ctx context.Context, t *testing.T, c *xacme.Client, name string) *xacme.Challenge {
	t.Helper()
	o, err := c.AuthorizeOrder(ctx, xacme.DomainIDs(name))
	if err != nil {
		t.Fatalf("newOrder for %s: %v", name, err)
	}
	z, err := c.GetAuthorization(ctx, o.AuthzURLs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range z.Challenges {
		if ch.Type != "http-01" {
			continue
		}
		if _, err := c.Accept(ctx, ch); err != nil {
			t.Fatalf("accepting http-01: %v", err)
		}
		if _, err := c.WaitAuthorization(ctx, z.URI); err == nil {
			t.Fatal("the authorization became valid")
		}
		got, err := c.GetChallenge(ctx, ch.URI)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Fatalf("the authorization for %s offers no http-01 challenge", name)
	return nil
}

// listenCounting listens on addr and counts the connections it accepts,
// answering each with metadataReply as a cloud metadata service would.
func listenCounting(t *testing.T, addr string) *atomic.Int64 {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s (127.0.0.0/8 is all loopback on Linux): %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(metadataReply), metadataReply)
			}()
		}
	}()
	return &n
}
