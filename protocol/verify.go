package protocol

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/jws"
	"github.com/hallmark-ca/hallmark/protocol/verdict"
	"github.com/hallmark-ca/hallmark/store"
)

// keyMode says which key a POST must be signed with (RFC 8555 §6.2).
type keyMode int

const (
	kidOnly  keyMode = iota // the account's key, named by "kid"
	jwkOnly                 // a key in the header: newAccount
	kidOrJWK                // revokeCert: the account's, or the certificate's own
)

// post is a verified ACME POST.
type post struct {
	r       *http.Request
	url     string // the request URL as the client signed it
	jwk     any    // the header's key, for kidOrJWK requests signed by the certificate key
	payload []byte
	acct    *store.Account   // set iff signed with "kid"
	rawJWK  []byte           // the header's JWK as JSON (jwk requests)
	thumb   string           // the header's key thumbprint (jwk requests)
	now     time.Time        // the database clock when the nonce was consumed
	ahead   *aheadResult     // the route's first read, made while the nonce was consumed (ahead.go)
	aheadOf store.Lookup     // what ahead read
	access  *access.Eval     // the access policy's evaluation (accesspolicy.go); nil: no policy
	mark    verdict.Mark     // taken before the request's first read: a verdict's wait starts from it (await.go)
	sg      *signed          // the request while its nonce is not consumed (redeem); nil after
	use     *store.SignedUse // its nonce, left for its claim to consume (claimnow.go); nil once consumed
}

// isGet reports a POST-as-GET: an empty payload (RFC 8555 §6.3).
func (p *post) isGet() bool { return len(p.payload) == 0 }

// signed is a POST being verified: what verified's steps learn of it.
type signed struct {
	mode   keyMode
	msg    *jws.Message
	url    string   // the request URL, which msg names
	acctID string   // the account id msg's kid names; "" for none
	kidErr error    // why the kid names no account of this server
	guess  *guessed // msg verified with the account's last key (ahead.go)
}

// byAccount reports whether the request may be the account's: it names
// one, and the route takes account keys.
func (sg *signed) byAccount() bool { return sg.acctID != "" && sg.mode != jwkOnly }

// verified runs the checks every ACME POST goes through, in order: the
// access policy on the client, content type, body size, JWS shape
// (jws.Parse), url == the request URL (RFC 8555 §6.4), nonce (§6.5), key
// by kid or jwk (§6.2), signature, the access policy on the account. Only
// then does the handler see the payload, and ahead's read if the route has
// one. A route that claims (claims) may leave the nonce for its claim
// (claimnow.go), for a request the access policy has already allowed:
// the account's stage is not run again.
func (s *Server) verified(route string, mode keyMode, h func(http.ResponseWriter, *post) error, ahead readAhead, claims bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		ev, err := s.accessStart(r, route)
		if err != nil {
			return err
		}
		msg, err := s.readJWS(w, r)
		if err != nil {
			return err
		}
		sg := &signed{mode: mode, msg: msg}
		if sg.url, err = s.signedURL(r, msg); err != nil {
			return err
		}
		sg.acctID, sg.kidErr = s.kidAccountID(msg.KeyID)
		p := &post{r: r, url: sg.url, mark: s.mark(), sg: sg, access: ev}
		if claims && sg.byAccount() && ev.Settled() && s.deferred(p) {
			return s.settle(p, h(w, p))
		}
		var first store.Lookup
		if sg.byAccount() && ahead != nil {
			first = ahead(r, msg, sg.acctID)
		}
		if err := s.redeem(p, first); err != nil {
			return err
		}
		if err := s.accessAccount(p); err != nil {
			return err
		}
		return h(w, p)
	}
}

// readJWS reads a POST's body as a JWS: application/jose+json (RFC 8555
// §6.2: 415 otherwise), at most server.max_body_bytes (413), of the shape
// jws.Parse accepts.
func (s *Server) readJWS(w http.ResponseWriter, r *http.Request) (*jws.Message, error) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/jose+json" {
		return nil, malformedAs(http.StatusUnsupportedMediaType, "the Content-Type must be application/jose+json, got %q", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Server.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, malformedAs(http.StatusRequestEntityTooLarge, "request body too large: the limit is %d bytes", s.cfg.Server.MaxBodyBytes)
		}
		return nil, acme.Malformed("reading the request body: %v", err)
	}
	return jws.Parse(body)
}

// signedURL is the URL of r, which msg must name (RFC 8555 §6.4: "If the
// two do not match, then the server MUST reject the request as
// unauthorized.").
func (s *Server) signedURL(r *http.Request, msg *jws.Message) (string, error) {
	want := s.base + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		want += "?" + r.URL.RawQuery
	}
	if msg.URL != want {
		return "", acme.Unauthorized("the JWS url %q does not match the request URL %q", msg.URL, want)
	}
	return want, nil
}

