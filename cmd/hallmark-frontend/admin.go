package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hallmark-ca/hallmark/admin"
	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/process"
	"github.com/hallmark-ca/hallmark/cmd/internal/version"
	"github.com/hallmark-ca/hallmark/protocol/revocation"
	"github.com/hallmark-ca/hallmark/store/open"
)

// serveAdmin starts the operator panel on admin.listen — its own listener,
// never the public ACME one — when configured. It returns once listening;
// the panel stops with ctx. The panel is nil when none is configured.
// cfgPath is the file cfg was read from: the issuers page's create form
// hands it to hallmark-worker, which makes the key in its own process.
func serveAdmin(ctx context.Context, cfgPath string, cfg config.Config, db *open.DB, log *slog.Logger) (*admin.Server, error) {
	if cfg.Admin.Listen == "" {
		return nil, nil
	}
	var token string
	var err error
	if !cfg.Admin.TokenOff {
		if token, err = admin.LoadToken(cfg.Admin); err != nil {
			return nil, err
		}
	}
	oidcOpts, err := admin.LoadOIDC(cfg.Admin)
	if err != nil {
		return nil, err
	}
	pauseAfter, pauseMin := cfg.Limits.Pause()
	panel, err := admin.New(admin.Options{
		PauseAfter: pauseAfter, PauseMinFailures: pauseMin,
		Store: db.Store, Queue: db.Queue, Token: token, TokenOff: cfg.Admin.TokenOff,
		Revoker:       revocation.New(db.Store, cfg.Profiles),
		CRLBase:       cfg.CA.URLBase,
		SecureCookies: cfg.Admin.SecureCookies,
		RevokeWait:    5 * time.Second,
		Profiles:      cfg.Profiles,
		Logger:        log.With("component", "admin"),
		Version:       version.Get().String(),
		ConfigPath:    cfgPath,
		OIDC:          oidcOpts,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on admin.listen %s: %w", cfg.Admin.Listen, err)
	}
	scheme := "http"
	if cfg.Admin.TLSCertFile != "" {
		tc, err := admin.ServerTLS(cfg.Admin.TLSCertFile, cfg.Admin.TLSKeyFile, cfg.Admin.ClientCAFile)
		if err != nil {
			return nil, err
		}
		ln, scheme = tls.NewListener(ln, tc), "https"
	}
	hs := &http.Server{Handler: panel.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 32 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := process.Serve(ctx, hs, ln, "", "", 5*time.Second); err != nil {
			log.Error("admin listener", "err", err)
		}
	}()
	log.Info("admin panel", "url", scheme+"://"+ln.Addr().String()+"/", "client_certificates", cfg.Admin.ClientCAFile != "", "token", !cfg.Admin.TokenOff, "oidc", cfg.Admin.OIDC.Issuer)
	return panel, nil
}
