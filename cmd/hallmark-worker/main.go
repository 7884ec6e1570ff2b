// Command hallmark-worker does Hallmark's queued work: challenge validation,
// signing, CRLs and housekeeping. It is the only binary that holds signing
// keys, and it never serves the public API.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/cmd/internal/process"
	"github.com/hallmark-ca/hallmark/cmd/internal/reload"
	"github.com/hallmark-ca/hallmark/cmd/internal/version"
	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/profile"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/store/redact"
	"github.com/hallmark-ca/hallmark/worker"
	"github.com/hallmark-ca/hallmark/worker/notifysend"
)

func main() {
	configFlag := &cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"HALLMARK_CONFIG"}, Usage: "configuration file (TOML)"}
	app := &cli.App{
		Name:    "hallmark-worker",
		Usage:   "validate challenges, sign certificates and CRLs",
		Version: version.Get().String(),
		Flags:   []cli.Flag{configFlag},
		Action:  run,
		Commands: []*cli.Command{
			{
				Name:  "check-config",
				Usage: "validate the configuration, with the settings only the worker needs, and exit",
				Action: func(c *cli.Context) error {
					if _, err := config.LoadWorker(c.String("config")); err != nil {
						return cli.Exit(err.Error(), 2)
					}
					fmt.Println("configuration is valid")
					return nil
				},
			},
			{
				Name:  "ca",
				Usage: "manage the local CA",
				Subcommands: []*cli.Command{{
					Name:  "init",
					Usage: "create a root and an intermediate in ca.dir (and optionally a TLS certificate for the frontend)",
					Flags: []cli.Flag{
						&cli.StringFlag{Name: "name", Value: "Hallmark Development", Usage: "common name prefix of the CA certificates"},
						&cli.StringFlag{Name: "tls-cert", Usage: "also issue a TLS server certificate for the frontend to this path"},
						&cli.StringFlag{Name: "tls-key", Usage: "where to write the TLS certificate's key"},
						&cli.StringFlag{Name: "tls-names", Value: "localhost,127.0.0.1,::1", Usage: "comma-separated names and IPs of the TLS certificate"},
						&cli.StringSliceFlag{Name: "pkcs11", Usage: "also generate the key of this [backends.<name>] (type pkcs11) on its token and write its certificate, signed by the root; repeatable"},
						&cli.StringFlag{Name: "key-type", Value: "p256", Usage: "issuing key type generated on the token: p256, p384, rsa2048, rsa3072, rsa4096"},
						&cli.BoolFlag{Name: "cross-root", Usage: "also make a second root (\"<name> Root CA X2\") that cross-signs the intermediate: an alternate chain for every certificate"},
					},
					Action: caInit,
				}, {
					Name:  "intermediate",
					Usage: "create a new intermediate under the root of ca.dir (cross-signed by the second root when there is one) and record it as an issuer",
					Flags: []cli.Flag{
						&cli.StringFlag{Name: "name", Required: true, Usage: "the intermediate's common name"},
						&cli.StringFlag{Name: "key-type", Value: "p256", Usage: "issuing key type: p256, p384, rsa2048, rsa3072, rsa4096"},
						&cli.StringFlag{Name: "pkcs11", Usage: "generate the key on the token of this [backends.<name>] (type pkcs11) instead of in ca.dir"},
						&cli.StringFlag{Name: "key-label", Usage: "with --pkcs11: the new key's label on the token (default hallmark-issuer-<random>)"},
						&cli.StringFlag{Name: "actor", Usage: "who asked, for the audit log (default cli:<user>)"},
					},
					Action: caIntermediate,
				}, {
					Name:   "root-crl",
					Usage:  "sign each root's CRL again (valid 12 months) and publish it: run it where the root keys are, before the last one's nextUpdate",
					Action: caRootCRL,
				}},
			},
			version.Command("hallmark-worker"),
		},
	}
	cli.ErrWriter = process.MaskedStderr() // urfave/cli prints a cli.Exit's message itself
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "hallmark-worker:", redact.Text(err.Error()))
		os.Exit(1)
	}
}

