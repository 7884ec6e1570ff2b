package validate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unicode"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// http01 fetches http://<name>/.well-known/acme-challenge/<token> and
// compares the body with the key authorization (RFC 8555 §8.3).
// An error with a nil problem means a lookup could not be made at all
// (ErrResolversUnreachable): no verdict.
func (v *Validator) http01(ctx context.Context, r Request) ([]Attempt, *acme.Problem, error) {
	u := &url.URL{
		Scheme: "http",
		Host:   hostPort(r.Identifier.Value, v.cfg.HTTPPort, 80),
		Path:   "/.well-known/acme-challenge/" + r.Token,
	}
	var record []Attempt
	for redirects := 0; ; redirects++ {
		// A refused address is the identifier's own fault only on the first
		// hop to an IP identifier; a redirect's target is the responder's.
		refused := acme.ProblemConnection
		if redirects == 0 && r.Identifier.Type == acme.IdentifierIP {
			refused = acme.ProblemRejectedIdentifier
		}
		att, resp, p, err := v.fetch(ctx, u, refused)
		record = append(record, att)
		if p != nil || err != nil {
			return record, p, err
		}
		where := fmt.Sprintf("%s: Fetching %s", att.AddressUsed, u)
		if isRedirect(resp.StatusCode) {
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if redirects == MaxRedirects {
				return record, problem(acme.ProblemConnection, "%s: Too many redirects: more than %d (the last one was to %q)", where, MaxRedirects, truncate(loc, 256)), nil
			}
			next, why := v.checkRedirect(u, loc)
			if why != "" {
				return record, problem(acme.ProblemConnection, "%s: Redirect to %q rejected: %s", where, truncate(loc, 256), why), nil
			}
			u = next
			continue
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return record, problem(acme.ProblemUnauthorized, "%s: Invalid response: HTTP status %d; only 301, 302, 307 and 308 redirects are followed (CA/Browser Forum BR 3.2.2.4.19)", where, resp.StatusCode), nil
		}
		if resp.StatusCode != http.StatusOK {
			return record, problem(acme.ProblemUnauthorized, "%s: Invalid response: HTTP status %d (want 200 with the key authorization as the body)", where, resp.StatusCode), nil
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
		if err != nil {
			return record, connectionProblem(where, err), nil
		}
		if len(body) > MaxBodyBytes {
			return record, problem(acme.ProblemUnauthorized, "%s: Invalid response: the body is larger than %d bytes; it must be just the key authorization", where, MaxBodyBytes), nil
		}
		// RFC 8555 §8.3: "the server SHOULD ignore whitespace characters at
		// the end of the body" — at the end only.
		got := strings.TrimRightFunc(string(body), unicode.IsSpace)
		if got != r.KeyAuthorization {
			return record, problem(acme.ProblemUnauthorized, "%s: The key authorization file from the server did not match this challenge: expected %q, got %q",
				where, r.KeyAuthorization, truncate(got, 128)), nil
		}
		return record, nil, nil
	}
}

// fetch makes one GET to u, resolving its host through our resolvers and
// dialing the address itself, so nothing else (system resolver, proxy,
// keep-alive pool) is involved; the dial policy refuses an address before
// any connection, with a problem of type refused. A non-nil response has an
// open body. An error means the host's addresses could not be looked up at
// all.
func (v *Validator) fetch(ctx context.Context, u *url.URL, refused acme.ProblemType) (Attempt, *http.Response, *acme.Problem, error) {
	host := u.Hostname()
	port := v.cfg.HTTPPort
	if u.Scheme == "https" {
		port = v.cfg.HTTPSPort
	}
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p) // checked by checkRedirect or built by http01
	}
	att := Attempt{URL: u.String(), Hostname: host, Port: port}
	where := "Fetching " + u.String()

	var addrs []netip.Addr
	if ip, err := parseIP(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		var err error
		addrs, err = v.res.lookupIPs(ctx, host)
		if err := unreachable(err); err != nil {
			return att, nil, nil, err
		}
		if err != nil {
			return att, nil, problem(acme.ProblemDNS, "%s: DNS problem: %v", where, err), nil
		}
		if len(addrs) == 0 {
			return att, nil, problem(acme.ProblemDNS, "%s: DNS problem: no A or AAAA records found for %s", where, host), nil
		}
	}
	att.AddressesResolved = addrStrings(addrs)

	conn, used, err := v.dial(ctx, host, addrs, port, &att)
	if re, ok := asRefused(err); ok {
		return att, nil, problem(refused, "%s: %v", where, re), nil
	}
	if err != nil {
		return att, nil, connectionProblem(used.String()+": "+where, err), nil
	}
	// The transport dials from its own goroutine; handed records whether it
	// took the connection (and with it the duty to close it).
	var handed atomic.Bool
	tr := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if !handed.CompareAndSwap(false, true) {
				return nil, errors.New("only one connection per hop")
			}
			return conn, nil
		},
		// An https redirect target's certificate is not checked: the key
		// authorization is what proves control, and Let's Encrypt does the
		// same (clients often redirect to a default HTTPS vhost).
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true, ServerName: serverNameFor(host)}, //nolint:gosec // see above
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxHeaderBytes,
		Proxy:                  nil, // never an environment proxy
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		conn.Close()
		return att, nil, problem(acme.ProblemMalformed, "%s: cannot build the request: %v", where, err), nil
	}
	req.Header.Set("User-Agent", "Hallmark-ACME-validation")
	req.Header.Set("Accept", "*/*")
	resp, err := client.Do(req)
	if err != nil {
		if handed.CompareAndSwap(false, true) {
			conn.Close()
		}
		return att, nil, connectionProblem(used.String()+": "+where, err), nil
	}
	return att, resp, nil, nil
}

