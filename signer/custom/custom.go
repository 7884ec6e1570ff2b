package custom

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/signer/signerconf"
)

// Version is the contract's version, sent in every request.
const Version = 1

// maxOutput bounds what is read from a hook's stdout and kept of its stderr.
const maxOutput = 1 << 20

// Config is one [backends.<name>] of type custom: its hooks from the file
// and what the worker adds.
type Config struct {
	signerconf.Custom
	Name    string
	Timeout time.Duration
	Logger  *slog.Logger
}

// Backend runs the hooks.
type Backend struct{ cfg Config }

// New checks that the hooks exist and are executable.
func New(cfg Config) (*Backend, error) {
	hooks := map[string][]string{"issue_command": cfg.IssueCommand, "revoke_command": cfg.RevokeCommand,
		"crl_command": cfg.CRLCommand, "renewal_info_command": cfg.RenewalInfoCommand}
	for what, argv := range hooks {
		if len(argv) == 0 {
			if what == "crl_command" || what == "renewal_info_command" {
				continue // optional (optional.go)
			}
			return nil, fmt.Errorf("backends.%s.%s: no command", cfg.Name, what)
		}
		if _, err := exec.LookPath(argv[0]); err != nil {
			return nil, fmt.Errorf("backends.%s.%s: %w", cfg.Name, what, err)
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Backend{cfg: cfg}, nil
}

// IssuerID names the backend in certificate rows.
func (b *Backend) IssuerID() string { return "custom:" + b.cfg.Name }

// Identifier is an order identifier as hooks see it.
type Identifier struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// IssueRequest is the issue hook's stdin.
type IssueRequest struct {
	Version int    `json:"version"`
	Action  string `json:"action"` // "issue"
	// OrderID is the Hallmark order the certificate is for, the same in
	// every run for it: a run killed by its timeout or by a worker's
	// restart after the hook's CA issued is run again with it, and a hook
	// that returns what it issued earlier for the same order_id issues
	// one certificate, not two.
	OrderID       string       `json:"order_id"`
	Profile       string       `json:"profile"`
	Identifiers   []Identifier `json:"identifiers"`
	CSR           string       `json:"csr"` // PEM
	ValidityHours int          `json:"validity_hours"`
	NotBefore     *time.Time   `json:"not_before,omitempty"`
	NotAfter      *time.Time   `json:"not_after,omitempty"`
}

// RevokeRequest is the revoke hook's stdin.
type RevokeRequest struct {
	Version     int    `json:"version"`
	Action      string `json:"action"` // "revoke"
	Serial      string `json:"serial"` // lower-case hex
	Certificate string `json:"certificate"`
	Reason      int    `json:"reason"` // RFC 5280 §5.3.1
}

// Response is what a hook writes to stdout: a chain (issue), "revoked"
// (revoke), a CRL (crl), a window or "unknown" (renewal_info), or an error
// that is the backend's verdict on the request.
type Response struct {
	CertificateChain string  `json:"certificate_chain,omitempty"`
	Status           string  `json:"status,omitempty"`
	CRL              string  `json:"crl,omitempty"` // PEM "X509 CRL"
	SuggestedWindow  *Window `json:"suggested_window,omitempty"`
	ExplanationURL   string  `json:"explanation_url,omitempty"`
	RetryAfter       int     `json:"retry_after_seconds,omitempty"`
	Error            *struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	} `json:"error,omitempty"`
}

// Issue runs the issue hook for the order.
func (b *Backend) Issue(ctx context.Context, r signer.Request, csr *x509.CertificateRequest) (*signer.Issued, error) {
	req := IssueRequest{Version: Version, Action: "issue", OrderID: r.OrderID, Profile: r.ProfileName,
		CSR:           string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr.Raw})),
		ValidityHours: r.Profile.ValidityHours}
	if r.Profile.AllowValidityRequest {
		req.NotBefore, req.NotAfter = r.NotBefore, r.NotAfter
	}
	for _, id := range r.Names {
		req.Identifiers = append(req.Identifiers, Identifier{Type: string(id.Type), Value: id.Value})
	}
	resp, err := b.run(ctx, b.cfg.IssueCommand, req)
	if err != nil {
		return nil, err
	}
	if resp.CertificateChain == "" {
		return nil, fmt.Errorf("%w: the issue hook of backend %s answered neither certificate_chain nor error", signer.ErrUnavailable, b.cfg.Name)
	}
	return checkChain([]byte(resp.CertificateChain), r, csr)
}

