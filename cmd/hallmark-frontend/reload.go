package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/accesswire"
	"github.com/hallmark-ca/hallmark/cmd/internal/reload"
	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
)

// live is what a reload switches in the frontend, each part read through
// an atomic pointer by the requests and handshakes that start after it:
// the configuration (its [notify] routes the store's events), the ACME
// server's snapshot, the TLS certificate, and the admin panel's profiles.
type live struct {
	path     string
	log      *slog.Logger
	cfg      atomic.Pointer[config.Config]
	cert     atomic.Pointer[tls.Certificate]
	srv      *protocol.Server
	panel    *admin.Server              // nil: no [admin] listen
	revokers revocation.Store           // the panel's revocations, built again per reload
	retired  map[string]profile.Profile // profiles reloads removed (retire); apply's alone
}

func newLive(path string, cfg config.Config, log *slog.Logger) (*live, error) {
	l := &live{path: path, log: log}
	l.cfg.Store(&cfg)
	if tlsOn(cfg) {
		c, err := loadCert(cfg)
		if err != nil {
			return nil, err
		}
		if err := validNow(cfg, c); err != nil {
			log.Warn("serving a TLS certificate that clients will refuse", "err", err) // as before reload existed
		}
		l.cert.Store(c)
	}
	return l, nil
}

func tlsOn(cfg config.Config) bool { return !cfg.Server.PlainHTTP && cfg.Server.TLSCert != "" }

// route is [notify]'s routes as of now, for the store's events.
func (l *live) route(event string) []string { return l.cfg.Load().Notify.Route(event) }

// tlsConfig serves the current certificate: a handshake after a reload
// presents the new one, a connection made before keeps its own.
func (l *live) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return l.cert.Load(), nil
		},
	}
}

// loadCert reads server.tls_cert and tls_key: the key must be the
// certificate's.
func loadCert(cfg config.Config) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(cfg.Server.TLSCert, cfg.Server.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("server.tls_cert %s, server.tls_key %s: %w", cfg.Server.TLSCert, cfg.Server.TLSKey, err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("server.tls_cert %s: %w", cfg.Server.TLSCert, err)
	}
	c.Leaf = leaf
	return &c, nil
}

// validNow refuses a certificate outside its validity: a reload does not
// replace a working certificate with one every client refuses.
func validNow(cfg config.Config, c *tls.Certificate) error {
	if now := time.Now(); now.After(c.Leaf.NotAfter) || now.Before(c.Leaf.NotBefore) {
		return fmt.Errorf("server.tls_cert %s: valid from %s to %s, not now", cfg.Server.TLSCert,
			c.Leaf.NotBefore.UTC().Format(time.RFC3339), c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// protocolConfig is the ACME server's part of cfg.
func protocolConfig(cfg config.Config, retired map[string]profile.Profile) protocol.Config {
	return protocol.Config{Server: cfg.Server, Limits: cfg.Limits, Policy: cfg.Policy,
		Profiles: cfg.Profiles, DefaultProfile: cfg.DefaultProfile, Retired: retired}
}

// retire is the profiles of old (and those retired before) that next
// lacks: orders placed under them may still be finalized until restart.
func retire(old config.Config, before map[string]profile.Profile, next config.Config) map[string]profile.Profile {
	out := map[string]profile.Profile{}
	for _, m := range []map[string]profile.Profile{before, old.Profiles} {
		for name, p := range m {
			if _, ok := next.Profiles[name]; !ok {
				out[name] = p
			}
		}
	}
	return out
}

// apply reads the file again, checks it whole (cmd/config, as at start),
// builds the access policy, the certificate and the server's snapshot, and
// only then switches them, none of which can fail: all or nothing.
func (l *live) apply(context.Context) error {
	next, err := config.Load(l.path)
	if err != nil {
		return err
	}
	if err := reload.Check(reload.FrontendKeys, *l.cfg.Load(), next); err != nil {
		return err
	}
	pol, err := accesswire.Policy(next)
	if err != nil {
		return fmt.Errorf("access: %w", err)
	}
	var cert *tls.Certificate
	if tlsOn(next) {
		if cert, err = loadCert(next); err != nil {
			return err
		}
		if err := validNow(next, cert); err != nil {
			return err
		}
	}
	retired := retire(*l.cfg.Load(), l.retired, next)
	pc := protocolConfig(next, retired)
	if err := l.srv.Reload(pc, pol); err != nil {
		return err
	}
	for name := range retired {
		if _, was := l.retired[name]; !was {
			l.log.Info("profile removed: no longer offered; orders placed under it may still be finalized until restart", "profile", name)
		}
	}
	l.retired = retired
	if cert != nil {
		l.cert.Store(cert)
	}
	if l.panel != nil {
		l.panel.Reload(pc.KnownProfiles(), revocation.New(l.revokers, pc.KnownProfiles()))
	}
	l.cfg.Store(&next)
	if pol.Warn() {
		l.log.Warn("access policy in mode warn: requests it would refuse are logged and allowed")
	}
	return nil
}

// actor names this frontend in the audit log.
func actor() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("frontend:%s-%d", host, os.Getpid())
}
