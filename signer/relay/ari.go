package relay

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/signer"
)

// ARI (RFC 9773) at the upstream: the worker asks the upstream what it says
// of the renewal of each certificate it issued through this relay, and
// Hallmark's renewalInfo passes it on (worker/upstream.go).
const (
	// defaultRetryAfter is the wait when the upstream sends no
	// Retry-After: RFC 9773 §4.3's suggestion for a server, six hours.
	defaultRetryAfter = 6 * time.Hour
	// minRetryAfter and maxRetryAfter clamp an upstream's Retry-After
	// (RFC 9773 §4.3.2 lets a client clamp an unreasonable one): a zero
	// would have every run ask again, and a week would hide an incident's
	// moved window for a week.
	minRetryAfter = time.Minute
	maxRetryAfter = 24 * time.Hour
	// directoryFor is how long the upstream's renewalInfo URL (or its
	// absence) is trusted before the directory is read again: an upstream
	// that starts offering ARI is seen within it.
	directoryFor = 10 * time.Minute
	// maxRenewalInfo bounds the body read: a RenewalInfo object is small.
	maxRenewalInfo = 64 << 10
	// DefaultRenewalInfoPerRun is how many certificates one refresh asks
	// about when the configuration names no number.
	DefaultRenewalInfoPerRun = 100
)

// RenewalInfoPerRun is how many certificates one refresh of this backend
// asks the upstream about (backends.<name>.renewal_info_per_run).
func (b *Backend) RenewalInfoPerRun() int {
	if b.cfg.RenewalInfoPerRun > 0 {
		return b.cfg.RenewalInfoPerRun
	}
	return DefaultRenewalInfoPerRun
}

// RenewalInfo asks the upstream for its renewal information of a
// certificate it issued (der): signer.ErrNoRenewalInfo when its directory
// offers none; signer.ErrUnavailable when it could not be asked (down, a
// 5xx, a 429, or still inside a Retry-After it gave with one of those:
// then nobody is asked until it passes). A 404 or a document that is no
// RenewalInfo is an answer without a window: the upstream knows nothing to
// say of this certificate, and it is asked again after RetryAfter.
func (b *Backend) RenewalInfo(ctx context.Context, der []byte) (*signer.RenewalInfo, error) {
	if until := b.ariPausedUntil(); time.Now().Before(until) {
		return nil, fmt.Errorf("%w: the upstream %s asked for no renewalInfo requests before %s", signer.ErrUnavailable, b.cfg.DirectoryURL, until.UTC().Format(time.RFC3339))
	}
	base, err := b.renewalInfoURL(ctx)
	if err != nil {
		return nil, err
	}
	id, err := certID(der)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, min(b.cfg.Timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/"+id, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: renewalInfo URL %q: %v", signer.ErrUnavailable, base, err)
	}
	resp, err := b.client.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: asking the upstream's renewalInfo: %v", signer.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	return b.readRenewalInfo(resp)
}