// Revoke runs the revoke hook.
func (b *Backend) Revoke(ctx context.Context, serial string, der []byte, reason int) error {
	req := RevokeRequest{Version: Version, Action: "revoke", Serial: serial, Reason: reason,
		Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
	resp, err := b.run(ctx, b.cfg.RevokeCommand, req)
	if err != nil {
		return err
	}
	if resp.Status != "revoked" {
		return fmt.Errorf("%w: the revoke hook of backend %s answered status %q, want \"revoked\" or an error", signer.ErrUnavailable, b.cfg.Name, resp.Status)
	}
	return nil
}

// run runs one hook. A hook that cannot be started, exits non-zero, times
// out or answers something unreadable could not do the work: that is
// signer.ErrUnavailable (the job is retried), with the stderr tail for the
// attempt log. An answered error is the backend's verdict: an *acme.Error.
func (b *Backend) run(ctx context.Context, argv []string, req any) (*Response, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr capped
	stdout.max, stderr.max = maxOutput, maxOutput
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = b.env()
	// The hook's children die with it on a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	start := time.Now()
	err = cmd.Run()
	log := b.cfg.Logger.With("backend", b.cfg.Name, "hook", argv[0], "duration", time.Since(start).Round(time.Millisecond))
	if s := tail(stderr.String()); s != "" {
		log.Info("hook stderr", "stderr", s)
	}
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("%w: hook %s of backend %s ran longer than %s and was killed; stderr: %s", signer.ErrUnavailable, argv[0], b.cfg.Name, b.cfg.Timeout, tail(stderr.String()))
	}
	// A hook that exited 0 but left a child holding its stdout (a
	// notification sent in the background) has done its work: its answer
	// was written before it exited. Treating that as "could not run" would
	// retry a revocation already made, or a certificate already issued.
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		log.Warn("hook exited 0 but a process it started kept its stdout or stderr open; its answer is used, and the process is left running")
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: hook %s of backend %s: %v; stderr: %s", signer.ErrUnavailable, argv[0], b.cfg.Name, err, tail(stderr.String()))
	}
	if stdout.over {
		return nil, fmt.Errorf("%w: hook %s of backend %s wrote more than %d bytes on stdout, the most a response may take; stderr: %s", signer.ErrUnavailable, argv[0], b.cfg.Name, maxOutput, tail(stderr.String()))
	}
	var resp Response
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		return nil, fmt.Errorf("%w: hook %s of backend %s wrote no valid JSON response on stdout: %v; stderr: %s", signer.ErrUnavailable, argv[0], b.cfg.Name, err, tail(stderr.String()))
	}
	if resp.Error != nil {
		typ := resp.Error.Type
		if !strings.HasPrefix(typ, "urn:ietf:params:acme:error:") {
			typ = "urn:ietf:params:acme:error:" + typ
		}
		log.Warn("hook refused", "type", typ, "detail", resp.Error.Detail)
		return nil, acme.New(acme.ProblemType(typ), "%s", resp.Error.Detail)
	}
	return &resp, nil
}

// checkChain parses the hook's chain and checks the leaf is the order's.
func checkChain(chainPEM []byte, r signer.Request, csr *x509.CertificateRequest) (*signer.Issued, error) {
	var certs []*x509.Certificate
	rest := chainPEM
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, acme.Internal(fmt.Errorf("the issue hook's certificate_chain does not parse: %w", err))
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, acme.Internal(errors.New("the issue hook's certificate_chain holds no PEM CERTIFICATE"))
	}
	leaf := certs[0]
	if pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(csr.PublicKey) {
		return nil, acme.Internal(errors.New("the issue hook returned a certificate for another public key than the CSR's"))
	}
	var want, got []string
	for _, id := range r.Names {
		v := strings.ToLower(id.Value)
		if ip := net.ParseIP(v); ip != nil && id.Type == acme.IdentifierIP {
			v = ip.String()
		}
		want = append(want, string(id.Type)+":"+v)
	}
	for _, n := range leaf.DNSNames {
		got = append(got, "dns:"+strings.ToLower(n))
	}
	for _, ip := range leaf.IPAddresses {
		got = append(got, "ip:"+ip.String())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(slices.Compact(want), slices.Compact(got)) {
		return nil, acme.Internal(fmt.Errorf("the issue hook returned a certificate for %v, but the order is for %v", got, want))
	}
	var b strings.Builder
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return &signer.Issued{
		Serial: leaf.SerialNumber, SerialHex: signer.SerialHex(leaf.SerialNumber), DER: leaf.Raw,
		ChainPEM: []byte(b.String()), NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter,
	}, nil
}

// capped keeps the first max bytes written to it and notes whether more
// came. The buffer is a field, not embedded: an embedded bytes.Buffer
// promotes ReadFrom, which io.Copy (and so os/exec) calls instead of Write,
// reading a hook's whole output into memory past the cap.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	if len(p) > room {
		c.over = true
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2048 {
		s = "…" + s[len(s)-2048:]
	}
	if s == "" {
		return "(empty)"
	}
	return s
}
