package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/hallmark-ca/hallmark/admin/operatorca"
	"github.com/hallmark-ca/hallmark/store"
)

// Operators sign in with a client certificate on the panel's TLS listener
// (adminconf: tls_cert_file, client_ca_file): the listener verifies it
// against the operators' CA, and the panel finds its operator by the
// SHA-256 of its DER (store.Operators) and takes their role from the row.
// Nothing else about the certificate is trusted: a certificate the CA
// signed but no operator row names is refused.

// operatorFinder is what certificate sign-in reads.
type operatorFinder interface {
	OperatorByCert(ctx context.Context, sha256Hex string) (*store.Operator, error)
	AuditRecord(ctx context.Context, ev store.AuditEvent) error
}

// signInEvery is how often a certificate's use is recorded as a sign-in
// (admin.login) by one frontend: a certificate has no session to begin,
// so its first request, and the first after a quiet hour, stand for one.
const signInEvery = time.Hour

// signIns remembers when each certificate's sign-in was last recorded.
type signIns struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// record writes op's sign-in unless one was written within signInEvery;
// a failed write refuses the request, as a failed session insert does.
func (si *signIns) record(r *http.Request, st operatorFinder, op *store.Operator, fp string, now time.Time) error {
	si.mu.Lock()
	if t, ok := si.last[fp]; ok && now.Sub(t) < signInEvery {
		si.mu.Unlock()
		return nil
	}
	if si.last == nil || len(si.last) > 10000 {
		si.last = map[string]time.Time{}
	}
	si.last[fp] = now
	si.mu.Unlock()
	ev := store.AuditEvent{Actor: "admin:" + op.Name, Action: ActionLogin, Subject: op.Name,
		Detail: fmt.Sprintf("client certificate %s from %s", fp[:16], r.RemoteAddr)}
	if err := st.AuditRecord(r.Context(), ev); err != nil {
		si.mu.Lock()
		delete(si.last, fp)
		si.mu.Unlock()
		return fmt.Errorf("recording the sign-in of %s: %w", op.Name, err)
	}
	return nil
}

// CertSHA256 names a certificate as the operators table does
// (operatorca.CertSHA256).
func CertSHA256(c *x509.Certificate) string { return operatorca.CertSHA256(c) }

// errCertRefused is a client certificate the panel refuses, with why.
type errCertRefused string

func (e errCertRefused) Error() string { return string(e) }

// certPrincipal is the operator of the request's verified client
// certificate; ok is false when the request has none. A certificate no
// operator holds, one past its notAfter, or a revoked operator's is
// errCertRefused.
func (s *Server) certPrincipal(r *http.Request) (principal, bool, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return principal{}, false, nil
	}
	leaf := r.TLS.VerifiedChains[0][0]
	fp := CertSHA256(leaf)
	op, err := s.st.operators.OperatorByCert(r.Context(), fp)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return principal{}, true, errCertRefused(fmt.Sprintf("the client certificate %s… names no operator; ask an admin to run `hallmark operators add`", fp[:16]))
	case err != nil:
		return principal{}, true, err
	case op.RevokedAt != nil:
		return principal{}, true, errCertRefused(fmt.Sprintf("operator %s was revoked at %s; ask an admin for a new certificate", op.Name, op.RevokedAt.UTC().Format("2006-01-02 15:04Z")))
	case s.auth.now().After(op.NotAfter) || s.auth.now().After(leaf.NotAfter):
		return principal{}, true, errCertRefused(fmt.Sprintf("operator %s's certificate expired; ask an admin for a new one", op.Name))
	}
	if err := s.signIns.record(r, s.st.operators, op, fp, s.auth.now()); err != nil {
		return principal{}, true, err
	}
	return principal{user: op.Name, seed: "cert:" + fp, role: op.Role}, true, nil
}

// can reports whether p's role allows need; the token (a bootstrap) is
// admin.
func (p principal) can(need string) bool { return store.RoleAllows(p.role, need) }

// ServerTLS is the panel listener's TLS: its own certificate and key, and
// when clientCAFile is set, the CA whose client certificates the listener
// verifies (expiry and chain; VerifyClientCertIfGiven, so the token still
// works beside it where it is on). certPrincipal then names the operator.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("admin.tls_cert_file, admin.tls_key_file: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCAFile != "" {
		pemBytes, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("admin.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("admin.client_ca_file %s holds no PEM certificate", clientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}