func caInit(c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	root, err := signer.InitLocal(cfg.CA.Dir, caOptions(cfg, c.String("name")))
	switch {
	case errors.Is(err, signer.ErrExists):
		fmt.Printf("CA already exists in %s (left unchanged)\n", cfg.CA.Dir)
		root = filepath.Join(cfg.CA.Dir, "root.pem")
	case err != nil:
		return err
	default:
		fmt.Printf("created a root and an intermediate in %s\n", cfg.CA.Dir)
	}
	fmt.Printf("root certificate: %s\n", root)
	if c.Bool("cross-root") {
		if err := caCrossRoot(cfg, c.String("name")); err != nil {
			return err
		}
	}
	for _, name := range c.StringSlice("pkcs11") {
		if err := initPKCS11(c, cfg, name); err != nil {
			return err
		}
	}
	publishRootCRLsNow(c.Context, cfg)
	if certPath := c.String("tls-cert"); certPath != "" {
		if _, err := os.Stat(certPath); err == nil {
			fmt.Printf("TLS certificate %s already exists (left unchanged)\n", certPath)
			return nil
		}
		iss, err := signer.LoadLocal(cfg.CA.Dir)
		if err != nil {
			return err
		}
		if err := issueTLS(c.Context, cfg, iss, splitNames(c.String("tls-names")), certPath, c.String("tls-key")); err != nil {
			return err
		}
		fmt.Printf("frontend TLS certificate: %s\n", certPath)
	}
	return nil
}

