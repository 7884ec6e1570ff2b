// Command hallmark-frontend serves the public ACME API. It parses JWS and
// CSRs, claims and queues work, and never holds key material: the layering
// test fails if it links signer/ or a PKCS#11 library.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/accesswire"
	"github.com/hallmark-ca/hallmark/cmd/internal/process"
	"github.com/hallmark-ca/hallmark/cmd/internal/reload"
	"github.com/hallmark-ca/hallmark/cmd/internal/version"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol"
	"github.com/hallmark-ca/hallmark/protocol/verdict"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/redact"
)

func main() {
	app := &cli.App{
		Name:    "hallmark-frontend",
		Usage:   "serve the public ACME API (RFC 8555)",
		Version: version.Get().String(),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"HALLMARK_CONFIG"}, Usage: "configuration file (TOML)"},
		},
		Action: run,
		Commands: []*cli.Command{{
			Name:  "check-config",
			Usage: "validate the configuration and exit",
			Action: func(c *cli.Context) error {
				if _, err := config.Load(c.String("config")); err != nil {
					return cli.Exit(err.Error(), 2)
				}
				fmt.Println("configuration is valid")
				return nil
			},
		}, version.Command("hallmark-frontend")},
	}
	cli.ErrWriter = process.MaskedStderr() // urfave/cli prints a cli.Exit's message itself
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "hallmark-frontend:", redact.Text(err.Error()))
		os.Exit(1)
	}
}

func run(c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	log := process.Logger("frontend", cfg.Log)
	log.Info("starting", "version", version.Get().String())
	log.Debug("garbage collector target", "gogc", process.TuneGC()) // cmd/internal/process
	ctx, stop := process.SignalContext()
	defer stop()
	hangups := process.Hangups(ctx) // before anything slow: a SIGHUP must not end the process
	lv, err := newLive(c.String("config"), cfg, log)
	if err != nil {
		return err
	}

	db, err := open.Open(ctx, cfg.Database.URL, cfg.Database.MaxConns)
	if err != nil {
		return err
	}
	defer db.Close()
	db.NotifyRoute(lv.route)
	process.LogAdvice(ctx, db, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The queue's depth from the frontend too: it is what shows jobs piling
	// up when no worker is running to export it (jobs/metrics.go).
	reg.MustRegister(jobs.NewDepthCollector(db.Queue, 2*time.Second))
	pol, err := accesswire.Policy(cfg)
	if err != nil {
		return err
	}
	if pol.Warn() {
		log.Warn("access policy in mode warn: requests it would refuse are logged and allowed")
	}
	var verdicts protocol.Verdicts
	if cfg.Server.VerdictWaitMS > 0 {
		verdicts = watchVerdicts(ctx, db, log)
	}
	srv, err := protocol.New(protocolConfig(cfg, nil), db.Store,
		protocol.Options{Logger: log, Registry: reg, Gatherer: reg, Version: version.Line("hallmark-frontend"), Access: pol, Verdicts: verdicts})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listening on server.listen %s: %w", cfg.Server.Listen, err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.Server.RequestTimeout(),
		WriteTimeout:      cfg.Server.RequestTimeout() + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    32 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if tlsOn(cfg) {
		hs.TLSConfig = lv.tlsConfig()
	}
	lv.srv, lv.revokers = srv, db.Store
	if err := servePublic(ctx, cfg, srv, log); err != nil {
		return err
	}
	if err := process.ServeProfiling(ctx, cfg.Server.PprofListen, log); err != nil {
		return err
	}
	if lv.panel, err = serveAdmin(ctx, c.String("config"), cfg, db, log); err != nil {
		return err
	}
	watcher := &reload.Watcher{Actor: actor(), Store: db.Store, Log: log, Apply: lv.apply, Hangups: hangups}
	go watcher.Run(ctx)
	log.Info("ACME directory", "url", cfg.Server.BaseURL+"/directory", "listen", ln.Addr().String(), "tls", tlsOn(cfg))
	return process.Serve(ctx, hs, ln, "", "", 10*time.Second)
}

// servePublic starts server.public_http_listen, when configured: CRLs,
// issuer certificates and relay http-01 answers over plain http.
func servePublic(ctx context.Context, cfg config.Config, srv *protocol.Server, log *slog.Logger) error {
	if cfg.Server.PublicHTTPListen == "" {
		return nil
	}
	pln, err := net.Listen("tcp", cfg.Server.PublicHTTPListen)
	if err != nil {
		return fmt.Errorf("listening on server.public_http_listen %s: %w", cfg.Server.PublicHTTPListen, err)
	}
	ps := &http.Server{Handler: srv.PublicHandler(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go func() {
		if err := process.Serve(ctx, ps, pln, "", "", 5*time.Second); err != nil {
			log.Error("public http listener", "err", err)
		}
	}()
	log.Info("CRLs and issuer certificates over plain http", "url", cfg.CA.URLBase)
	return nil
}

// watchVerdicts starts the frontend's one watch of the workers' verdicts
// (store/open.DB.WatchVerdicts), for the requests that wait for one
// (server.verdict_wait_ms); it stops with ctx.
func watchVerdicts(ctx context.Context, db *open.DB, log *slog.Logger) *verdict.Hub {
	hub := verdict.New()
	go func() {
		if err := db.WatchVerdicts(ctx, hub); err != nil && ctx.Err() == nil {
			log.Error("watching verdicts: requests answer processing at once", "err", err)
		}
	}()
	return hub
}