// readRenewalInfo reads the upstream's answer for one certificate.
func (b *Backend) readRenewalInfo(resp *http.Response) (*signer.RenewalInfo, error) {
	wait := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		// Not about this certificate: the upstream is away or wants
		// fewer requests. Pause them all for its Retry-After.
		b.pauseARI(wait, resp.Header.Get("Retry-After") != "")
		return nil, fmt.Errorf("%w: the upstream's renewalInfo answered %s", signer.ErrUnavailable, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return &signer.RenewalInfo{RetryAfter: wait}, nil
	}
	var doc struct {
		SuggestedWindow struct {
			Start, End time.Time
		} `json:"suggestedWindow"`
		ExplanationURL string `json:"explanationURL"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRenewalInfo))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the upstream's renewalInfo: %v", signer.ErrUnavailable, err)
	}
	if json.Unmarshal(body, &doc) != nil || !doc.SuggestedWindow.End.After(doc.SuggestedWindow.Start) || doc.SuggestedWindow.Start.IsZero() {
		// RFC 9773 §4.2: end after start. Anything else says nothing.
		b.cfg.Logger.Warn("the upstream's renewalInfo is no RenewalInfo object; keeping Hallmark's window", "backend", b.cfg.Name, "body", string(body[:min(len(body), 200)]))
		return &signer.RenewalInfo{RetryAfter: wait}, nil
	}
	return &signer.RenewalInfo{Start: doc.SuggestedWindow.Start, End: doc.SuggestedWindow.End,
		ExplanationURL: doc.ExplanationURL, RetryAfter: wait}, nil
}

// renewalInfoURL is the upstream directory's renewalInfo, read at most
// every directoryFor; signer.ErrNoRenewalInfo when it has none.
func (b *Backend) renewalInfoURL(ctx context.Context) (string, error) {
	b.ariMu.Lock()
	u, at := b.ariURL, b.ariRead
	b.ariMu.Unlock()
	if at.IsZero() || time.Since(at) > directoryFor {
		var err error
		if u, err = b.readDirectory(ctx); err != nil {
			return "", err
		}
		b.ariMu.Lock()
		b.ariURL, b.ariRead = u, time.Now()
		b.ariMu.Unlock()
	}
	if u == "" {
		return "", signer.ErrNoRenewalInfo
	}
	return u, nil
}

// readDirectory reads renewalInfo from the upstream's directory:
// golang.org/x/crypto/acme's Directory has no field for it.
func (b *Backend) readDirectory(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, min(b.cfg.Timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.cfg.DirectoryURL, nil)
	if err != nil {
		return "", fmt.Errorf("%w: the upstream directory URL: %v", signer.ErrUnavailable, err)
	}
	resp, err := b.client.HTTPClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: the upstream ACME directory %s: %v", signer.ErrUnavailable, b.cfg.DirectoryURL, err)
	}
	defer resp.Body.Close()
	var dir struct {
		RenewalInfo string `json:"renewalInfo"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: the upstream ACME directory %s answered %s", signer.ErrUnavailable, b.cfg.DirectoryURL, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRenewalInfo)).Decode(&dir); err != nil {
		return "", fmt.Errorf("%w: the upstream ACME directory %s: %v", signer.ErrUnavailable, b.cfg.DirectoryURL, err)
	}
	return dir.RenewalInfo, nil
}

// pauseARI stops renewalInfo requests for wait, when the upstream said
// how long (a 429 or 5xx without Retry-After pauses nothing: the run
// stops, and the next run tries again).
func (b *Backend) pauseARI(wait time.Duration, said bool) {
	if !said {
		return
	}
	b.ariMu.Lock()
	defer b.ariMu.Unlock()
	b.ariPaused = time.Now().Add(wait)
}

func (b *Backend) ariPausedUntil() time.Time {
	b.ariMu.Lock()
	defer b.ariMu.Unlock()
	return b.ariPaused
}

// retryAfter reads a Retry-After header (delay-seconds or an HTTP-date,
// RFC 9110 §10.2.3), clamped to [minRetryAfter, maxRetryAfter];
// defaultRetryAfter when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	d := defaultRetryAfter
	if v = strings.TrimSpace(v); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			d = time.Duration(min(n, int64(365*24*3600))) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	return min(max(d, minRetryAfter), maxRetryAfter)
}

// certID is the ARI identifier of a certificate (RFC 9773 §4.1): its
// authority key identifier and its serial's DER content octets, each
// base64url without padding, joined by ".".
func certID(der []byte) (string, error) {
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return "", fmt.Errorf("a stored relay certificate does not parse: %w", err)
	}
	if len(leaf.AuthorityKeyId) == 0 {
		return "", errors.New("the upstream's certificate carries no authority key identifier, which an ARI certID needs")
	}
	ser := leaf.SerialNumber.Bytes()
	if len(ser) == 0 || ser[0]&0x80 != 0 {
		ser = append([]byte{0}, ser...) // DER INTEGER content of a positive number
	}
	return base64.RawURLEncoding.EncodeToString(leaf.AuthorityKeyId) + "." + base64.RawURLEncoding.EncodeToString(ser), nil
}