// issueTLS issues the frontend's own server certificate from the local CA,
// through the same lint-before-sign path as every other certificate.
func issueTLS(ctx context.Context, cfg config.Config, iss *signer.Issuer, names []acme.Identifier, certPath, keyPath string) error {
	if keyPath == "" {
		return fmt.Errorf("--tls-key is needed with --tls-cert")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	issued, err := iss.Issue(ctx, signer.Request{
		Profile: profile.Profile{
			ValidityHours: 180 * 24, KeyTypes: []string{"p256"}, IdentifierTypes: []string{"dns", "ip"},
			KeyUsages: []string{"digitalSignature"}, ExtKeyUsages: []string{"serverAuth"},
		},
		ProfileName: "frontend-tls",
		Names:       names,
		PublicKey:   key.Public(),
		IssuerURL:   cfg.CA.URLBase + "/issuer/" + iss.ID,
		CRLURL:      cfg.CA.URLBase + "/crl/" + iss.ID,
	})
	if err != nil {
		return fmt.Errorf("issuing the frontend TLS certificate: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, issued.ChainPEM, 0o644)
}

func splitNames(s string) []acme.Identifier {
	var ids []acme.Identifier
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if net.ParseIP(n) != nil {
			ids = append(ids, acme.Identifier{Type: acme.IdentifierIP, Value: n})
		} else {
			ids = append(ids, acme.Identifier{Type: acme.IdentifierDNS, Value: n})
		}
	}
	return ids
}

// mountIssuers builds the key-holding backend (local, pkcs11) of every
// profile this worker serves (worker.profiles, or all when empty); relay and
// custom profiles are mountBackends'.
func mountIssuers(cfg config.Config, ts *tokens) (map[string]*signer.Issuer, error) {
	serves := servesProfile(cfg)
	var local *signer.Issuer
	out := map[string]*signer.Issuer{}
	for name, p := range cfg.Profiles {
		if !serves(name) {
			continue
		}
		switch p.Backend {
		case "local":
			if local == nil {
				iss, err := signer.LoadLocal(cfg.CA.Dir)
				if err != nil {
					return nil, fmt.Errorf("profiles.%s: loading the local CA from ca.dir %s (run `hallmark-worker ca init` first): %w", name, cfg.CA.Dir, err)
				}
				local = iss
			}
			out[name] = local
		case "pkcs11":
			iss, err := ts.mount(cfg, p.Signer)
			if err != nil {
				return nil, fmt.Errorf("profiles.%s: %w", name, err)
			}
			out[name] = iss
		case "relay", "custom":
			// No key here: mountBackends builds them.
		default:
			return nil, fmt.Errorf("profiles.%s.backend: %q is not available in this build yet", name, p.Backend)
		}
	}
	return out, nil
}

// jobMetrics registers the job runner's metrics and the queue's depth,
// read at scrape time in one grouped query (jobs/metrics.go).
func jobMetrics(reg prometheus.Registerer, q jobs.Queue) (*jobs.Metrics, error) {
	if err := reg.Register(jobs.NewDepthCollector(q, 2*time.Second)); err != nil {
		return nil, fmt.Errorf("registering the queue depth metrics: %w", err)
	}
	return jobs.NewMetrics(reg)
}

// processRegistry is the worker's metrics registry, with the Go runtime's
// and the process's collectors.
func processRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func run(c *cli.Context) error {
	cfg, err := config.LoadWorker(c.String("config"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	log := process.Logger("worker", cfg.Log).With("worker", cfg.Worker.ID)
	log.Info("starting", "version", version.Get().String())
	log.Debug("garbage collector target", "gogc", process.TuneGC()) // cmd/internal/process
	ctx, stop := process.SignalContext()
	defer stop()
	hangups := process.Hangups(ctx) // before anything slow: a SIGHUP must not end the process

	ts := newTokens()
	issuers, unavailable := mountAvailable(cfg, ts, log)
	db, err := open.Open(ctx, cfg.Database.URL, cfg.Database.MaxConns)
	if err != nil {
		return err
	}
	defer db.Close()
	lv := &live{path: c.String("config"), log: log, st: db.Store, tokens: ts}
	lv.cfg.Store(&cfg)
	db.NotifyRoute(lv.route)
	backends, err := mountBackends(cfg, log, db.Store)
	if err != nil {
		return err
	}
	process.LogAdvice(ctx, db, log)
	// The frontend serves issuer certificates at the AIA URL but never sees
	// the CA's files: publish them.
	if err := publishIssuers(ctx, cfg, db.Store, issuers, log); err != nil {
		return err
	}
	publishRootCRLsAtStart(ctx, cfg, db.Store, log)
	managed, load, err := managedIssuers(ctx, func() config.Config { return *lv.cfg.Load() }, db.Store, log)
	if err != nil {
		return err
	}
	sender, err := notifysend.New(cfg.Notify, log)
	if err != nil {
		return err
	}
	reg := processRegistry()
	if err := reg.Register(rootCRLCollector{st: db.Store, ids: rootIDs(cfg.CA.Dir)}); err != nil {
		return err
	}
	w, err := worker.New(workerConfig(cfg), db.Store, worker.Options{Logger: log, Registry: reg, Issuers: issuers, Backends: backends,
		Notify: sender.Handle, ExpiryDays: cfg.Notify.ExpiryDays, Managed: managed, Load: load})
	if err != nil {
		return err
	}
	lv.jobs = worker.NewLive(w)
	runner, err := startJobs(ctx, cfg, w, lv.jobs, db.Queue, reg)
	if err != nil {
		return err
	}
	if err := process.ServeProfiling(ctx, cfg.Worker.PprofListen, log); err != nil {
		return err
	}
	log.Info("worker started", "queues", w.Queues())
	lv.ready = newReadiness(ctx, w.Ready, &mountState{mounted: issuers, unavailable: unavailable}, log)
	go (&reload.Watcher{Actor: actorFor(cfg), Store: db.Store, Log: log, Apply: lv.apply, Hangups: hangups}).Run(ctx)

	if err := serveHealth(ctx, cfg.Worker.HealthListen, backendsReady(lv.jobs, lv.ready), reg); err != nil {
		return err
	}

	<-ctx.Done()
	log.Info("stopping: no new jobs are fetched; running jobs get up to 10s")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return runner.Stop(sctx)
}

// startJobs starts the job runner on q with the live worker's handlers,
// and has both follow it: a reload adding a profile adds its queue.
func startJobs(ctx context.Context, cfg config.Config, w *worker.Worker, lj *worker.Live, q jobs.Queue, reg prometheus.Registerer) (jobs.Runner, error) {
	handlers, err := lj.Registry()
	if err != nil {
		return nil, err
	}
	settings := w.JobSettings()
	settings.Logger = process.QuietLogger("worker", cfg.Log).With("worker", cfg.Worker.ID)
	if settings.Metrics, err = jobMetrics(reg, q); err != nil {
		return nil, err
	}
	runner, err := q.Start(ctx, handlers, settings)
	if err != nil {
		return nil, err
	}
	w.Attach(runner)
	lj.Follow(runner)
	return runner, nil
}

// serveHealth serves /healthz, /readyz and /metrics on worker.health_listen
// until ctx ends; an empty listen serves nothing.
func serveHealth(ctx context.Context, listen string, readyz http.Handler, reg *prometheus.Registry) error {
	if listen == "" {
		return nil
	}
	mux := http.NewServeMux()
	line := version.Line("hallmark-worker")
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintf(rw, "ok\n%s\n", line) })
	mux.Handle("/readyz", readyz)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on worker.health_listen %s: %w", listen, err)
	}
	go func() {
		_ = process.Serve(ctx, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln, "", "", time.Second)
	}()
	return nil
}