// redeem consumes p's nonce, unless its claim did (claimnow.go), reads
// the account its kid names and makes the route's first read (l) in one
// store round trip, batched with other requests' (protocol/nonce), then
// verifies p with the key read. A kid that is no account URL of ours
// consumes the nonce all the same. Meanwhile this goroutine guesses the
// signature's key, if p was not verified with it already (ahead.go);
// nothing read is trusted until the request is verified.
func (s *Server) redeem(p *post, l store.Lookup) error {
	sg := p.sg
	if sg == nil {
		return nil
	}
	p.sg, p.use = nil, nil
	var meanwhile func()
	if sg.guess == nil && sg.byAccount() {
		meanwhile = func() { sg.guess = s.guess(sg.msg, sg.acctID) }
	}
	if !sg.byAccount() || !aheadID(l.ID) {
		l = store.Lookup{}
	}
	ctx := p.r.Context()
	red := s.nonces.Begin(ctx, sg.msg.Nonce, sg.acctID, l, meanwhile)
	acct, now, err := red.Wait(ctx)
	if err != nil {
		return s.storeErr(err, "consuming the nonce")
	}
	s.metrics.redeemed.Inc()
	s.clock.observe(now)
	p.now = now
	if v, err, ok := red.Found(); ok {
		p.ahead, p.aheadOf = &aheadResult{v: v, err: err}, l
	}
	if sg.msg.KeyID != "" {
		return s.byKid(p, sg, acct)
	}
	return byJWK(p, sg)
}

// byKid verifies a request signed with the key of acct, the account its
// kid names (nil if none): with the guess's answer when the guess used
// that key.
func (s *Server) byKid(p *post, sg *signed, acct *store.Account) error {
	if sg.mode == jwkOnly {
		return acme.Malformed("this request must be signed with a \"jwk\" header naming the new account's key, not \"kid\"")
	}
	if sg.kidErr != nil {
		return sg.kidErr
	}
	key, err := s.accountKey(sg.msg.KeyID, acct)
	if err != nil {
		return err
	}
	res, ok := sg.guess.resultFor(acct.KeyJWK)
	if !ok {
		// No guess, or a stale one: remember the key for the account's
		// next request.
		s.lastKeys.put(acct.ID, string(acct.KeyJWK))
		res.payload, res.err = sg.msg.Verify(key)
	}
	if res.err != nil {
		return res.err
	}
	p.payload, p.acct = res.payload, acct
	return nil
}

// byJWK verifies a request signed with the key in its header.
func byJWK(p *post, sg *signed) error {
	if sg.mode == kidOnly {
		return acme.Malformed("this request must be signed with the account key named by a \"kid\" header, not \"jwk\"")
	}
	var err error
	if p.payload, err = sg.msg.Verify(sg.msg.JWK); err != nil {
		return err
	}
	p.jwk = sg.msg.JWK.Key
	p.rawJWK, p.thumb, err = jwkIdentity(sg.msg.JWK)
	return err
}

// owned is the route's first read for p (aheadOr): the what named id,
// whose URL is url, if it is the signer's (acctOf says whose it is).
func owned[T any](s *Server, p *post, ahead readAhead, what, id, url string, acctOf func(T) string) (T, error) {
	if err := s.redeem(p, ahead(p.r, nil, "")); err != nil {
		var zero T
		return zero, err
	}
	v, err := aheadOr[T](p, ahead, s.lookup)
	if err != nil {
		return v, s.readErr(err, what, id)
	}
	if acctOf(v) != p.acct.ID {
		var zero T
		return zero, acme.Unauthorized("%s %s belongs to another account", what, url)
	}
	return v, nil
}

// kidAccountID is the account id a "kid" names (RFC 8555 §6.2: kid is the
// account URL); "" and accountDoesNotExist when it is no account URL of
// this server, or there is no kid.
func (s *Server) kidAccountID(kid string) (string, error) {
	if kid == "" {
		return "", nil
	}
	prefix := s.base + pathAccount
	id, ok := strings.CutPrefix(kid, prefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", acme.New(acme.ProblemAccountDoesNotExist, "the kid %q is not an account URL of this server (%s<id>)", kid, prefix)
	}
	return id, nil
}

// accountKey checks that acct, the account kid names (nil if none), may
// sign requests, and returns its key.
func (s *Server) accountKey(kid string, acct *store.Account) (*publicKey, error) {
	if acct == nil {
		return nil, acme.New(acme.ProblemAccountDoesNotExist, "there is no account %s", kid)
	}
	if acct.Status != acme.StatusValid {
		// RFC 8555 §7.3.6: requests signed by a deactivated account's key
		// MUST be rejected with 401 unauthorized.
		return nil, acme.Deactivated("the account %s is %s and can no longer make requests", kid, acct.Status)
	}
	key, err := s.keys.parse(acct.KeyJWK)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("account %s has an unreadable key: %w", acct.ID, err))
	}
	return key, nil
}