// checkRedirect resolves loc against the current URL and allows it only to
// http or https on the configured ports (80/443 in production), to a valid
// host name or IP address. why is empty when allowed.
func (v *Validator) checkRedirect(cur *url.URL, loc string) (next *url.URL, why string) {
	if loc == "" {
		return nil, "the response has no Location header"
	}
	next, err := cur.Parse(loc)
	if err != nil {
		return nil, "it is not a valid URL"
	}
	next.Fragment, next.RawFragment = "", ""
	var want int
	switch strings.ToLower(next.Scheme) {
	case "http":
		want = v.cfg.HTTPPort
	case "https":
		want = v.cfg.HTTPSPort
	default:
		return nil, fmt.Sprintf("only http and https redirects are followed, not %q", next.Scheme)
	}
	next.Scheme = strings.ToLower(next.Scheme)
	if next.User != nil {
		return nil, "redirect targets must not carry user information"
	}
	host := next.Hostname()
	if host == "" {
		return nil, "the target has no host"
	}
	port := next.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n != want {
			return nil, fmt.Sprintf("port %s is not allowed; only port %d for http and %d for https", port, v.cfg.HTTPPort, v.cfg.HTTPSPort)
		}
	}
	if _, err := parseIP(host); err != nil {
		host = strings.TrimSuffix(host, ".")
		if !validDNSName(host) {
			return nil, fmt.Sprintf("%q is not a valid host name", host)
		}
		next.Host = host
		if port != "" {
			next.Host = net.JoinHostPort(host, port)
		}
	}
	return next, ""
}

// isRedirect reports whether code is a redirect http-01 follows: 301, 302,
// 307 and 308 only (CA/Browser Forum BR 3.2.2.4.19; not 303 or 300).
func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// hostPort renders host for a URL, with the port only when it is not the
// scheme's default.
func hostPort(host string, port, schemeDefault int) string {
	if port == schemeDefault {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// serverNameFor is the SNI for an https redirect target: none for an IP.
func serverNameFor(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	return host
}

// connectionProblem turns a dial, request or read failure into a problem
// whose detail says what went wrong in words an operator can act on.
func connectionProblem(where string, err error) *acme.Problem {
	var (
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
		certErr   *tls.CertificateVerificationError
		opErr     *net.OpError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return problem(acme.ProblemConnection, "%s: Connection refused", where)
	case errors.Is(err, syscall.ECONNRESET):
		return problem(acme.ProblemConnection, "%s: Connection reset by peer", where)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return problem(acme.ProblemConnection, "%s: Host or network unreachable", where)
	case errors.As(err, &opErr) && opErr.Op == "dial" && isTimeout(err):
		return problem(acme.ProblemConnection, "%s: Timeout during connect (likely firewall problem)", where)
	case isTimeout(err):
		return problem(acme.ProblemConnection, "%s: Timeout after connect (your server may be slow or overloaded)", where)
	case errors.As(err, &recordErr), errors.As(err, &alertErr), errors.As(err, &certErr):
		return problem(acme.ProblemTLS, "%s: TLS error: %v", where, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return problem(acme.ProblemConnection, "%s: The server closed the connection without a complete response", where)
	default:
		return problem(acme.ProblemConnection, "%s: Error getting validation data", where)
	}
}
