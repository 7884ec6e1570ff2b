package custom

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
)

// env is a hook's whole environment: the configured pass_env names the
// worker has, then env, then HALLMARK_BACKEND. Never the worker's own
// environment, which holds the database URL and the PKCS#11 PIN.
func (b *Backend) env() []string {
	out := []string{}
	for _, name := range b.cfg.PassEnv {
		if v, ok := os.LookupEnv(name); ok {
			out = append(out, name+"="+v)
		}
	}
	names := make([]string, 0, len(b.cfg.Env))
	for name := range b.cfg.Env {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		out = append(out, name+"="+b.cfg.Env[name])
	}
	return append(out, "HALLMARK_BACKEND="+b.cfg.Name)
}

// Window is a renewal_info hook's suggested window (RFC 9773 §4.2).
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// CRLRequest is the crl hook's stdin: the CRL Hallmark numbers, dates and
// serves at distribution_point, for the hook to sign with its CA's key.
type CRLRequest struct {
	Version           int        `json:"version"`
	Action            string     `json:"action"` // "crl"
	Number            int64      `json:"number"`
	ThisUpdate        time.Time  `json:"this_update"`
	NextUpdate        time.Time  `json:"next_update"`
	DistributionPoint string     `json:"distribution_point"`
	Revoked           []CRLEntry `json:"revoked"`
}

// CRLEntry is one revoked certificate of a CRLRequest.
type CRLEntry struct {
	Serial    string    `json:"serial"` // lower-case hex
	RevokedAt time.Time `json:"revoked_at"`
	Reason    int       `json:"reason"` // RFC 5280 §5.3.1
}

// RenewalInfoRequest is the renewal_info hook's stdin.
type RenewalInfoRequest struct {
	Version     int    `json:"version"`
	Action      string `json:"action"` // "renewal_info"
	Serial      string `json:"serial"`
	Certificate string `json:"certificate"` // PEM
}

// SignsCRLs reports whether backends.<name>.crl_command is set: then the
// worker schedules this backend's CRLs as it does a local issuer's.
func (b *Backend) SignsCRLs() bool { return len(b.cfg.CRLCommand) > 0 }

// SignCRL runs the crl hook and checks that its CRL is the one asked for:
// the number and every revoked serial.
func (b *Backend) SignCRL(number int64, thisUpdate, nextUpdate time.Time, entries []signer.RevokedEntry, idpURL string) ([]byte, error) {
	if !b.SignsCRLs() {
		return nil, acme.Internal(fmt.Errorf("backend %s has no crl_command", b.cfg.Name))
	}
	req := CRLRequest{Version: Version, Action: "crl", Number: number, ThisUpdate: thisUpdate.UTC(), NextUpdate: nextUpdate.UTC(),
		DistributionPoint: idpURL, Revoked: make([]CRLEntry, 0, len(entries))}
	for _, e := range entries {
		req.Revoked = append(req.Revoked, CRLEntry{Serial: signer.SerialHex(e.Serial), RevokedAt: e.RevokedAt.UTC(), Reason: e.Reason})
	}
	// The worker's CRL job is bounded by the hook's own timeout (run).
	resp, err := b.run(context.Background(), b.cfg.CRLCommand, req)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode([]byte(resp.CRL))
	if blk == nil || blk.Type != "X509 CRL" {
		return nil, fmt.Errorf("%w: the crl hook of backend %s answered no PEM \"X509 CRL\" in crl", signer.ErrUnavailable, b.cfg.Name)
	}
	crl, err := x509.ParseRevocationList(blk.Bytes)
	if err != nil {
		return nil, acme.Internal(fmt.Errorf("the crl hook of backend %s answered a CRL that does not parse: %w", b.cfg.Name, err))
	}
	if crl.Number == nil || crl.Number.Cmp(big.NewInt(number)) != 0 {
		return nil, acme.Internal(fmt.Errorf("the crl hook of backend %s answered CRL number %v, want %d", b.cfg.Name, crl.Number, number))
	}
	listed := map[string]bool{}
	for _, e := range crl.RevokedCertificateEntries {
		listed[signer.SerialHex(e.SerialNumber)] = true
	}
	for _, e := range req.Revoked {
		if !listed[e.Serial] {
			return nil, acme.Internal(fmt.Errorf("the crl hook of backend %s left revoked serial %s off its CRL", b.cfg.Name, e.Serial))
		}
	}
	return blk.Bytes, nil
}

// renewalInfoPerRun is how many certificates one refresh asks the
// renewal_info hook about.
const renewalInfoPerRun = 100

// RenewalInfoPerRun is 0 without a renewal_info hook: the worker then
// schedules no refresh for this backend (worker/upstream.go).
func (b *Backend) RenewalInfoPerRun() int {
	if len(b.cfg.RenewalInfoCommand) == 0 {
		return 0
	}
	return renewalInfoPerRun
}

// defaultRetryAfter is the wait before asking about a certificate again
// when the hook names none: RFC 9773 §4.3's six hours.
const defaultRetryAfter = 6 * time.Hour

// RenewalInfo runs the renewal_info hook for one certificate (DER). Its
// answer is a suggested_window, or status "unknown" (no window: Hallmark's
// own stands); retry_after_seconds says when to ask again.
func (b *Backend) RenewalInfo(ctx context.Context, der []byte) (*signer.RenewalInfo, error) {
	if len(b.cfg.RenewalInfoCommand) == 0 {
		return nil, signer.ErrNoRenewalInfo
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("a certificate of backend %s does not parse: %w", b.cfg.Name, err)
	}
	req := RenewalInfoRequest{Version: Version, Action: "renewal_info", Serial: signer.SerialHex(cert.SerialNumber),
		Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
	resp, err := b.run(ctx, b.cfg.RenewalInfoCommand, req)
	var verdict *acme.Error
	if errors.As(err, &verdict) {
		// A refusal about this certificate: ask again later.
		return &signer.RenewalInfo{RetryAfter: defaultRetryAfter}, nil
	}
	if err != nil {
		return nil, err
	}
	info := &signer.RenewalInfo{ExplanationURL: resp.ExplanationURL, RetryAfter: defaultRetryAfter}
	if resp.RetryAfter > 0 {
		info.RetryAfter = time.Duration(resp.RetryAfter) * time.Second
	}
	switch {
	case resp.SuggestedWindow != nil && resp.SuggestedWindow.End.After(resp.SuggestedWindow.Start):
		info.Start, info.End = resp.SuggestedWindow.Start, resp.SuggestedWindow.End
	case resp.SuggestedWindow == nil && resp.Status == "unknown":
	default:
		return nil, fmt.Errorf("%w: the renewal_info hook of backend %s answered neither a suggested_window whose end is after its start nor status \"unknown\"", signer.ErrUnavailable, b.cfg.Name)
	}
	return info, nil
}
